// The timing job, audited: every backend's outputs are checked on two seeded input sets before
// timing, then every timed call's outputs are compared with them, a caching probe runs, and the
// machine's contention and the process's counters are recorded around every sample.
//
// The order of work, per model:
//   1. load and compile every backend;
//   2. check: each backend runs input set A twice and B once, untimed; its outputs must pass the
//      accuracy rule against eager on both sets, and the A runs tell whether it is bitwise
//      deterministic; then warm up each and choose its calls per sample (--min-sample-ms);
//   3. time: sample by sample, backends interleaved, input sets alternating A, B, A, ... copied
//      into the backend's own buffers before each sample (so pointer-keyed caches see new
//      contents) and scribbled after it; every call's outputs are digested and audited;
//   4. probe for caching (MLPerf's TEST04): single calls on inputs never seen before, interleaved
//      with single calls on set A; a backend much faster on the inputs it has seen is caching.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "accuracy.h"
#include "contention.h"
#include "crucible/core/rng.h"
#include "output_digest.h"
#include "perf_counters.h"
#include "worker_session.h"

namespace crucible {

namespace {

// MB held by every value of the graph: what eager materializes per call, an upper bound of what a
// fusing backend touches.
double working_set_mb(const Graph& g) {
  double bytes = 0;
  for (const Value& v : g.values()) {
    bytes += static_cast<double>(v.type.numel()) * static_cast<double>(dtype_size(v.type.dtype));
  }
  return bytes / 1e6;
}

using Clock = std::chrono::steady_clock;
using reports::Status;

constexpr uint64_t kSecondSetStream = 0x5e7b;  // derive_seed(seed, this): input set B
constexpr uint64_t kProbeStream = 0x9b0be;     // derive_seed(seed, this + j): probe set j
constexpr int kProbePairs = 5;
// A call on inputs never seen is slower than on inputs seen before by a ratio and a gap (medians)
// when results are being remembered. Honest code is slower on fresh inputs too, by branch
// predictors that learned the repeated inputs: up to 1.5x on graphs of about 1 us (codegen's
// sin_cos, 1.40-1.51x) and 1.2x on 3 us ones here. So either 1.5x and 5 us, or, for graphs of
// microseconds, 3x and 1 us: a contents-keyed memo of a 3 us graph measured 6.8x and 3.4 us,
// which the 5 us gap alone let through.
constexpr double kCachingRatio = 1.5;
constexpr double kCachingGapMs = 0.005;
constexpr double kTinyCachingRatio = 3.0;
constexpr double kTinyCachingGapMs = 0.001;
constexpr int64_t kMaxCallsPerSample = 1'000'000;
// --min-time-ms takes at most this many times --repeat samples.
constexpr int kMaxSampleFactor = 100;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double median(const std::vector<double>& v) { return reports::summarize(v).median; }

// The graph whose inputs the audit's other sets draw from: the model's recipes, except that a
// floating input with a constant recipe (ones(), zeros(), full(), file()) draws randn, so every
// set differs from A even for a model that feeds constants; eager's outputs on the same set are
// the reference.
Graph with_varied_inputs(const Graph& g) {
  Graph copy = g;
  for (ValueId id : copy.inputs()) {
    Value& v = copy.mutable_value(id);
    const std::string& kind = v.init.kind;
    if (is_floating(v.type.dtype) && kind != "randn" && kind != "uniform") v.init = {};
  }
  return copy;
}

// Median cost of one steady_clock::now() pair, in ns.
double timer_overhead_ns() {
  std::vector<double> v;
  for (int i = 0; i < 2001; ++i) {
    const auto a = Clock::now();
    const auto b = Clock::now();
    v.push_back(std::chrono::duration<double, std::nano>(b - a).count());
  }
  return median(v);
}

struct Backend {
  std::string name;
  std::unique_ptr<LoadedBackend> plugin;
  std::unique_ptr<plugin::Executable> exe;
  reports::ResultRecord r;
  bool ok = true;
  int64_t calls = 1;  // per sample
  bool deterministic = true;
  std::vector<Tensor> buffers;     // what run() is given; a set is copied in before each call
  std::vector<Tensor> checked[2];  // its outputs on sets A and B, checked against eager
  std::vector<uint64_t> digests[2];
  ContentionMeter meter;
  int rule_audits = 0;
  double probe_ratio = NAN;  // median call time on fresh inputs / on inputs seen before
  double timed_ms = 0;       // all its timed samples together (for --min-time-ms)

  void fail(std::string why) {
    ok = false;
    r.status = Status::kFailAccuracyInPerf;
    r.error = std::move(why);
  }
};

class TimingJob {
 public:
  TimingJob(Session& s, PerfCounters& counters)
      : s_(s), counters_(counters), varied_(with_varied_inputs(s.graph)) {}

  void run() {
    reports::Contention frame;
    frame.canary_before_ms = noise_canary_ms();
    frame.triad_before_gbs = memory_canary_gbs();
    const double overhead = timer_overhead_ns();
    sets_[0] = s_.inputs;
    sets_[1] = varied_set(kSecondSetStream);
    for (const std::string& b : s_.job.backends) prepare(b);
    if (!audit_off()) {
      s_.report.phase("check", "");
      for (Backend& b : backends_) check(b);
    }
    // Warm-up last, so the allocator's state when timing starts is the one sampling leaves.
    for (Backend& b : backends_) warm_up(b);
    s_.report.phase("timing", "");
    const ContentionSnapshot begin = take_contention_snapshot();
    // At least --repeat samples, and then more (at most kMaxSampleFactor x) until every backend
    // was timed --min-time-ms in all: a graph of microseconds gets hundreds of samples for the
    // cost of ten of a large model, and its median stops moving between runs.
    for (int rep = 0; rep < s_.job.repeat || (rep < kMaxSampleFactor * s_.job.repeat &&
                                              least_timed_ms() < s_.job.min_time_ms);
         ++rep) {
      for (Backend& b : backends_) {
        if (b.ok) sample(b, rep);
      }
    }
    const ContentionSnapshot end = take_contention_snapshot();
    if (!audit_off()) {
      s_.report.phase("caching_probe", "");
      probe();
    }
    frame.canary_after_ms = noise_canary_ms();
    frame.triad_after_gbs = memory_canary_gbs();
    frame.working_set_mb = working_set_mb(s_.graph);
    for (Backend& b : backends_) {
      b.meter.set_window(begin, end);
      reports::Contention c = b.meter.figures(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
      c.canary_before_ms = frame.canary_before_ms;
      c.canary_after_ms = frame.canary_after_ms;
      c.triad_before_gbs = frame.triad_before_gbs;
      c.triad_after_gbs = frame.triad_after_gbs;
      c.working_set_mb = frame.working_set_mb;
      b.r.contention = c;
      b.r.noise_reason = noise_reason(c, b.meter.window_s());
      b.r.noisy = !b.r.noise_reason.empty();
      b.r.calls_per_sample = b.calls;
      b.r.timer_overhead_ns = overhead;
      b.r.counters_unavailable = counters_.unavailable();
      if (b.ok) {
        b.r.status = Status::kPass;
        b.r.audit = describe_audit(b);
      }
      s_.report.result(b.r);
    }
  }

 private:
  bool audit_off() const { return s_.job.no_audit; }

  // The smallest total timed time of the backends still timed (infinite when none is).
  double least_timed_ms() const {
    double least = std::numeric_limits<double>::infinity();
    for (const Backend& b : backends_) {
      if (b.ok) least = std::min(least, b.timed_ms);
    }
    return least;
  }

  std::vector<Tensor> varied_set(uint64_t stream) const {
    return make_inputs(varied_, derive_seed(s_.job.seed, stream));
  }

  // Each backend has input buffers of its own: between its samples they hold the scribble, never
  // another backend's copy of the next set.
  static void load_set(Backend& b, const std::vector<Tensor>& set) {
    if (b.buffers.empty()) {
      for (const Tensor& t : set) b.buffers.push_back(t.clone());
      return;
    }
    for (size_t k = 0; k < b.buffers.size(); ++k) b.buffers[k].copy_from(set[k]);
  }

  static std::vector<Tensor> call(Backend& b) { return b.exe->run(b.buffers); }

  // Between untimed check calls: scribbled inputs, and 2 ms for any thread the backend left
  // behind to read them (a timed sample has the other backends' samples after it instead).
  static void settle(Backend& b) {
    scribble_inputs(b);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  // Overwrites the input buffers (all bits set: NaN for floats, -1 for integers) once a call's
  // outputs are audited, so a thread the backend left running cannot compute the next call's
  // answer from inputs it is not given yet: it reads these, or the set just used (the next sample
  // uses the other set).
  static void scribble_inputs(Backend& b) {
    for (Tensor& t : b.buffers) {
      if (t.numel() > 0) std::memset(t.raw_data(), 0xff, t.nbytes());
    }
  }

  void prepare(const std::string& name) {
    Backend b;
    b.name = name;
    b.r = s_.record(name, "performance");
    s_.report.phase("load", name);
    b.ok = attempt(b.r, Status::kFailToLoad, [&] { b.plugin = s_.load(name); });
    if (b.ok) {
      s_.report.phase("compile", name);
      b.ok = attempt(b.r, Status::kFailToCompile, [&] {
        b.exe = b.plugin->backend().compile(s_.graph, s_.options(name, false));
      });
    }
    backends_.push_back(std::move(b));
  }

  void warm_up(Backend& b) {
    if (!b.ok) return;
    s_.report.phase("warmup", b.name);
    b.ok = attempt(b.r, Status::kFailToRun, [&] {
      load_set(b, sets_[0]);
      for (int i = 0; i < s_.job.warmup; ++i) call(b);
      b.calls = calls_per_sample(b);
    });
  }

  // Like Google Benchmark's min_time: grow the calls per sample until a sample lasts
  // --min-sample-ms, predicting from the last trial with 40% headroom. Trials keep every call's
  // outputs alive as a timed sample does, so the allocator is warm for that pattern too.
  int64_t calls_per_sample(Backend& b) {
    const double target = s_.job.min_sample_ms;
    auto trial = [&](int64_t n) {
      std::vector<std::vector<Tensor>> outs(static_cast<size_t>(n));
      const auto t0 = Clock::now();
      for (auto& o : outs) o = call(b);
      return ms_between(t0, Clock::now());
    };
    int64_t n = 1;
    for (;;) {
      double ms = trial(n);
      // One preempted trial must not decide the calls per sample for the whole run (a graph of
      // microseconds would be timed one call a sample): a trial that crosses the target without
      // being far past it is retried twice and the fastest kept.
      for (int retry = 0; retry < 2 && ms >= target && ms < 20 * target; ++retry)
        ms = std::min(ms, trial(n));
      if (ms >= target || n >= kMaxCallsPerSample) {
        // Warm samples run faster than the trials: 25% headroom keeps them above the target.
        if (ms < 1.25 * target && ms > 0)
          n = std::min<int64_t>(kMaxCallsPerSample,
                                static_cast<int64_t>(std::ceil(n * 1.25 * target / ms)));
        break;
      }
      const double grow = ms > 0 ? std::clamp(1.4 * target / ms, 2.0, 100.0) : 100.0;
      n = std::min<int64_t>(kMaxCallsPerSample, static_cast<int64_t>(std::ceil(n * grow)));
    }
    // One more untimed sample of exactly n calls: the first one to hold n outputs at once.
    std::vector<std::vector<Tensor>> outs(static_cast<size_t>(n));
    for (auto& o : outs) o = call(b);
    return n;
  }

  // Eager's outputs on input set `i`: the reference every backend's checked outputs are held to.
  const std::vector<Tensor>* eager_outputs(int i) {
    for (Backend& b : backends_) {
      if (b.name == "eager") return b.ok && !b.checked[i].empty() ? &b.checked[i] : nullptr;
    }
    return nullptr;
  }

  // The fp64 reference outputs on `inputs` (one of sets_ or fresh_), computed on first need.
  const std::vector<Tensor>& fp64_outputs(const std::vector<Tensor>& inputs) {
    auto& out = fp64_[&inputs];
    if (out.empty()) out = s_.fp64_reference(*s_.load("eager"), inputs);
    return out;
  }

  // "" when `got` passes the model's accuracy rule against eager's outputs on `inputs`.
  std::string rule_failure(const std::vector<Tensor>& got, const std::vector<Tensor>& eager,
                           const std::vector<Tensor>& inputs) {
    if (got.size() != eager.size())
      return fmt::format("{} outputs, eager gives {}", got.size(), eager.size());
    AccuracyOptions opts{s_.job.tolerance, s_.job.cosine, true};
    for (size_t k = 0; k < got.size(); ++k) {
      auto a = compare_output(got[k], eager[k], Tensor(), opts);
      if (!a.passed && is_floating(got[k].dtype()) && !opts.cosine)
        a = compare_output(got[k], eager[k], fp64_outputs(inputs).at(k), opts);
      if (!a.passed) {
        return fmt::format("output {} ({}{}): {} of {} elements off, max abs error {:.3g}", k,
                           a.dtype, a.shape, a.mismatches, got[k].numel(), a.max_abs_err);
      }
    }
    return "";
  }

  void check(Backend& b) {
    if (!b.ok) return;
    s_.report.phase("check", b.name);
    std::vector<Tensor> again;
    std::vector<uint64_t> at_return[2];  // digests taken the moment run() returned
    b.ok = attempt(b.r, Status::kFailToRun, [&] {
      load_set(b, sets_[0]);
      b.checked[0] = call(b);
      at_return[0] = digest_all(b.checked[0]);
      settle(b);
      load_set(b, sets_[0]);
      again = call(b);
      const std::vector<uint64_t> again_digest = digest_all(again);
      settle(b);
      load_set(b, sets_[1]);
      b.checked[1] = call(b);
      at_return[1] = digest_all(b.checked[1]);
      settle(b);
      b.deterministic = again_digest == at_return[0];
    });
    if (!b.ok) return;
    // The same outputs, digested again after other work: a change means a thread was still
    // writing them after run() returned.
    for (int set = 0; set < 2; ++set) {
      b.digests[set] = digest_all(b.checked[set]);
      if (b.digests[set] != at_return[set]) return b.fail(deferred_work_message("checking", set));
    }
    if (b.name == "eager") return;  // eager is the reference itself
    for (int set = 0; set < 2; ++set) {
      const std::vector<Tensor>* eager = eager_outputs(set);
      if (eager == nullptr) continue;  // eager failed: its own result says so
      std::string why;
      attempt(b.r, Status::kFailAccuracyInPerf,
              [&] { why = rule_failure(b.checked[set], *eager, sets_[set]); });
      if (b.r.status == Status::kFailAccuracyInPerf) return void(b.ok = false);
      if (!why.empty()) {
        return b.fail(fmt::format(
            "in the timing worker, its outputs on input set {} fail the accuracy rule against "
            "eager: {}",
            set == 0 ? "A (the accuracy run's)" : "B", why));
      }
    }
  }

  static std::string deferred_work_message(const std::string& when, int set) {
    return fmt::format(
        "{} (input set {}): outputs changed after run() returned: work deferred past the call",
        when, set == 0 ? "A" : "B");
  }

  void sample(Backend& b, int rep) {
    const int set = rep % 2;
    std::vector<std::vector<Tensor>> outs(static_cast<size_t>(b.calls));
    std::vector<uint64_t> last_at_return;
    b.ok = attempt(b.r, Status::kFailToRun, [&] {
      load_set(b, sets_[set]);
      const ContentionSnapshot before = take_contention_snapshot();
      const PerfCounters::Reading c0 = counters_.read();
      const auto t0 = Clock::now();
      for (auto& o : outs) o = call(b);
      const auto t1 = Clock::now();
      // First thing after the clock stops: the last call's outputs, before any other work gives
      // a thread that returned early the time to finish them. (Earlier calls' outputs had the
      // following calls to complete in; they are audited below.)
      last_at_return = audit_off() ? std::vector<uint64_t>() : digest_all(outs.back());
      const PerfCounters::Reading c1 = counters_.read();
      b.meter.add_sample(before, take_contention_snapshot());
      const auto k = static_cast<double>(b.calls);
      const double ms = ms_between(t0, t1);
      b.timed_ms += ms;
      b.r.samples_ms.push_back(ms / k);
      if (std::isfinite(c0.instructions))
        b.r.instructions.push_back((c1.instructions - c0.instructions) / k);
      if (std::isfinite(c0.cycles)) b.r.cycles.push_back((c1.cycles - c0.cycles) / k);
      if (std::isfinite(c0.page_faults))
        b.r.page_faults.push_back((c1.page_faults - c0.page_faults) / k);
    });
    if (!b.ok || audit_off()) return;
    // Outputs may alias the inputs (a graph returning a view of one): audited before this.
    struct Scribble {
      Backend& b;
      ~Scribble() { scribble_inputs(b); }
    } scribble{b};
    const char* set_name = set == 0 ? "A" : "B";
    if (digest_all(outs.back()) != last_at_return)
      return b.fail(deferred_work_message(fmt::format("timed sample {}", rep), set));
    if (b.deterministic) {
      for (size_t i = 0; i < outs.size(); ++i) {
        const std::vector<uint64_t> d = i + 1 == outs.size() ? last_at_return : digest_all(outs[i]);
        if (d == b.digests[set]) continue;
        size_t k = 0;
        while (k < d.size() && k < b.digests[set].size() && d[k] == b.digests[set][k]) ++k;
        return b.fail(fmt::format(
            "timed sample {} (input set {}), call {} of {}: output {} differs bit for bit from "
            "its checked output on the same inputs (it was deterministic before timing)",
            rep, set_name, i + 1, b.calls, k));
      }
      return;
    }
    // Not bitwise deterministic: the accuracy rule, on the first two samples and then every
    // fourth, and on every call of those samples.
    if (rep >= 2 && rep % 4 != 0) return;
    const std::vector<Tensor>* eager = eager_outputs(set);
    if (eager == nullptr) return;
    ++b.rule_audits;
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string why = rule_failure(outs[i], *eager, sets_[set]);
      if (!why.empty()) {
        return b.fail(fmt::format(
            "timed sample {} (input set {}), call {} of {}: fails the accuracy rule against "
            "eager: {}",
            rep, set_name, i + 1, b.calls, why));
      }
    }
  }

  // One call on `set`, timed alone.
  double timed_call(Backend& b, const std::vector<Tensor>& set, std::vector<Tensor>* out) {
    load_set(b, set);
    const auto t0 = Clock::now();
    *out = call(b);
    return ms_between(t0, Clock::now());
  }

  struct ProbeTimes {
    double fresh, seen;  // medians, ms
    bool looks_cached() const {
      return (fresh > kCachingRatio * seen && fresh - seen > kCachingGapMs) ||
             (fresh > kTinyCachingRatio * seen && fresh - seen > kTinyCachingGapMs);
    }
  };

  // Pairs of single calls, one on fresh[j] and one on set A, alternating which goes first to
  // cancel what the order costs; `check(j, out)` sees each fresh call's outputs and returns
  // false to stop.
  template <typename Check>
  ProbeTimes time_pairs(Backend& b, const std::vector<std::vector<Tensor>>& fresh, Check&& check) {
    std::vector<double> on_fresh, on_seen;
    for (size_t j = 0; j < fresh.size(); ++j) {
      std::vector<Tensor> out, seen;
      if (j % 2 == 0) on_fresh.push_back(timed_call(b, fresh[j], &out));
      on_seen.push_back(timed_call(b, sets_[0], &seen));
      if (j % 2 == 1) on_fresh.push_back(timed_call(b, fresh[j], &out));
      if (!check(j, out)) break;
    }
    return {median(on_fresh), median(on_seen)};
  }

  void probe() {
    for (int j = 0; j < kProbePairs; ++j) fresh_.push_back(varied_set(kProbeStream + j));
    std::vector<std::vector<Tensor>> eager_fresh(fresh_.size());
    for (Backend& b : backends_) {
      if (!b.ok) continue;
      s_.report.phase("caching_probe", b.name);
      ProbeTimes t{};
      std::string why;
      b.ok = attempt(b.r, Status::kFailToRun, [&] {
        t = time_pairs(b, fresh_, [&](size_t j, std::vector<Tensor>& out) {
          if (b.name == "eager") {
            eager_fresh[j] = std::move(out);
          } else if (!eager_fresh[j].empty()) {
            why = rule_failure(out, eager_fresh[j], fresh_[j]);
            if (!why.empty()) why = fmt::format("on fresh probe input {}: {}", j, why);
          }
          return why.empty();
        });
      });
      if (!b.ok) continue;
      if (!why.empty()) {
        b.fail("caching probe: " + why);
        continue;
      }
      b.probe_ratio = t.seen > 0 ? t.fresh / t.seen : 1.0;
      if (t.looks_cached() && probe_again(b)) {
        b.fail(fmt::format(
            "caching probe: a call took {:.4g} ms (median) on inputs it had not seen and "
            "{:.4g} ms on inputs seen before, {:.1f}x: results are being remembered, not computed "
            "(MLPerf TEST04)",
            t.fresh, t.seen, t.fresh / t.seen));
      }
    }
  }

  // A second probe on new inputs, so one burst of noise cannot fail an honest backend.
  bool probe_again(Backend& b) {
    std::vector<std::vector<Tensor>> sets;
    for (int j = 0; j < kProbePairs; ++j) sets.push_back(varied_set(kProbeStream + 1000 + j));
    return time_pairs(b, sets, [](size_t, std::vector<Tensor>&) { return true; }).looks_cached();
  }

  std::string describe_audit(const Backend& b) const {
    if (audit_off()) return "off (--no-audit)";
    const int samples = static_cast<int>(b.r.samples_ms.size());
    std::string how =
        b.deterministic
            ? fmt::format("bitwise: every call of {} samples x {} calls", samples, b.calls)
            : fmt::format(
                  "accuracy rule (not bitwise deterministic): every call of {} of {} samples",
                  b.rule_audits, samples);
    return fmt::format("{}, input sets A/B alternating; caching probe {:.2f}x", how, b.probe_ratio);
  }

  Session& s_;
  PerfCounters& counters_;
  const Graph varied_;  // the model with constant float inputs drawn at random (with_varied_inputs)
  std::vector<Tensor> sets_[2];
  std::vector<std::vector<Tensor>> fresh_;  // the caching probe's inputs, never seen before
  std::map<const std::vector<Tensor>*, std::vector<Tensor>> fp64_;
  std::vector<Backend> backends_;
};

}  // namespace

void timing_job(Session& s, PerfCounters& counters) { TimingJob(s, counters).run(); }

}  // namespace crucible
