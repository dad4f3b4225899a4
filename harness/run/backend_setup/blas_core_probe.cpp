// The libtorch peers' BLAS core by measurement (see blas_core_probe.h), as codegen picks Winograd
// for a convolution by timing it: each candidate runs a probe graph of bert_base's GEMM shapes in a
// worker of its own (so a crash or a hang is a discarded candidate, not a lost run), is checked
// against the fp64 reference by the accuracy rule, and the fastest correct one wins.
#include "blas_core_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "backend_config.h"
#include "crucible/core/error.h"
#include "crucible/core/quote.h"
#include "crucible/plugin_loader.h"
#include "environment.h"
#include "job_outcome.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "worker.h"
#include "worker_launch.h"
#include "worker_report.h"

namespace crucible {

namespace fs = std::filesystem;

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

// The name a backend's -c scope and peer test go by: a plugin file's backend name, else itself.
std::string backend_name(const std::string& backend) {
  const bool file =
      backend.find('/') != std::string::npos || fs::path(backend).extension() == ".so";
  return file ? backend_name_of(backend) : backend;
}

bool is_libtorch_peer(const std::string& backend) {
  return backend_name(backend).rfind("libtorch", 0) == 0;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The backend's blas_core setting: -c, else CRUCIBLE_BLAS_CORE, else auto.
std::string blas_core_setting(const RunConfig& cfg, const std::string& backend) {
  const auto opts = backend_config(cfg.config, backend_name(backend));
  if (auto it = opts.find("blas_core"); it != opts.end()) return it->second;
  const char* fallback = std::getenv("CRUCIBLE_BLAS_CORE");
  return fallback != nullptr && *fallback != '\0' ? fallback : "auto";
}

EnvChanges named_core_env(const std::string& name) {
  return {{kCoreVar, name}, {kL2Var, std::nullopt}};
}

// CRUCIBLE_TEST_BLAS_PROBE_FAULT=CANDIDATE:wrong|crash[,...] in this process's environment gives
// that candidate's worker the fault (blas_probe_job.cpp); the tests' way to plant bad candidates.
std::map<std::string, std::string> test_fault_for(const std::string& candidate) {
  const char* spec = std::getenv("CRUCIBLE_TEST_BLAS_PROBE_FAULT");
  std::istringstream faults(spec != nullptr ? spec : "");
  for (std::string f; std::getline(faults, f, ',');) {
    if (f.rfind(candidate + ":", 0) == 0)
      return {{"CRUCIBLE_TEST_BLAS_PROBE_FAULT", f.substr(candidate.size() + 1)}};
  }
  return {};
}

// The core the peer's version string says OpenBLAS runs ("... BLAS core SkylakeX ...").
std::string reported_core(const std::string& version) {
  static const std::regex kCore("BLAS core ([A-Za-z0-9_]+)");
  std::smatch m;
  return std::regex_search(version, m, kCore) ? m[1].str() : "";
}

class Prober {
 public:
  Prober(const RunConfig& cfg, std::string backend)
      : cfg_(cfg), backend_(std::move(backend)), dir_("crucible_blas_probe_") {
    std::ofstream(dir_.path() / "blas_probe.graph") << kProbeGraph;
    limits_.timeout_s = std::min(cfg.timeout_s, 120.0);
    limits_.memory_limit_mb = cfg.memory_limit_mb;
  }

  BlasProbe probe(const BlasCandidate& c) {
    WorkerJob job = pre_run_job(cfg_, "blas-probe", dir_.path() / "blas_probe.graph", backend_);
    job.backend_env = {};
    job.backend_env[backend_] = overlay(c.env, explicit_env());
    job.report = (dir_.path() / (c.name + ".report")).string();
    std::vector<std::string> argv = {self_executable().string()};
    for (const auto& a : job.to_args()) argv.push_back(a);
    const fs::path log = dir_.path() / (c.name + ".log");
    ChildLimits limits = limits_;
    limits.no_privileges = true;  // its worker loads the plugin
    std::map<std::string, std::string> env = test_fault_for(c.name);
    allow_worker_writes(job, env, limits);
    const ChildOutcome outcome = run_child(argv, env, log, limits);
    const reports::ResultRecord r =
        finalize_job(job, outcome, read_report(job.report), log, limits_).at(0);
    BlasProbe p{c.name, 0, reported_core(r.backend_version), ""};
    if (r.status != reports::Status::kPass) {
      const std::string error = r.error.substr(0, r.error.find('\n'));
      p.discarded = fmt::format("{}: {}", reports::status_name(r.status), error);
    } else if (c.name != "env" && c.name != "detect" && lower(p.core) != lower(c.name)) {
      p.discarded = fmt::format("OpenBLAS ran {} instead", p.core.empty() ? "?" : p.core);
    } else {
      p.ms = reports::summarize(r.samples_ms).median;
    }
    return p;
  }

 private:
  EnvChanges explicit_env() const {
    const auto it = cfg_.backend_env.find(backend_);
    return it == cfg_.backend_env.end() ? EnvChanges{} : it->second;
  }

  const RunConfig& cfg_;
  std::string backend_;
  TempDir dir_;
  ChildLimits limits_;
};

// Probes every candidate on `backend` and picks the fastest correct one ("env" when none is).
BlasChoice measure(const RunConfig& cfg, const std::string& backend) {
  BlasChoice choice;
  choice.setting = "auto";
  Prober prober(cfg, backend);
  const BlasProbe* best = nullptr;
  const std::vector<BlasCandidate> candidates = blas_candidates(cpu_flags());
  for (const BlasCandidate& c : candidates) {
    choice.probes.push_back(prober.probe(c));
    const BlasProbe& p = choice.probes.back();
    std::cerr << fmt::format("blas core probe on {}: {} ({}): {}\n", escape_controls(backend),
                             c.name, describe_env(c.env).empty() ? "as set" : describe_env(c.env),
                             p.discarded.empty() ? fmt::format("{:.1f} ms, core {}", p.ms, p.core)
                                                 : "discarded, " + p.discarded);
  }
  for (const BlasProbe& p : choice.probes) {
    if (p.discarded.empty() && (best == nullptr || p.ms < best->ms)) best = &p;
  }
  choice.chosen = best != nullptr ? best->candidate : "env";
  for (const BlasCandidate& c : candidates) {
    if (c.name == choice.chosen) choice.env = c.env;
  }
  return choice;
}

}  // namespace

std::vector<BlasCandidate> blas_candidates(const std::vector<std::string>& cpu_flags) {
  std::vector<BlasCandidate> out = {{"env", {}}};
  if (std::getenv(kCoreVar) != nullptr || std::getenv(kL2Var) != nullptr)
    out.push_back({"detect", {{kCoreVar, std::nullopt}, {kL2Var, std::nullopt}}});
  for (const CoreRule& rule : core_rules()) {
    const bool supported = std::all_of(rule.flags.begin(), rule.flags.end(), [&](const char* f) {
      return std::find(cpu_flags.begin(), cpu_flags.end(), f) != cpu_flags.end();
    });
    if (supported) out.push_back({rule.name, named_core_env(rule.name)});
  }
  return out;
}

std::string BlasChoice::summary() const {
  std::string out = fmt::format("{} (blas_core={}", chosen, setting);
  if (probes.empty()) return out + ")";
  out += "; probe ms:";
  for (const BlasProbe& p : probes) {
    out += p.discarded.empty() ? fmt::format(" {}[{}] {:.1f}", p.candidate, p.core, p.ms)
                               : fmt::format(" {} discarded ({})", p.candidate, p.discarded);
    out += p.candidate == probes.back().candidate ? "" : ",";
  }
  return out + ")";
}

void check_peer_options(const std::map<std::string, std::string>& config,
                        const std::vector<std::string>& backends) {
  for (const std::string& backend : backends) {
    if (!is_libtorch_peer(backend)) continue;
    const auto opts = backend_config(config, backend_name(backend));
    const auto linear = opts.find("linear");
    if (linear == opts.end()) continue;
    const std::string& v = linear->second;
    if (v != "auto" && v != "aten" && v != "default" && v != "mkldnn")
      throw Error(fmt::format("-c linear={} for {}: want auto, aten (or default) or mkldnn", v,
                              escape_controls(backend_name(backend))));
  }
}

EnvChanges choose_backend_blas_core(const std::string& backend, RunConfig settings,
                                    std::string* summary) {
  settings.backends = {backend};
  for (const BlasChoice& c : choose_blas_cores(settings)) {
    if (summary != nullptr)
      *summary =
          fmt::format("blas_core.{}: {}", escape_controls(backend_name(backend)), c.summary());
  }
  return settings.backend_env[backend];
}

std::vector<BlasChoice> choose_blas_cores(RunConfig& cfg) {
  check_peer_options(cfg.config, cfg.backends);
  std::vector<BlasChoice> choices;
  std::optional<BlasChoice> measured;  // one probe serves every peer set to auto
  for (const std::string& backend : cfg.backends) {
    if (!is_libtorch_peer(backend)) continue;
    EnvChanges& given = cfg.backend_env[backend];
    BlasChoice c;
    c.setting = blas_core_setting(cfg, backend);
    if (given.contains(kCoreVar)) {
      c.setting = "--backend-env";  // an explicit core wins over any choice
      c.chosen = given[kCoreVar].value_or("detect");
    } else if (c.setting == "auto") {
      if (!measured) measured = measure(cfg, backend);
      c = *measured;
    } else if (c.setting == "detect") {
      c.chosen = "detect";
      c.env = {{kCoreVar, std::nullopt}, {kL2Var, std::nullopt}};
    } else if (c.setting != "env") {
      c.chosen = c.setting;
      c.env = named_core_env(c.setting);
    } else {
      c.chosen = "env";
    }
    c.backends = {backend};
    given = overlay(c.env, given);
    // The plugin puts this line into its version string, so each result says why its core.
    given["CRUCIBLE_BLAS_CORE_CHOICE"] = c.summary();
    choices.push_back(std::move(c));
  }
  return choices;
}

}  // namespace crucible
