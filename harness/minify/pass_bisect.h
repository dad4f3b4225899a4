// Kernel and pass bisection on a minimized candidate, as the backend declares it
// (plugin::Bisection): which of its passes, turned off, makes the failure go away, and which node,
// run through the reference's kernel instead of its own code, does; the kernel computing it is the
// culprit.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "candidate.h"
#include "crucible/backend_declaration.h"
#include "oracle.h"
#include "signature.h"

namespace crucible::minify {

struct Culprit {
  // What, turned off alone, loses the failure, by the declaration's names (codegen's: fusion,
  // packed_linear, decompose(OP) for each decomposition the graph uses, ...).
  std::vector<std::string> passes;
  std::vector<std::string> nodes;  // nodes whose eager fallback loses it
  std::string kernel;              // the generated kernel computing the first of them
  std::string kernel_code;         // its source, from the backend's dump
  std::string code_hash;           // digest of all the code the backend generated for the graph
  int oracle_calls = 0;
  std::string str() const;  // "kernel cpp_fused_neg_0 (node %a); passes: fusion"
};

// Whether `b` declares anything to bisect.
bool declares_bisection(const plugin::Bisection& b);

// Also dumps the minimized graph's generated code once, when the backend declares its file (for
// its hash and the culprit's source). `base` is the oracle configuration the failure was found
// with; `declared`, the backend's bisection.
Culprit bisect_passes(const Candidate& c, const Signature& locked, const OracleConfig& base,
                      const plugin::Bisection& declared);

}  // namespace crucible::minify
