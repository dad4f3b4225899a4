// A backend's load-time environment by measurement (see load_env_choice.h), as codegen picks
// Winograd for a convolution by timing it: each candidate runs the declaration's probe graph in a
// worker of its own (so a crash or a hang is a discarded candidate, not a lost run), is checked
// against the fp64 reference by the accuracy rule, and the fastest correct one wins.
#include "load_env_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "backend_config.h"
#include "crucible/core/error.h"
#include "crucible/core/quote.h"
#include "crucible/plugin_loader.h"
#include "job_outcome.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "worker.h"
#include "worker_launch.h"
#include "worker_report.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The backend's setting: -c OPTION, else the declaration's default_from variable, else auto.
std::string setting_of(const RunConfig& cfg, const std::string& backend,
                       const plugin::LoadEnvChoice& d) {
  const auto opts = backend_config(cfg.config, backend_name(backend));
  if (auto it = opts.find(d.option); it != opts.end()) return it->second;
  const char* fallback = d.default_from.empty() ? nullptr : std::getenv(d.default_from.c_str());
  return fallback != nullptr && *fallback != '\0' ? fallback : "auto";
}

// CRUCIBLE_TEST_LOAD_ENV_FAULT=CANDIDATE:wrong|crash[,...] in this process's environment gives
// that candidate's worker the fault (load_env_probe_job.cpp); the tests' way to plant bad ones.
std::map<std::string, std::string> test_fault_for(const std::string& candidate) {
  const char* spec = std::getenv("CRUCIBLE_TEST_LOAD_ENV_FAULT");
  std::istringstream faults(spec != nullptr ? spec : "");
  for (std::string f; std::getline(faults, f, ',');) {
    if (f.rfind(candidate + ":", 0) == 0)
      return {{"CRUCIBLE_TEST_LOAD_ENV_FAULT", f.substr(candidate.size() + 1)}};
  }
  return {};
}

// The word after `fact` in `version` ("BLAS core SkylakeX; ..." -> "SkylakeX"), "" without one.
std::string word_after(const std::string& version, const std::string& fact) {
  const size_t at = fact.empty() ? std::string::npos : version.find(fact);
  if (at == std::string::npos) return "";
  const size_t from = at + fact.size();
  size_t to = from;
  while (to < version.size() &&
         (std::isalnum(static_cast<unsigned char>(version[to])) != 0 || version[to] == '_'))
    ++to;
  return version.substr(from, to - from);
}

class Prober {
 public:
  Prober(const RunConfig& cfg, std::string backend, const plugin::LoadEnvChoice& d)
      : cfg_(cfg), backend_(std::move(backend)), d_(d), dir_("crucible_load_env_probe_") {
    std::ofstream(dir_.path() / "probe.graph") << d.probe_graph;
    limits_.timeout_s = std::min(cfg.timeout_s, 120.0);
    limits_.memory_limit_mb = cfg.memory_limit_mb;
  }

  LoadEnvProbe probe(const plugin::LoadEnvCandidate& c) {
    WorkerJob job = pre_run_job(cfg_, "load-env-probe", dir_.path() / "probe.graph", backend_);
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
    LoadEnvProbe p{c.name, 0, word_after(r.backend_version, d_.version_fact), ""};
    if (r.status != reports::Status::kPass) {
      const std::string error = r.error.substr(0, r.error.find('\n'));
      p.discarded = fmt::format("{}: {}", reports::status_name(r.status), error);
    } else if (!c.expect.empty() && lower(p.shown) != lower(c.expect)) {
      p.discarded = fmt::format("the backend ran {} instead", p.shown.empty() ? "?" : p.shown);
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
  const plugin::LoadEnvChoice& d_;
  TempDir dir_;
  ChildLimits limits_;
};

// Probes every candidate on `backend` and picks the fastest correct one (the first candidate,
// the environment as it is, when none is).
LoadEnvDecision measure(const RunConfig& cfg, const std::string& backend,
                        const plugin::LoadEnvChoice& d) {
  LoadEnvDecision choice;
  choice.setting = "auto";
  Prober prober(cfg, backend, d);
  for (const plugin::LoadEnvCandidate& c : d.candidates) {
    choice.probes.push_back(prober.probe(c));
    const LoadEnvProbe& p = choice.probes.back();
    std::cerr << fmt::format("{} probe on {}: {} ({}): {}\n", d.option, escape_controls(backend),
                             c.name, describe_env(c.env).empty() ? "as set" : describe_env(c.env),
                             p.discarded.empty() ? fmt::format("{:.1f} ms, {}", p.ms, p.shown)
                                                 : "discarded, " + p.discarded);
  }
  const LoadEnvProbe* best = nullptr;
  for (const LoadEnvProbe& p : choice.probes) {
    if (p.discarded.empty() && (best == nullptr || p.ms < best->ms)) best = &p;
  }
  const plugin::LoadEnvCandidate& pick =
      *std::find_if(d.candidates.begin(), d.candidates.end(),
                    [&](const auto& c) { return best == nullptr || c.name == best->candidate; });
  choice.chosen = pick.name;
  choice.env = pick.env;
  return choice;
}

// Whether --backend-env already sets (or unsets) a variable some candidate sets: then it decides.
bool given_decides(const EnvChanges& given, const plugin::LoadEnvChoice& d) {
  return std::any_of(d.candidates.begin(), d.candidates.end(), [&](const auto& c) {
    return std::any_of(c.env.begin(), c.env.end(),
                       [&](const auto& kv) { return given.contains(kv.first); });
  });
}

// Two backends load the same library the same way when they declare the same choice.
bool same_choice(const plugin::LoadEnvChoice& a, const plugin::LoadEnvChoice& b) {
  auto key = [](const plugin::LoadEnvChoice& c) {
    std::string k = c.option + '\n' + c.probe_graph;
    for (const auto& cand : c.candidates) k += '\n' + cand.name + ' ' + describe_env(cand.env);
    return k;
  };
  return key(a) == key(b);
}

}  // namespace

std::string LoadEnvDecision::summary() const {
  std::string out = fmt::format("{} ({}={}", chosen, option, setting);
  if (probes.empty()) return out + ")";
  out += "; probe ms:";
  for (const LoadEnvProbe& p : probes) {
    out += p.discarded.empty() ? fmt::format(" {}[{}] {:.1f}", p.candidate, p.shown, p.ms)
                               : fmt::format(" {} discarded ({})", p.candidate, p.discarded);
    out += p.candidate == probes.back().candidate ? "" : ",";
  }
  return out + ")";
}

EnvChanges choose_backend_load_env(const std::string& backend, RunConfig settings,
                                   const Declarations& declared, std::string* summary) {
  settings.backends = {backend};
  for (const LoadEnvDecision& c : choose_load_envs(settings, declared)) {
    if (summary != nullptr)
      *summary =
          fmt::format("{}.{}: {}", c.option, escape_controls(backend_name(backend)), c.summary());
  }
  return settings.backend_env[backend];
}

std::vector<LoadEnvDecision> choose_load_envs(RunConfig& cfg, const Declarations& declared) {
  std::vector<LoadEnvDecision> choices;
  // One probe serves every backend set to auto that declares the same choice.
  std::vector<std::pair<const plugin::LoadEnvChoice*, LoadEnvDecision>> measured;
  for (const std::string& backend : cfg.backends) {
    const auto it = declared.find(backend);
    if (it == declared.end() || !it->second.load_env) continue;
    const plugin::LoadEnvChoice& d = *it->second.load_env;
    EnvChanges& given = cfg.backend_env[backend];
    LoadEnvDecision c;
    c.setting = setting_of(cfg, backend, d);
    const auto named = std::find_if(d.candidates.begin(), d.candidates.end(),
                                    [&](const auto& cand) { return cand.name == c.setting; });
    if (given_decides(given, d)) {
      c.setting = "--backend-env";  // an explicit variable wins over any choice
      c.chosen = describe_env(given);
    } else if (c.setting == "auto" && !d.candidates.empty()) {
      auto seen = std::find_if(measured.begin(), measured.end(),
                               [&](const auto& m) { return same_choice(*m.first, d); });
      if (seen == measured.end()) {
        measured.emplace_back(&d, measure(cfg, backend, d));
        seen = measured.end() - 1;
      }
      c = seen->second;
    } else if (named != d.candidates.end()) {
      c.chosen = named->name;
      c.env = named->env;
    } else {
      std::string names = "auto";
      for (const auto& cand : d.candidates) names += ", " + cand.name;
      throw Error(fmt::format("-c {}:{}={}: not a choice on this machine (want {})",
                              escape_controls(backend_name(backend)), d.option,
                              escape_controls(c.setting), names));
    }
    c.backend = backend;
    c.option = d.option;
    c.reason_var = d.reason_var;
    given = overlay(c.env, given);
    // The plugin can put this line into its version string, so each result says why.
    if (!d.reason_var.empty()) given[d.reason_var] = c.summary();
    choices.push_back(std::move(c));
  }
  return choices;
}

}  // namespace crucible
