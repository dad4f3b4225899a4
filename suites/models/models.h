// The model builders of the zoo, one family per file, and the pieces the transformer files share.
// model_zoo.cpp lists them; each builder honours BuildOptions (variant, batch).
#pragma once

#include "crucible/models/model_zoo.h"
#include "net_builder.h"

namespace crucible::models {

// transformer suite
Graph build_mobilebert(const BuildOptions& o);
Graph build_bert_base(const BuildOptions& o);
Graph build_gpt2(const BuildOptions& o);
// vision suite
Graph build_resnet18(const BuildOptions& o);
Graph build_resnet50(const BuildOptions& o);
Graph build_mobilenet_v2(const BuildOptions& o);
Graph build_densenet121(const BuildOptions& o);
// mlp suite
Graph build_dlrm(const BuildOptions& o);
Graph build_mlp(const BuildOptions& o);

// Multi-head scaled dot-product attention over [B, S, H*D] projections; returns [B, S, H*D].
// `causal` masks each query's future keys (GPT-2), as torch's masked_fill with the dtype's minimum.
ValueId multi_head_attention(NetBuilder& b, ValueId q, ValueId k, ValueId v, int64_t heads,
                             bool causal);

}  // namespace crucible::models
