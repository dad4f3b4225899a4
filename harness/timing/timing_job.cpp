// The timing job, audited: every backend's outputs are checked on two seeded input sets before
// timing, every timed call runs on inputs of its own, and the machine's contention, the process's
// counters and every thread's CPU are recorded around every sample.
//
// The worker holds no reference and reaches no accuracy verdict: its outputs on the checked sets
// are handed out (job.tensors), and under --turns (how `run` times) the parent stops it after each
// sample and reads sampled elements of random calls' outputs out of its memory, to judge them
// against references made where no plugin is loaded (turns/turn_driver.h). Under --turns it times
// one backend and samples only when the parent says so (turns/turn_channel.h), so eager is timed
// in a process that never loaded the backend it is compared with.
//
// The order of work, per model:
//   1. load and compile every backend (each within its share of the worker's time budget);
//   2. check: each backend runs input set A twice and B once, untimed; the A runs tell whether it
//      is bitwise deterministic; its outputs on both sets are handed out; then warm up each and
//      choose its calls per sample (--min-sample-ms);
//   3. time: sample by sample, backends interleaved. Every call of a sample gets inputs of its own
//      (input_sets.h): under --turns the parent writes them, from a secret this process never
//      holds, into memory this process maps read-only (turns/call_input_region.h); alone, this
//      worker makes them from a secret of its own. A remembered output is a wrong one. A sample is
//      its calls back to back and one read of every output page, nothing else, so the parent's
//      clock around it bounds the worker's; then the table of its outputs, and the parent's read;
//   4. judge: a backend whose threads burn CPU outside its own calls works outside the clock (and
//      disturbs the others, whose results say by whom); one that installed signal handlers,
//      opened userfaultfd or started processes left evidence of work hidden behind its outputs'
//      first read.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <thread>

#include "accuracy.h"
#include "call_input_region.h"
#include "contention.h"
#include "crucible/core/rng.h"
#include "crucible/ir/graph_cost.h"
#include "input_sets.h"
#include "machine_peaks.h"
#include "output_digest.h"
#include "perf_counters.h"
#include "process_watch.h"
#include "raw_clock.h"
#include "tensor_file.h"
#include "turn_channel.h"
#include "worker_session.h"

namespace crucible {

namespace {

// MB held by every value of the graph: what eager materializes per call, an upper bound of what a
// fusing backend touches.
double working_set_mb(const Graph& g) {
  double bytes = 0;
  for (const Value& v : g.values()) bytes += v.type.bytes();
  return bytes / 1e6;
}

// steady_clock's time points, read by an inline system call a GOT rewrite cannot redirect.
struct Clock {
  using time_point = std::chrono::steady_clock::time_point;
  static time_point now() { return time_point(std::chrono::nanoseconds(raw_monotonic_ns())); }
};

using reports::Status;

// A backend whose last kRefitSamples samples all lasted more than kRefitFactor times
// --min-sample-ms (or all less than 1/kRefitFactor) gets its calls per sample chosen again.
constexpr size_t kRefitSamples = 5;
constexpr double kRefitFactor = 4.0;
// --min-time-ms takes at most this many times --repeat samples.
constexpr int kMaxSampleFactor = 100;
// The share of the worker's time limit the backends' timing may use, split evenly among them; the
// rest is for loading the model, the canaries and the report.
constexpr double kBudgetShare = 0.8;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Reads one byte of every page of every output's storage, inside the timed interval, so work a
// backend hid behind the first read of its outputs (a fault handler, userfaultfd, a lazily filled
// mapping) is timed. A page of 4 KiB is the smallest the kernel maps.
volatile unsigned char touch_sink;  // keeps the reads of touch_pages from being optimized away
void touch_pages(std::span<const std::vector<Tensor>> calls) {
  unsigned char sink = 0;
  for (const std::vector<Tensor>& outs : calls) {
    for (const Tensor& t : outs) {
      if (!t.defined() || t.storage()->bytes() == 0) continue;
      const auto* p = static_cast<const volatile unsigned char*>(t.storage()->data());
      const size_t n = t.storage()->bytes();
      for (size_t off = 0; off < n; off += 4096) sink ^= p[off];
      sink ^= p[n - 1];
    }
  }
  touch_sink = sink;
}

// Median cost of one steady_clock::now() pair, in ns.
double timer_overhead_ns() {
  std::vector<double> v;
  for (int i = 0; i < 2001; ++i) {
    const auto a = Clock::now();
    const auto b = Clock::now();
    v.push_back(std::chrono::duration<double, std::nano>(b - a).count());
  }
  return reports::median(v);
}

struct Backend {
  std::string name;
  size_t index = 0;  // in the job's list
  std::unique_ptr<LoadedBackend> plugin;
  std::unique_ptr<plugin::Executable> exe;
  reports::ResultRecord r;
  bool ok = true;
  int64_t calls = 1;  // per sample
  bool deterministic = true;
  std::vector<Tensor> buffers;                   // what run() is given in the check and warm-up
  std::vector<std::vector<Tensor>> call_inputs;  // of the next sample's calls, one set each
  int inputs_round = -1;                         // the round they were made for
  std::vector<CallOutput> table;                 // of the last sample's outputs, for the parent
  std::vector<Tensor> checked[2];                // its outputs on sets A and B
  std::vector<uint64_t> digests[2];
  ContentionMeter meter;
  double timed_ms = 0;  // all its timed samples together (for --min-time-ms)
  double touch_ms = 0;  // of which reading one byte of every output page

  // The audit's ledger.
  int64_t calls_timed = 0;
  double spent_ms = 0;    // worker time on it: load, compile, check, warm-up, samples and audit
  double audit_ms = 0;    // of which the audit: the check phase and each sample's untimed work
  double outside_ms = 0;  // CPU of its own threads outside its own samples, while timing
  std::map<std::string, double> disturbed;  // backend -> CPU its threads used in these samples

  void fail(std::string why, Status status = Status::kFailAccuracyInPerf) {
    ok = false;
    r.status = status;
    r.error = std::move(why);
  }
};

// The graph's cost for the roofline; none when an op has no rule it can apply (the result is then
// shown without roofline figures rather than with wrong ones).
std::optional<GraphCost> known_cost(const Graph& g) {
  try {
    return graph_cost(g);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

class TimingJob {
 public:
  TimingJob(Session& s, PerfCounters& counters)
      : s_(s),
        counters_(counters),
        varied_(with_varied_inputs(s.graph)),
        cost_(known_cost(s.graph)),
        secret_(s.job.turns ? 0 : os_secret()) {
    if (s.job.turns) {
      if (s.job.backends.size() != 1)
        throw Error("--turns: a timing worker that takes turns times one backend");
      turns_.emplace();
    }
  }

  void run() {
    const auto started = Clock::now();
    reports::Contention frame;
    frame.canary_before_ms = noise_canary_ms();
    frame.triad_before_gbs = memory_canary_gbs();
    // Measured again after timing, the better kept: a peak measured while the machine was busy is
    // low, and fractions of the bound over 1 say so.
    double peak_gflops = peak_fma_gflops();
    // OpenMP's pool, started here, is shared by every backend: its threads belong to none.
#pragma omp parallel
    { (void)0; }
    CacheCeilings caches = cache_ceilings();
    watch_.emplace();
    const double overhead = timer_overhead_ns();
    sets_[0] = s_.inputs;
    sets_[1] = second_input_set(varied_, s_.job.seed);
    if (turns_) call_inputs_.emplace(kCallInputFd, sets_[1]);
    budget_ms_ = s_.job.budget_s > 0 ? 1e3 * s_.job.budget_s * kBudgetShare /
                                           static_cast<double>(s_.job.backends.size())
                                     : std::numeric_limits<double>::infinity();
    for (const std::string& b : s_.job.backends) prepare(b);
    if (!audit_off()) {
      s_.report.phase("check", "");
      for (Backend& b : backends_) check(b);
    }
    // Warm-up last, so the allocator's state when timing starts is the one sampling leaves.
    for (Backend& b : backends_) warm_up(b);
    s_.report.phase("timing", "");
    const ContentionSnapshot begin = take_contention_snapshot();
    watch_->read(active_);
    if (turns_) {
      take_turns();
    } else {
      for (int rep = 0; plan(rep); ++rep) round(rep);
    }
    attribute_cpu(watch_->read(active_), "");
    const ContentionSnapshot end = take_contention_snapshot();
    if (!audit_off()) {
      judge();
      hand_out();
    }
    frame.canary_after_ms = noise_canary_ms();
    frame.triad_after_gbs = memory_canary_gbs();
    peak_gflops = std::max(peak_gflops, peak_fma_gflops());
    caches = best_of(caches, cache_ceilings());
    frame.working_set_mb = working_set_mb(s_.graph);
    const double worker_ms = ms_between(started, Clock::now());
    for (Backend& b : backends_) {
      b.meter.set_window(begin, end);
      if (turns_) b.meter.count_samples_only();
      reports::Contention c = b.meter.figures(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
      c.canary_before_ms = frame.canary_before_ms;
      c.canary_after_ms = frame.canary_after_ms;
      c.triad_before_gbs = frame.triad_before_gbs;
      c.triad_after_gbs = frame.triad_after_gbs;
      c.working_set_mb = frame.working_set_mb;
      b.r.contention = c;
      b.r.noise_reason = join_reasons(noise_reason(c, b.meter.window_s()), disturbance(b));
      b.r.noisy = !b.r.noise_reason.empty();
      b.r.calls_per_sample = b.calls;
      b.r.timer_overhead_ns = overhead;
      b.r.counters_unavailable = counters_.unavailable();
      if (cost_) {
        reports::Roofline& rl = b.r.roofline.emplace();
        rl.flops = cost_->flops;
        rl.min_bytes = cost_->min_bytes;
        rl.peak_gflops = peak_gflops;
        rl.triad_gbs = std::max(frame.triad_before_gbs, frame.triad_after_gbs);
        rl.l1 = caches.l1;
        rl.l2 = caches.l2;
        rl.l3 = caches.l3;
      }
      // The share of calls judged is the parent's to say (it reads them): none until it does.
      if (!audit_off() && b.calls_timed > 0) {
        b.r.audit_share = worker_ms > 0 ? b.audit_ms / worker_ms : 0;
        b.r.audit_coverage = 0;
      }
      if (b.ok) {
        b.r.status = Status::kPass;
        b.r.audit = describe_audit(b);
      }
      s_.report.result(b.r);
    }
  }

 private:
  bool audit_off() const { return s_.job.timing.no_audit; }

  // Whether round `rep` is sampled: at least --repeat rounds, then more (at most
  // kMaxSampleFactor x) until every backend was timed --min-time-ms in all, so a graph of
  // microseconds gets hundreds of samples for the cost of ten of a large model.
  bool plan(int rep) const {
    const int repeat = s_.job.timing.repeat;
    return rep < repeat ||
           (rep < kMaxSampleFactor * repeat && least_timed_ms() < s_.job.timing.min_time_ms);
  }

  // The rounds, each when the parent says so: it interleaves this worker's samples with the other
  // backends' workers (as many for each as the one that wants most) and times each from outside.
  // It writes a sample's inputs after this worker's readings, just before its "go": while the
  // others are timed, and while its inputs are written, this worker only waits.
  void take_turns() {
    Backend& b = backends_.at(0);
    for (int rep = 0;; ++rep) {
      // A backend that failed takes no more turns: its worker ends, and the parent sees it gone.
      if (!b.ok) return;
      turns_->ready(plan(rep) && least_timed_ms() < INFINITY, b.calls);
      int64_t calls = 0;
      if (!turns_->wait_prepare(calls)) return;
      // The parent chooses each sample's calls after the first, so that every backend's samples
      // last alike (turn_driver.cpp): what the region holds bounds them.
      if (calls > max_calls())
        throw Error(
            fmt::format("--turns: a sample of {} calls; its inputs hold {}", calls, max_calls()));
      b.calls = calls;
      round(rep);
    }
  }

  // The inputs of `b`'s calls in round `rep`, one set each (see kCallIdStride): views of what the
  // parent wrote under --turns, else made here, in the sample, outside the clock (the sample
  // charges the time to the audit).
  void make_call_inputs(Backend& b, int rep) {
    const auto k = static_cast<size_t>(b.calls);
    b.inputs_round = rep;
    if (call_inputs_) {
      while (b.call_inputs.size() < k)
        b.call_inputs.push_back(call_inputs_->call(static_cast<int64_t>(b.call_inputs.size())));
      return;
    }
    b.call_inputs.resize(k);
    for (size_t i = 0; i < k; ++i) {
      fill_call_inputs(sets_[1], secret_, static_cast<uint64_t>(rep * kCallIdStride) + i,
                       b.call_inputs[i]);
    }
  }

  // The most calls a sample may have: their inputs, one set each, within kMaxCallInputBytes (a
  // model of large inputs gets fewer; the min-time rule then adds samples).
  int64_t max_calls() const {
    return call_inputs_ ? call_inputs_->capacity() : CallInputLayout(sets_[1]).max_calls();
  }

  // The smallest total timed time of the backends still timed (infinite when none is).
  double least_timed_ms() const {
    double least = std::numeric_limits<double>::infinity();
    for (const Backend& b : backends_) {
      if (b.ok) least = std::min(least, b.timed_ms);
    }
    return least;
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

  // After `b`'s code ran outside a sample: threads it started become its, and what it left in the
  // process (signal handlers, userfaultfd, child processes) fails its audit.
  void after_code_of(Backend& b, const char* step) {
    watch_->read(b.name);
    active_ = b.name;
    if (audit_off()) return;
    const std::string left = watch_->take_leftovers();
    if (left.empty()) return;
    // The evidence explains a failure already found (outputs that changed after run() returned).
    const std::string why =
        fmt::format("{}: it {}: work can hide behind its outputs' first read", step, left);
    b.fail(b.ok ? why : why + "; " + b.r.error, Status::kFailAudit);
  }

  // Charges `ms` of worker time to `b`; past its share of the worker's time limit it stops with
  // `timeout`, and the other backends go on.
  void charge(Backend& b, double ms) {
    b.spent_ms += ms;
    if (b.ok && b.spent_ms > budget_ms_) {
      b.fail(fmt::format("its timing and audit took {:.1f} s of the worker, over its share of "
                         "{:.1f} s ({:.0f}% of --timeout {:g} s over {} backends)",
                         b.spent_ms / 1e3, budget_ms_ / 1e3, 100 * kBudgetShare, s_.job.budget_s,
                         s_.job.backends.size()),
             Status::kTimeout);
    }
  }

  // Between untimed check calls: scribbled inputs, and 2 ms for any thread the backend left
  // behind to read them (a timed sample has the other backends' samples after it instead).
  static void settle(Backend& b) {
    scribble_inputs(b);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  // Overwrites the input buffers once a call's outputs are audited (all bits set: NaN for floats,
  // -1 for integers), so a thread the backend left running cannot compute the next call's answer
  // from inputs it is not given yet: it reads these, or the set just used (the next sample uses
  // the other set). Buffers from 64 KiB get one word in every 4 KiB and the last one, enough to
  // spoil an answer computed from them for 1/512 of the stores (the 64 MB of add_add_mul_add's
  // inputs took 3 ms a sample); threads that read them are caught by their CPU clocks besides.
  static void scribble_inputs(Backend& b) {
    constexpr size_t kWhole = size_t{64} << 10, kStride = 4096, kWord = 8;
    for (Tensor& t : b.buffers) {
      auto* p = static_cast<unsigned char*>(t.raw_data());
      const size_t n = t.numel() > 0 ? t.nbytes() : 0;
      if (n < kWhole) {
        std::memset(p, 0xff, n);
        continue;
      }
      for (size_t at = 0; at < n; at += kStride) std::memset(p + at, 0xff, kWord);
      std::memset(p + n - kWord, 0xff, kWord);
    }
  }

  void prepare(const std::string& name) {
    const auto t0 = Clock::now();
    Backend b;
    b.name = name;
    b.index = backends_.size();
    b.r = s_.record(name, "performance");
    s_.report.phase("load", name);
    b.ok = attempt(b.r, Status::kFailToLoad, [&] { b.plugin = s_.load(name); });
    if (b.ok) after_code_of(b, "while loading");
    if (b.ok) {
      s_.report.phase("compile", name);
      b.ok =
          attempt(b.r, Status::kFailToCompile, [&] { b.exe = s_.compile(*b.plugin, name, false); });
      after_code_of(b, "while compiling");
    }
    charge(b, ms_between(t0, Clock::now()));
    backends_.push_back(std::move(b));
  }

  void warm_up(Backend& b) {
    if (!b.ok) return;
    const auto t0 = Clock::now();
    s_.report.phase("warmup", b.name);
    b.ok = attempt(b.r, Status::kFailToRun, [&] {
      load_set(b, sets_[0]);
      // The audit's check calls ran the same code on the same inputs: they count as warm-up.
      const int left =
          audit_off() ? s_.job.timing.warmup : std::max(0, s_.job.timing.warmup - kCheckCalls);
      for (int i = 0; i < left; ++i) call(b);
      b.calls = calls_per_sample(b);
    });
    after_code_of(b, "while warming up");
    charge(b, ms_between(t0, Clock::now()));
  }

  // Like Google Benchmark's min_time: grow the calls per sample until a sample lasts
  // --min-sample-ms, predicting from the last trial with 40% headroom. Trials keep every call's
  // outputs alive as a timed sample does, so the allocator is warm for that pattern too.
  int64_t calls_per_sample(Backend& b) {
    const double target = s_.job.timing.min_sample_ms;
    const int64_t most = max_calls();
    auto trial = [&](int64_t n) {
      std::vector<std::vector<Tensor>> outs(static_cast<size_t>(n));
      const auto t0 = Clock::now();
      for (auto& o : outs) o = call(b);
      touch_pages(outs);
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
      if (ms >= target || n >= most) {
        // Warm samples run faster than the trials: 25% headroom keeps them above the target.
        if (ms < 1.25 * target && ms > 0)
          n = std::min<int64_t>(most, static_cast<int64_t>(std::ceil(n * 1.25 * target / ms)));
        break;
      }
      const double grow = ms > 0 ? std::clamp(1.4 * target / ms, 2.0, 100.0) : 100.0;
      n = std::min<int64_t>(most, static_cast<int64_t>(std::ceil(n * grow)));
    }
    // One more untimed sample of exactly n calls: the first one to hold n outputs at once.
    std::vector<std::vector<Tensor>> outs(static_cast<size_t>(n));
    for (auto& o : outs) o = call(b);
    return n;
  }

  // Calls per sample are chosen once, in the warm-up; a backend whose calls then changed speed (a
  // memo that turned honest at its first new content, a JIT that finished compiling) gets them
  // again from its recent samples, so that every backend's samples keep the target's length. On
  // this 2-vCPU VM a 0.15 ms call measured up to 1.4x slower in samples of 1 ms than in samples of
  // 25 ms beside eleven other backends: a ratio between samples of unequal length is biased.
  void refit_calls(Backend& b) const {
    if (turns_) return;  // the parent chooses
    const std::vector<double>& s = b.r.samples_ms;
    if (s.size() < kRefitSamples) return;
    const auto recent = std::span(s).last(kRefitSamples);
    const double fastest = *std::min_element(recent.begin(), recent.end());
    const double slowest = *std::max_element(recent.begin(), recent.end());
    const double target = s_.job.timing.min_sample_ms, calls = static_cast<double>(b.calls);
    double per_call = 0;
    if (b.calls > 1 && fastest * calls > kRefitFactor * target) per_call = fastest;
    if (b.calls < max_calls() && slowest * calls < target / kRefitFactor) per_call = slowest;
    if (per_call <= 0) return;
    // The warm-up's 25% headroom, so that the samples stay above the target.
    b.calls = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(1.25 * target / per_call)), 1,
                                  max_calls());
  }

  void check(Backend& b) {
    if (!b.ok) return;
    const auto t0 = Clock::now();
    const double calls_ms = check_calls(b);
    after_code_of(b, "while checked");
    const double ms = ms_between(t0, Clock::now());
    // The calls that stand in for warm-up calls are no cost of the audit.
    const double warm_up_ms = calls_ms * std::min(s_.job.timing.warmup, kCheckCalls) / kCheckCalls;
    b.audit_ms += std::max(0.0, ms - warm_up_ms);
    charge(b, ms);
  }

  // Hands `outputs` of `b` on input set `set` (0: A, 1: B) out at once, in
  // file job.tensors + ".<n>", so that no output stays alive in this process (the allocator then
  // gave each later call fresh pages: 4x slower calls on add_add_mul_add) and memory stays that
  // of one call's outputs.
  void hand(const Backend& b, int set, const std::vector<Tensor>& outputs) {
    if (s_.job.tensors.empty()) return;
    write_tensor_file(fmt::format("{}.{}", s_.job.tensors, hand_labels_.size() / 2), {outputs});
    hand_labels_.push_back(static_cast<int64_t>(b.index));
    hand_labels_.push_back(set);
  }

  // The hand-off's index, job.tensors: one int64 tensor [n, 2] saying each handed-out file's
  // backend (its index in the job) and input set. The parent judges them against references made
  // where no plugin is loaded (accuracy_check.h).
  void hand_out() {
    if (s_.job.tensors.empty()) return;
    const auto n = static_cast<int64_t>(hand_labels_.size() / 2);
    Tensor index = Tensor::empty(DType::kI64, {n, 2});
    std::copy(hand_labels_.begin(), hand_labels_.end(), static_cast<int64_t*>(index.raw_data()));
    write_tensor_file(s_.job.tensors, {{index}});
  }

  // A, A again (is it bitwise deterministic?), B.
  static constexpr int kCheckCalls = 3;

  // Returns the time its calls took.
  double check_calls(Backend& b) {
    s_.report.phase("check", b.name);
    double calls_ms = 0;
    auto timed_call = [&] {
      const auto t0 = Clock::now();
      std::vector<Tensor> out = call(b);
      calls_ms += ms_between(t0, Clock::now());
      return out;
    };
    std::vector<Tensor> again;
    std::vector<uint64_t> at_return[2];  // digests taken the moment run() returned
    b.ok = attempt(b.r, Status::kFailToRun, [&] {
      load_set(b, sets_[0]);
      b.checked[0] = timed_call();
      at_return[0] = digest_all(b.checked[0]);
      settle(b);
      load_set(b, sets_[0]);
      again = timed_call();
      const std::vector<uint64_t> again_digest = digest_all(again);
      settle(b);
      load_set(b, sets_[1]);
      b.checked[1] = timed_call();
      at_return[1] = digest_all(b.checked[1]);
      settle(b);
      b.deterministic = again_digest == at_return[0];
    });
    if (!b.ok) return calls_ms;
    // The same outputs, digested again after other work: a change means a thread was still
    // writing them after run() returned.
    for (int set = 0; set < 2; ++set) {
      b.digests[set] = digest_all(b.checked[set]);
      if (b.digests[set] != at_return[set]) {
        b.fail(deferred_work_message("checking", set));
        return calls_ms;
      }
    }
    hand(b, 0, b.checked[0]);
    hand(b, 1, b.checked[1]);
    return calls_ms;
  }

  static std::string deferred_work_message(const std::string& when, int set) {
    return fmt::format(
        "{} (input set {}): outputs changed after run() returned: work deferred past the call",
        when, set == 0 ? "A" : "B");
  }

  // One sample of every backend still timed.
  void round(int rep) {
    for (Backend& b : backends_) {
      if (b.ok) sample(b, rep);
    }
  }

  // CPU the backends' threads used since the previous read: inside `timed`'s own sample it is
  // that backend's work; anything else is work outside its owner's calls, and during `timed`'s
  // sample it disturbs that backend.
  void attribute_cpu(const std::map<std::string, double>& used, const std::string& timed) {
    for (const auto& [owner, ms] : used) {
      if (owner == timed) continue;
      for (Backend& o : backends_) {
        if (o.name == owner) o.outside_ms += ms;
      }
      if (!timed.empty()) {
        for (Backend& t : backends_) {
          if (t.name == timed) t.disturbed[owner] += ms;
        }
      }
    }
  }

  // The sample: its calls back to back, each on its own inputs, then every output page read;
  // nothing else, so that the parent's clock around it bounds this one.
  double timed_calls(Backend& b, std::vector<std::vector<Tensor>>& outs) {
    const double cpu0 = process_cpu_ms();
    const auto t0 = Clock::now();
    for (size_t i = 0; i < outs.size(); ++i) outs[i] = b.exe->run(b.call_inputs[i]);
    const auto t1 = Clock::now();
    touch_pages(outs);
    const auto t2 = Clock::now();
    b.touch_ms += ms_between(t1, t2);  // inside the clock: what reading every page costs
    // The CPU clock over the same span as the wall clock, so cpu_time counts no audit work.
    segment_cpu_ms_ = process_cpu_ms() - cpu0;
    return ms_between(t0, t2);
  }

  // The table the parent reads the outputs by: one row per output of each call. An output that is
  // not contiguous is listed by a contiguous copy (made after the clock stopped).
  static void list_outputs(Backend& b, int rep, std::vector<std::vector<Tensor>>& outs) {
    b.table.clear();
    for (size_t i = 0; i < outs.size(); ++i) {
      for (Tensor& t : outs[i]) {
        CallOutput row;
        row.call = static_cast<uint64_t>(rep * kCallIdStride) + i;
        if (t.defined()) {
          if (!t.is_contiguous()) t = t.contiguous();
          row.addr = reinterpret_cast<uint64_t>(t.raw_data());
          row.nbytes = t.nbytes();
          row.dtype = static_cast<int32_t>(t.dtype());
          row.ndim = static_cast<int32_t>(std::min<int64_t>(t.dim(), 8));
          for (int d = 0; d < row.ndim; ++d) row.dims[d] = t.shape()[static_cast<size_t>(d)];
        }
        b.table.push_back(row);
      }
    }
  }

  void sample(Backend& b, int rep) {
    const auto wall0 = Clock::now();
    std::vector<std::vector<Tensor>> outs(static_cast<size_t>(b.calls));
    double timed = 0;
    b.ok = attempt(b.r, Status::kFailToRun, [&] {
      if (b.inputs_round != rep || b.call_inputs.size() < outs.size()) make_call_inputs(b, rep);
      attribute_cpu(watch_->read(active_), "");
      const ContentionSnapshot before = take_contention_snapshot();
      const PerfCounters::Reading c0 = counters_.read();
      if (turns_) {
        // The parent's clock starts at "go": nothing but the calls and their table after it.
        turns_->prepared();
        turns_->wait_go();
      }
      timed = timed_calls(b, outs);
      // The readings end with the calls: the parent's read of the outputs (its CPU, the stop) is
      // no contention of the sample's.
      const PerfCounters::Reading c1 = counters_.read();
      const ContentionSnapshot after = take_contention_snapshot();
      if (turns_) {
        // The parent stops this process at "done" and reads the outputs it verifies; they stay
        // alive until it says it has.
        list_outputs(b, rep, outs);
        turns_->done({turns_->window_ms(), timed, segment_cpu_ms_, b.calls,
                      reinterpret_cast<uint64_t>(b.table.data()),
                      static_cast<int64_t>(b.table.size())});
        turns_->wait_read();
      }
      b.meter.add_sample(before, after);
      attribute_cpu(watch_->read(b.name), b.name);
      active_ = b.name;
      const auto kd = static_cast<double>(b.calls);
      b.timed_ms += timed;
      b.calls_timed += b.calls;
      b.r.samples_ms.push_back(timed / kd);
      refit_calls(b);
      // A counter that could not be read at either end (NaN) gives no sample: stores hold
      // finite numbers only.
      auto count = [kd](std::vector<double>& into, double before, double after) {
        if (const double per_call = (after - before) / kd; std::isfinite(per_call)) {
          into.push_back(per_call);
        }
      };
      count(b.r.instructions, c0.instructions, c1.instructions);
      count(b.r.cycles, c0.cycles, c1.cycles);
      count(b.r.page_faults, c0.page_faults, c1.page_faults);
      b.r.cpu_ms.push_back(segment_cpu_ms_ / kd);
    });
    b.table.clear();
    if (b.ok && !audit_off()) {
      const std::string left = watch_->take_leftovers();
      if (!left.empty()) {
        b.fail(fmt::format("timed sample {}: it {}: work can hide behind its outputs' first read",
                           rep, left),
               Status::kFailAudit);
      }
    }
    const double wall = ms_between(wall0, Clock::now());
    b.audit_ms += std::max(0.0, wall - timed);
    charge(b, wall);
  }

  // After timing: work outside the clock.
  void judge() {
    for (Backend& b : backends_) {
      if (!b.ok) continue;
      if (b.outside_ms > outside_allowance(b)) {
        b.fail(
            fmt::format("its threads ({}) used {:.1f} ms of CPU outside its own calls while timing "
                        "({:.1f} ms timed): work left running after run() returned",
                        fmt::join(watch_->threads_of(b.name), ","), b.outside_ms, b.timed_ms),
            Status::kFailAudit);
      }
    }
  }

  // The CPU other threads may spend outside `b`'s calls, or `b`'s threads outside them, before it
  // counts as work outside the clock.
  static double outside_allowance(const Backend& b) {
    return std::max(kOutsideCpuMinMs, kOutsideCpuShare * b.timed_ms);
  }

  // Which other backends' threads ran during `b`'s samples, past the same allowance.
  std::string disturbance(Backend& b) {
    std::vector<std::string> by;
    std::string why;
    for (const auto& [owner, ms] : b.disturbed) {
      if (ms <= outside_allowance(b)) continue;
      by.push_back(owner);
      why = join_reasons(why, fmt::format("disturbed by backend {}: its threads used {:.1f} ms of "
                                          "CPU during these samples ({:.1f} ms timed)",
                                          owner, ms, b.timed_ms));
    }
    b.r.disturbed_by = fmt::format("{}", fmt::join(by, ","));
    return why;
  }

  static std::string join_reasons(const std::string& a, const std::string& b) {
    return a.empty() ? b : b.empty() ? a : a + "; " + b;
  }

  // The worker's part of the audit line; the parent adds how many calls it verified.
  std::string describe_audit(const Backend& b) const {
    if (audit_off()) return std::string(reports::kAuditOff);
    const std::string pages =
        b.timed_ms > 0
            ? fmt::format("; every output page read in the clock ({:.2f}% of the timed time)",
                          100 * b.touch_ms / b.timed_ms)
            : "";
    // The calls of a sample are refitted as the timing goes, so samples x calls is the last count;
    // the calls and the time in all say what --min-time-ms was held to.
    return fmt::format(
        "{}; {} samples x {} calls ({} calls, {:.3f} ms timed in all), every call on inputs of its "
        "own{}",
        b.deterministic ? "bitwise deterministic" : "not bitwise deterministic",
        b.r.samples_ms.size(), b.calls, b.calls_timed, b.timed_ms, pages);
  }

  Session& s_;
  PerfCounters& counters_;
  const Graph varied_;  // the model with constant float inputs drawn at random (with_varied_inputs)
  const std::optional<GraphCost> cost_;
  const uint64_t secret_;  // of the calls' inputs when timing alone (fill_call_inputs)
  std::optional<CallInputView> call_inputs_;  // under --turns: the parent's
  std::optional<ProcessWatch> watch_;
  std::string active_;         // the backend whose code ran last
  double segment_cpu_ms_ = 0;  // the CPU time of this sample's timed segments
  double budget_ms_ = 0;
  std::vector<Tensor> sets_[2];
  std::optional<TurnChannel> turns_;
  std::vector<int64_t> hand_labels_;  // per handed-out file: backend, input set
  std::vector<Backend> backends_;
};

}  // namespace

void timing_job(Session& s, PerfCounters& counters) { TimingJob(s, counters).run(); }

}  // namespace crucible
