// The OpenBLAS cores a libtorch peer offers the harness to time (see blas_cores.h), with the probe
// graph: bert_base's GEMM shapes, on ATen's BLAS path.
#include "blas_cores.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace crucible::libtorch {

namespace {

// bert_base's GEMMs at its default batch: the feed-forward pair ([1024,768] x [768,3072] and
// back) and the attention's batched matmuls (96 heads-by-batch of 128 x 64 x 128).
constexpr const char* kProbeGraph = R"(graph blas_probe(%x: f32[8,128,768], %q: f32[96,128,64],
    %k: f32[96,64,128], %v: f32[96,128,64]) {
  param %w1: f32[3072,768] = uniform(seed=1, low=-0.036, high=0.036)
  param %b1: f32[3072] = uniform(seed=2, low=-0.036, high=0.036)
  param %w2: f32[768,3072] = uniform(seed=3, low=-0.018, high=0.018)
  param %b2: f32[768] = uniform(seed=4, low=-0.018, high=0.018)
  %h = linear(%x, %w1, %b1)
  %y = linear(%h, %w2, %b2)
  %s = matmul(%q, %k)
  %a = matmul(%s, %v)
  return %y, %a
}
)";

// The cores OpenBLAS 0.3's dynamic builds carry for x86-64 CPUs of the AVX2 era on, with the
// instructions each one's kernels use.
struct CoreRule {
  const char* name;
  std::vector<const char*> flags;
};
const std::vector<CoreRule>& core_rules() {
  static const std::vector<CoreRule> kRules = {
      {"Haswell", {"avx2", "fma"}},
      {"Zen", {"avx2", "fma"}},
      {"SkylakeX", {"avx512f", "avx512bw", "avx512dq", "avx512vl"}},
      {"Cooperlake", {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16"}},
      {"SapphireRapids",
       {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16", "amx_tile", "amx_bf16"}},
  };
  return kRules;
}

constexpr const char* kCoreVar = "OPENBLAS_CORETYPE";
constexpr const char* kL2Var = "OPENBLAS_L2_SIZE";

std::vector<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::vector<std::string> out;
    for (std::string f; words >> f;) out.push_back(f);
    return out;
  }
  return {};
}

}  // namespace

plugin::LoadEnvChoice blas_core_choice(const std::vector<std::string>& cpu_flags,
                                       bool env_pins_core) {
  plugin::LoadEnvChoice c;
  c.option = kBlasCoreOption;
  c.default_from = "CRUCIBLE_BLAS_CORE";
  c.version_fact = "BLAS core ";
  c.reason_var = "CRUCIBLE_BLAS_CORE_CHOICE";
  c.probe_graph = kProbeGraph;
  // The probe times the BLAS: its linears stay on ATen's BLAS path whatever -c linear says (auto
  // would send them to oneDNN, and time the core on the matmuls alone).
  c.probe_config = {{"linear", "aten"}};
  c.candidates.push_back({"env", {}, ""});
  if (env_pins_core) c.candidates.push_back({"detect", {{kCoreVar, {}}, {kL2Var, {}}}, ""});
  for (const CoreRule& rule : core_rules()) {
    const bool supported = std::all_of(rule.flags.begin(), rule.flags.end(), [&](const char* f) {
      return std::find(cpu_flags.begin(), cpu_flags.end(), f) != cpu_flags.end();
    });
    if (supported)
      c.candidates.push_back({rule.name, {{kCoreVar, rule.name}, {kL2Var, {}}}, rule.name});
  }
  return c;
}

plugin::LoadEnvChoice blas_core_choice_here() {
  return blas_core_choice(cpuinfo_flags(),
                          std::getenv(kCoreVar) != nullptr || std::getenv(kL2Var) != nullptr);
}

}  // namespace crucible::libtorch
