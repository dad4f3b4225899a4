// Kernel and pass bisection for the codegen backend, on a minimized candidate: which of its
// passes, when turned off, makes the failure go away, and which node, when run through eager's
// kernel instead of generated code, does; the generated kernel computing that node is the culprit.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "candidate.h"
#include "oracle.h"
#include "signature.h"

namespace crucible::minify {

struct Culprit {
  // What, turned off alone, loses the failure: fusion, packed_linear, packed_conv, fast_math,
  // decompose(OP) for each decomposition the graph uses.
  std::vector<std::string> passes;
  std::vector<std::string> nodes;  // nodes whose eager fallback loses it
  std::string kernel;              // the generated kernel computing the first of them
  std::string kernel_code;         // its source, from codegen's dump
  std::string code_hash;           // digest of all the code codegen generated for the graph
  int oracle_calls = 0;
  std::string str() const;  // "kernel cpp_fused_neg_0 (node %a); passes: fusion"
};

// Also dumps the minimized graph's generated code once (for its hash and the culprit's source).
// `base` is the oracle configuration the failure was found with (backend "codegen").
Culprit bisect_codegen(const Candidate& c, const Signature& locked, const OracleConfig& base);

}  // namespace crucible::minify
