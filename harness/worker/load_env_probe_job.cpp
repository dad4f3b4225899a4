// `crucible worker --job load-env-probe`: one candidate load-time environment of a backend (its
// variables given as the backend's --backend-env), checked against the fp64 reference and timed.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "accuracy.h"
#include "worker_session.h"

namespace crucible {

namespace {

// Calls timed after two warm-up calls; their median is the candidate's figure.
constexpr int kTimedCalls = 7;

// A test-only fault (CRUCIBLE_TEST_LOAD_ENV_FAULT, set by the runner on one candidate's worker
// when its own environment asks): "wrong" spoils the backend's first output, "crash" aborts, so
// the tests can show that such a candidate is discarded.
void apply_test_fault(std::vector<Tensor>& out) {
  const char* fault = std::getenv("CRUCIBLE_TEST_LOAD_ENV_FAULT");
  if (fault == nullptr) return;
  if (std::strcmp(fault, "crash") == 0) std::abort();
  if (std::strcmp(fault, "wrong") == 0 && !out.empty() && out[0].dtype() == DType::kF32 &&
      out[0].numel() > 0)
    out[0].data<float>()[0] += 1.0f;
}

}  // namespace

void load_env_probe_job(Session& s) {
  const std::string backend = s.job.backends.at(0);
  reports::ResultRecord r = s.record(backend, "performance");
  std::unique_ptr<LoadedBackend> eager, be;
  s.report.phase("load", backend);
  if (!attempt(r, reports::Status::kFailToLoad, [&] { be = s.load(backend); }))
    return s.report.result(r);
  s.report.phase("load", "eager");
  if (!attempt(r, reports::Status::kFailToLoad, [&] { eager = s.load("eager"); }))
    return s.report.result(r);
  std::vector<Tensor> ref, fp64, res;
  s.report.phase("eager_fp64", "eager");
  if (!attempt(r, reports::Status::kEagerFailToRun, [&] {
        ref = eager->backend().compile(s.graph, s.options("eager", false))->run(s.inputs);
        fp64 = s.fp64_reference(*eager, s.inputs);
      }))
    return s.report.result(r);
  s.report.phase("run", backend);
  if (!attempt(r, reports::Status::kFailToRun, [&] {
        // The probe compiles with the options its declaration gives (what keeps the probe on
        // the library timed) over the run's.
        plugin::Options opts = s.options(backend, false);
        if (const auto d = be->backend().declaration(); d.load_env) {
          for (const auto& [key, value] : d.load_env->probe_config) opts.config[key] = value;
        }
        auto exe = be->backend().compile(s.graph, opts);
        for (int i = 0; i < 2; ++i) res = exe->run(s.inputs);
        for (int i = 0; i < kTimedCalls; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          res = exe->run(s.inputs);
          r.samples_ms.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
      }))
    return s.report.result(r);
  apply_test_fault(res);
  s.report.phase("compare", backend);
  r.status = reports::Status::kPass;
  const AccuracyOptions opts{s.job.tolerance, false, true};
  for (size_t i = 0; i < res.size() && i < ref.size(); ++i) {
    auto a = compare_output(res[i], ref[i], fp64[i], opts);
    if (!a.passed && r.status == reports::Status::kPass) {
      r.status = reports::Status::kFailAccuracy;
      r.error = fmt::format("output {}: {} elements off the fp64 reference, max abs error {:.3g}",
                            i, a.mismatches, a.max_abs_err);
    }
  }
  s.report.result(r);
}

}  // namespace crucible
