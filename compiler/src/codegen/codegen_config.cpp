// Parsing of the codegen backend's -c options (see codegen_config.h).
#include "crucible/codegen/codegen_config.h"

#include <fmt/format.h>

#include <set>

#include "crucible/core/error.h"

namespace crucible::codegen {

namespace {

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "on" || v == "true") return true;
  if (v == "off" || v == "false") return false;
  throw Error(fmt::format("codegen: -c {}={} must be on or off (or true/false)", key, v));
}

size_t parse_count(const std::string& key, const std::string& v) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(v) == 0) {
    throw Error(fmt::format("codegen: -c {}={} must be a positive integer", key, v));
  }
  return std::stoul(v);
}

Injection parse_injection(const std::string& spec) {
  static const std::set<std::string> kKinds = {"times2",   "drift",    "no_cast",
                                               "offbyone", "bad_init", "crash"};
  const size_t colon = spec.find(':');
  const size_t at = spec.find('@');
  const std::string kind =
      colon == std::string::npos
          ? ""
          : spec.substr(colon + 1, at == std::string::npos ? at : at - colon - 1);
  if (colon == std::string::npos || colon == 0 || !kKinds.contains(kind) ||
      (at != std::string::npos && (at < colon || at + 1 == spec.size()))) {
    throw Error(fmt::format(
        "codegen: -c inject={} is not OP:KIND[@NAME] with KIND one of times2, drift, no_cast, "
        "offbyone, bad_init, crash",
        spec));
  }
  Injection inj{spec.substr(0, colon), kind, at == std::string::npos ? "" : spec.substr(at + 1)};
  if (inj.kind == "no_cast" && inj.op != "neg") {
    throw Error(fmt::format("codegen: -c inject={}: no_cast applies to neg only", spec));
  }
  return inj;
}

}  // namespace

CodegenConfig CodegenConfig::parse(const std::map<std::string, std::string>& pairs) {
  CodegenConfig c;
  for (const auto& [k, v] : pairs) {
    if (k == "fusion") {
      c.fusion = parse_bool(k, v);
    } else if (k == "fast_math") {
      c.fast_math = parse_bool(k, v);
    } else if (k == "max_fusion_size") {
      c.max_fusion_size = parse_count(k, v);
    } else if (k == "max_fusion_distance") {
      c.max_fusion_distance = parse_count(k, v);
    } else if (k == "kernels_per_unit") {
      c.kernels_per_unit = parse_count(k, v);
    } else if (k == "debug_dir") {
      c.debug_dir = v;
    } else if (k == "inject") {
      c.inject = parse_injection(v);
    } else if (k == "packed_linear") {
      c.packed_linear = parse_bool(k, v);
    } else if (k == "packed_conv") {
      c.packed_conv = parse_bool(k, v);
    } else if (k == "batch_slices") {
      c.batch_slices = parse_bool(k, v);
    } else if (k == "slice_budget_mb") {
      c.slice_budget_mb = parse_count(k, v);
    } else if (k == "channels_last") {
      c.channels_last = parse_bool(k, v);
    } else if (k == "chain_kernels") {
      c.chain_kernels = parse_bool(k, v);
    } else if (k == "chain_layout") {
      if (v != "auto" && v != "nhwc" && v != "nchw8c") {
        throw Error(fmt::format("codegen: -c chain_layout={}: expected auto, nhwc or nchw8c", v));
      }
      c.chain_layout = v;
    } else if (k == "conv_algorithm") {
      if (v != "direct" && v != "winograd" && v != "fastest") {
        throw Error(
            fmt::format("codegen: -c conv_algorithm={}: expected direct, winograd or fastest", v));
      }
      c.conv_algorithm = v;
    } else if (k == "eager_nodes" || k == "no_decompose") {
      for (size_t b = 0; b <= v.size();) {
        const size_t e = std::min(v.find(',', b), v.size());
        std::string name = v.substr(b, e - b);
        if (!name.empty() && name[0] == '%' && k == "eager_nodes") name.erase(0, 1);
        if (name.empty()) throw Error(fmt::format("codegen: -c {}={}: an empty name", k, v));
        (k == "eager_nodes" ? c.eager_nodes : c.no_decompose).insert(name);
        b = e + 1;
      }
    } else {
      throw Error(fmt::format(
          "codegen: unknown option -c {}={} (known: debug_dir, inject, fusion, max_fusion_size, "
          "max_fusion_distance, kernels_per_unit, fast_math, packed_linear, packed_conv, "
          "batch_slices, slice_budget_mb, "
          "channels_last, chain_layout, "
          "chain_kernels, conv_algorithm, eager_nodes, no_decompose)",
          k, v));
    }
  }
  return c;
}

}  // namespace crucible::codegen
