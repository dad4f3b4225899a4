// Taking turns with one timing worker per backend, and judging what they said against what the
// parent saw (see turn_driver.h).
#include "turn_driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <thread>

#include "call_input_region.h"
#include "call_reader.h"
#include "contention.h"
#include "crucible/core/rng.h"
#include "crucible/ir/text_format.h"
#include "environment.h"
#include "input_sets.h"
#include "pool_spin.h"
#include "worker_cpu.h"

namespace crucible {

namespace {

using Clock = std::chrono::steady_clock;
using reports::Status;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The longest line a worker may send: the protocol's are under 100 bytes.
constexpr size_t kMaxLine = 1024;

// One worker while it runs: its thread (blocked in run_worker), its socket, what it said.
struct Live {
  TurnWorker* worker = nullptr;
  int fd = -1;        // the parent's end
  int child_fd = -1;  // the worker's end, closed here once the worker has it
  std::thread thread;
  std::atomic<bool> finished{false};
  std::shared_ptr<const WorkerCpu> cpu;  // set by the started hook, before its first word
  std::atomic<bool> cpu_set{false};
  WorkerRun run;
  std::string start_error;
  std::string buffer;
  std::map<pid_t, std::string> placement;  // each thread's as first seen
  bool alive = false;
  bool more = false;
  pid_t pid = 0;
  int64_t calls = 1;  // of its next sample: its first "ready" said, then the parent chose
  std::vector<double> per_call_ms;          // each sample's time per call, by the parent's clock
  std::unique_ptr<CallInputRegion> inputs;  // its calls' inputs, written before each sample
  std::vector<int64_t> picks;               // the calls of its next sample the parent will read
  // Its pool still spun when settle() gave up: the CPU it uses while the next worker is timed is
  // the rest of that turn's spin (settle_cpu_ms), not idle work, until it is seen quiet.
  bool spinning = false;
  TurnRecord record;

  ~Live() {
    if (thread.joinable()) thread.join();
    if (fd >= 0) ::close(fd);
    if (child_fd >= 0) ::close(child_fd);
  }

  const std::string& backend() const { return worker->job.backends.at(0); }
  double tree_ms() const { return cpu_set ? cpu->tree_ms() : NAN; }
  double wait_ms() const { return cpu_set ? cpu->main_thread_wait_ms() : NAN; }

  bool send(char c) { return ::send(fd, &c, 1, MSG_NOSIGNAL) == 1; }
  bool send(const std::string& s) {
    return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }

  // The worker's next line, or nullopt once it is gone or said something else.
  std::optional<TurnMessage> next() {
    for (;;) {
      if (const size_t nl = buffer.find('\n'); nl != std::string::npos) {
        const std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        auto m = parse_turn_message(line);
        if (!m) record.protocol_error = fmt::format("it said '{}'", line.substr(0, 80));
        return m;
      }
      if (buffer.size() > kMaxLine) {
        record.protocol_error = fmt::format("it sent a line of over {} bytes", kMaxLine);
        return std::nullopt;
      }
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, 50);
      if (ready > 0) {
        char chunk[4096];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return std::nullopt;
        buffer.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (ready < 0 && errno != EINTR) return std::nullopt;
      if (finished) return std::nullopt;
    }
  }
};

// Whether a thread of `l` seen before (from its start, before the next worker was started) now has
// another priority or other CPUs (sched_setaffinity, setpriority): any process of the same user
// may do that to slow a baseline.
void check_placement(Live& l) {
  if (!l.cpu_set || !l.record.placement_change.empty()) return;
  for (const auto& [tid, now] : l.cpu->placement()) {
    const auto [at, first] = l.placement.try_emplace(tid, now);
    if (!first && at->second != now) {
      l.record.placement_change = fmt::format("thread {}: {} -> {}", tid, at->second, now);
      return;
    }
  }
}

// Whether a process of `l`'s cgroup runs beside its worker's tree rather than in it (a
// CLONE_PARENT child, a double fork's grandchild): the first one seen is kept.
void check_stray(Live& l) {
  if (l.cpu_set && l.record.stray.empty()) l.record.stray = l.cpu->stray();
}

// The CPUs the workers may run on, read once: a pool spins on at most that many.
int allowed_cpus() {
  static const int n = usable_cpus();
  return n;
}

// After a worker's turn its thread pool spins a while before it sleeps (libgomp's spin count:
// 4.2-4.5 ms of CPU a turn on this 2-vCPU VM; more where PAUSE is slower, and per thread); the
// next worker's sample starts once that has stopped, so that it is not disturbed by it and the
// spinning is not taken for work outside the clock. Settled: two polls in a row see no thread of
// the worker but its main one runnable, and its tree's CPU did not move between them (a pool that
// yields between spins is running between the polls). The wait is bounded by the CPU the tree
// used meanwhile, not by the parent's clock: where the worker's CPU is taken from it (a VM's steal
// on one vCPU, a real-time task) its pool spins on long after the parent's clock says it should
// have stopped, and a bound of 20 ms charged the rest of every spin as work outside the clock
// (honest eager and a test backend failed their audits, 17.6 and 25.4 ms, with 30 ms stalls of
// one CPU in every 40 ms). It waits at most kSettleMaxCpuMs a CPU of the tree's CPU, or kSettleMax
// for a tree runnable and never run. Returns the CPU the tree used meanwhile; l.spinning says it
// gave up before the tree was quiet: a spin longer than the bound (OMP_WAIT_POLICY=active,
// a large GOMP_SPINCOUNT, a slow PAUSE under steal) goes on while the next worker is timed, and
// turn() charges what it uses there to this turn, as after-turn CPU, not as idle work (an honest
// eager failed CI's audit with 3.5 ms of such a spin in one of its 6 idle windows).
constexpr int kSettlePollUs = 250;
constexpr double kSettleMaxCpuMs = 12.5;
constexpr auto kSettleMax = std::chrono::seconds(1);
double settle(Live& l) {
  l.spinning = false;
  if (!l.cpu_set) return 0;
  const double start = l.tree_ms();
  const double most =
      std::max(kSettleMaxCpuMs * allowed_cpus(), 2 * pool_spin_cpu_ms(l.worker->job.threads));
  const auto deadline = Clock::now() + kSettleMax;
  double before = start;
  for (int quiet = 0; quiet < 2 && before - start < most && Clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::microseconds(kSettlePollUs));
    const double now = l.tree_ms();
    if (!std::isfinite(now)) return 0;
    quiet = !l.cpu->other_threads_running() && now == before ? quiet + 1 : 0;
    before = now;
    l.spinning = quiet < 2;
  }
  return std::isfinite(before - start) ? before - start : 0;
}

// The CPU of `l`'s last settling, where a spin that outlasted it is added (after its warm-up's,
// which is not a turn's, the spin is charged as one).
double& last_spin(Live& l) {
  if (l.record.settle_cpu_ms.empty()) l.record.settle_cpu_ms.push_back(0);
  return l.record.settle_cpu_ms.back();
}

// How often the parent looks whether a worker's main thread is blocked on its next word.
constexpr int kBlockPollUs = 20;
constexpr int kBlockMaxPolls = 80;

void start(Live& l, const std::map<std::string, std::string>& env, const ChildLimits& limits) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    l.start_error = fmt::format("cannot make the turn socket: {}", strerror(errno));
    l.finished = true;
    return;
  }
  l.fd = sv[0];
  l.child_fd = sv[1];
  l.worker->job.turns = true;
  std::map<std::string, std::string> own = env;
  for (const auto& [k, v] : l.worker->env) own[k] = v;
  l.thread = std::thread([&l, own = std::move(own), &limits] {
    ChildHooks hooks;
    hooks.fds = {l.child_fd, l.inputs->fd()};
    // The inputs' secret stays here: the worker reads what the parent wrote.
    WorkerJob job = l.worker->job;
    job.secret = 0;
    hooks.started = [&l](pid_t pid, std::shared_ptr<const WorkerCpu> tree) {
      l.pid = pid;
      l.cpu = std::move(tree);
      l.cpu_set = true;
      ::close(l.child_fd);
      l.child_fd = -1;
    };
    try {
      l.run = run_worker(job, l.worker->files, own, limits, {}, hooks);
    } catch (const std::exception& e) {
      l.start_error = e.what();
    }
    l.finished = true;
  });
  const std::optional<TurnMessage> first = l.next();
  l.alive = first && first->ready;
  l.more = l.alive && first->more;
  if (l.alive) l.calls = first->calls;
  // Its warm-up's pool spins down before the next worker starts (and before any turn); its
  // threads' placement is taken before any other worker runs code.
  if (l.alive) {
    settle(l);
    check_placement(l);
    check_stray(l);
  }
}

// Set B of the model a timing worker times, as the worker makes it (worker.cpp, timing_job.cpp).
std::vector<Tensor> timing_set_b(const WorkerJob& job) {
  Graph g = load_graph_file(job.graph);
  reseed_params(g, job.seed);
  return second_input_set(with_varied_inputs(g), job.seed);
}

// Each worker's outputs are read at this many calls of each sample, chosen by the parent at random
// (the reference worker's at every call another's are read at, besides), up to kMaxVerified calls
// and kMaxVerifiedBytes.
constexpr int64_t kVerifyPerSample = 8;
constexpr size_t kMaxVerified = 512;
constexpr size_t kMaxVerifiedBytes = size_t{64} << 20;

// Which calls of the round's samples the parent reads, before any worker runs one: the reference
// worker's include every other worker's (of the same ids, hence the same inputs).
void plan_reads(std::vector<std::unique_ptr<Live>>& live, uint64_t seed, int64_t round) {
  auto draw = static_cast<uint64_t>(round * kCallIdStride);
  std::set<int64_t> all;
  for (auto& l : live) {
    l->picks.clear();
    if (!l->alive || l->worker->job.timing.no_audit) continue;
    if ((l->record.verified.size() >= kMaxVerified ||
         l->record.verified_bytes >= kMaxVerifiedBytes) &&
        !l->worker->reference)
      continue;
    std::set<int64_t> picks;
    for (int64_t k = 0; k < std::min(kVerifyPerSample, l->calls); ++k) {
      int64_t at;
      do {
        at = static_cast<int64_t>(random_bits(seed, draw++) % static_cast<uint64_t>(l->calls));
      } while (picks.count(at));
      picks.insert(at);
    }
    all.insert(picks.begin(), picks.end());
    l->picks.assign(picks.begin(), picks.end());
  }
  for (auto& l : live) {
    if (!l->worker->reference || l->picks.empty()) continue;
    for (int64_t at : all) {
      if (at < l->calls) l->picks.push_back(at);
    }
    std::sort(l->picks.begin(), l->picks.end());
    l->picks.erase(std::unique(l->picks.begin(), l->picks.end()), l->picks.end());
  }
}

// With `l` stopped at its "done": the sampled elements of its picked calls' outputs, out of its
// memory. (A process of its tree outside its thread group is not stopped, but is named by the
// worker's watch and charged when it runs during another's turn.)
void read_outputs(Live& l, const TurnDone& done, int64_t round, uint64_t secret) {
  const StoppedWorker stopped(l.pid);
  if (!stopped.error().empty()) {
    l.record.read_error = "it was not stopped to read its outputs: " + stopped.error();
    return;
  }
  for (const int64_t at : l.picks) {
    if (at >= done.calls) continue;  // its calls per sample were chosen again
    const auto id = static_cast<uint64_t>(round * kCallIdStride + at);
    std::vector<CallOutput> rows;
    std::string why = read_call_table(l.pid, done, at, rows);
    if (why.empty() && rows.at(0).call != id)
      why = fmt::format("its table says call {} where sample {} had call {}", rows[0].call, round,
                        id);
    std::vector<Tensor> outs(rows.size());
    for (size_t o = 0; o < rows.size() && why.empty(); ++o)
      why = read_sampled_output(l.pid, rows[o], o, secret, outs[o]);
    if (!why.empty()) {
      l.record.read_error = fmt::format("sample {}: {}", round, why);
      return;
    }
    for (const Tensor& t : outs) l.record.verified_bytes += t.nbytes();
    l.record.verified[id] = std::move(outs);
  }
}

// The secrets of one timing: of the calls' inputs (given to the reference worker after timing) and
// of the calls and elements the parent reads (never given to a worker).
struct Secrets {
  uint64_t inputs = 0;
  uint64_t reads = 0;
};

// The calls of `l`'s next sample: as many as the median call of its last kRefitSamples samples
// (by the parent's clock) needs to fill --min-sample-ms with the warm-up's 25% headroom, within
// what its inputs hold. Every backend's samples then last alike, so each pays the start of a
// sample after another worker ran (its pool woken, its caches refilled) in the same share of its
// time: a backend whose samples lasted 20x eager's measured the same interpreter 1.27-1.47x
// faster than eager (TimingAudit, memo_until_new turned honest).
constexpr size_t kRefitSamples = 5;
int64_t next_calls(const Live& l) {
  if (l.per_call_ms.empty()) return l.calls;
  const size_t n = std::min(kRefitSamples, l.per_call_ms.size());
  const std::vector<double> recent(l.per_call_ms.end() - static_cast<std::ptrdiff_t>(n),
                                   l.per_call_ms.end());
  const double per_call = reports::median(recent);
  if (!(per_call > 0)) return l.calls;
  const double target = 1.25 * l.worker->job.timing.min_sample_ms;
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(target / per_call)), 1,
                             std::min(l.inputs->capacity(), kMaxTurnCalls));
}

// The others waited through live[i]'s turn for their "p" (their main threads too): whatever CPU
// their trees used since `tree_p` ran their own code outside the clock.
void charge_idle(std::vector<std::unique_ptr<Live>>& live, size_t i,
                 const std::vector<double>& tree_p) {
  for (size_t j = 0; j < live.size(); ++j) {
    if (j == i) continue;
    const double used = live[j]->tree_ms() - tree_p[j];
    if (!std::isfinite(used)) continue;
    TurnRecord& idle = live[j]->record;
    if (live[j]->spinning) {
      last_spin(*live[j]) += std::max(0.0, used);
      live[j]->spinning = live[j]->cpu->other_threads_running();
      continue;
    }
    idle.idle_cpu_ms += std::max(0.0, used);
    ++idle.idle_windows;
    if (used > 0) ++idle.idle_windows_used;
    idle.idle_most_ms = std::max(idle.idle_most_ms, used);
  }
}

// One sample of `live[i]`, timed from here; the others' CPU meanwhile is charged to them.
void turn(std::vector<std::unique_ptr<Live>>& live, size_t i, int64_t round,
          const Secrets& secrets) {
  Live& l = *live[i];
  const size_t n = live.size();
  std::vector<double> tree_p(n), tree0(n), tree1(n);
  for (size_t j = 0; j < n; ++j) tree_p[j] = live[j]->tree_ms();
  // It takes its readings, then its sample's inputs are written while it waits for "go": its
  // calls' inputs exist only from there, and the parent's clock holds its calls alone.
  if (!l.send(fmt::format("p{}\n", l.calls))) {
    l.alive = false;
    return;
  }
  std::optional<TurnMessage> m = l.next();
  if (m && !m->prepared) {
    l.record.protocol_error = "it sent another word than 'prepared' after 'p'";
    m.reset();
  }
  if (!m) {
    l.alive = false;
    return;
  }
  // Its main thread blocks on "go" within microseconds of saying "prepared": the inputs are
  // written once it has (or after kBlockMaxPolls polls: its CPU from there on is charged).
  for (int k = 0; k < kBlockMaxPolls && l.cpu_set && l.cpu->main_thread_running(); ++k)
    std::this_thread::sleep_for(std::chrono::microseconds(kBlockPollUs));
  const double tree_w = l.tree_ms();
  try {
    l.inputs->write(secrets.inputs, round, l.calls);
  } catch (const std::exception& e) {
    l.record.protocol_error =
        fmt::format("it asked for a sample of {} calls: {}", l.calls, e.what());
    l.alive = false;
    return;
  }
  for (size_t j = 0; j < n; ++j) tree0[j] = live[j]->tree_ms();
  if (const double used = tree0[i] - tree_w; std::isfinite(used)) {
    // A spin that outlasted its settling and the others' samples is still its last turn's.
    (l.spinning ? last_spin(l) : l.record.inputs_cpu_ms) += std::max(0.0, used);
  }
  l.spinning = false;
  check_placement(l);
  check_stray(l);
  const double wait0 = l.wait_ms() + own_thread_wait_ms();
  const auto t0 = Clock::now();
  if (!l.send('g')) {
    l.alive = false;
    return;
  }
  m = l.next();
  const auto t1 = Clock::now();
  const double waited = l.wait_ms() + own_thread_wait_ms() - wait0;
  for (size_t j = 0; j < n; ++j) tree1[j] = live[j]->tree_ms();
  if (m && m->done) {
    l.record.windows.push_back(
        {ms_between(t0, t1), *m->done, tree1[i] - tree0[i], std::isfinite(waited) ? waited : 0.0});
    for (size_t j = 0; j < n; ++j) {
      if (j != i && std::isfinite(tree1[j] - tree0[j]))
        l.record.disturbed[live[j]->backend()] += tree1[j] - tree0[j];
    }
    l.record.calls_timed += m->done->calls;
    if (const int64_t by = m->done->continued_by; by != 0 && l.record.continued_by == 0) {
      l.record.continued_by = by;
      // Its own process tree included: a worker that continues itself does not thereby excuse
      // its own work outside the clock (judge_turns), it fails as a stopper.
      for (const auto& other : live) {
        if (by > 0 && other->cpu_set && other->cpu->holds(static_cast<pid_t>(by)))
          l.record.continued_by_backend = other->backend();
      }
    }
    l.per_call_ms.push_back(l.record.windows.back().outside_ms /
                            static_cast<double>(std::max<int64_t>(1, m->done->calls)));
    if (m->done->calls != l.calls && l.record.protocol_error.empty())
      l.record.protocol_error =
          fmt::format("it timed {} calls in a sample of {}", m->done->calls, l.calls);
    if (!l.worker->job.timing.no_audit && l.record.read_error.empty())
      read_outputs(l, *m->done, round, secrets.reads);
    if (!l.send('a')) {
      l.alive = false;
      return;
    }
    m = l.next();
  }
  charge_idle(live, i, tree_p);
  if (!m || !m->ready) {
    l.alive = false;  // gone mid-sample or off the protocol: its report (or protocol_error) says
    return;
  }
  l.more = m->more;
  l.calls = next_calls(l);
  l.record.settle_cpu_ms.push_back(settle(l));
  check_stray(l);
}

}  // namespace

std::vector<TurnRecord> take_turns(std::vector<TurnWorker>& workers,
                                   const std::map<std::string, std::string>& env,
                                   const ChildLimits& limits) {
  // One secret of the calls' inputs for all (call i of round r has the same inputs in every
  // worker), kept here: the reference worker is given it after timing.
  Secrets secrets{
      workers.empty() || workers[0].job.secret == 0 ? os_secret() : workers[0].job.secret,
      os_secret()};
  for (TurnWorker& w : workers) w.job.secret = secrets.inputs;
  std::vector<std::unique_ptr<Live>> live;
  std::string no_inputs;
  std::vector<Tensor> set_b;
  if (!workers.empty()) {
    try {
      set_b = timing_set_b(workers[0].job);
    } catch (const std::exception& e) {
      no_inputs = fmt::format("cannot make the timed calls' inputs: {}", e.what());
    }
  }
  for (TurnWorker& w : workers) {
    live.push_back(std::make_unique<Live>());
    Live& l = *live.back();
    l.worker = &w;
    try {
      if (no_inputs.empty()) l.inputs = std::make_unique<CallInputRegion>(set_b);
    } catch (const std::exception& e) {
      no_inputs = e.what();
    }
    if (no_inputs.empty()) {
      start(l, env, limits);
    } else {
      l.start_error = no_inputs;
      l.finished = true;
    }
  }
  // Rounds of one sample each, while any worker wants more: all get the same number of samples,
  // as backends timed side by side did in one process.
  auto wanted = [&] {
    return std::any_of(live.begin(), live.end(), [](const auto& l) { return l->alive && l->more; });
  };
  for (int64_t round = 0; wanted(); ++round) {
    plan_reads(live, secrets.reads, round);
    for (size_t i = 0; i < live.size(); ++i) {
      if (live[i]->alive) turn(live, i, round, secrets);
    }
  }
  std::vector<TurnRecord> out;
  for (auto& l : live) {
    if (l->alive) l->send('q');
    if (l->thread.joinable()) l->thread.join();
    TurnRecord r = std::move(l->record);
    r.verify_secret = secrets.reads;
    r.reference = l->worker->reference;
    r.pool_spin_ms = pool_spin_cpu_ms(l->worker->job.threads);
    r.results = std::move(l->run.results);
    if (r.results.empty()) {
      reports::ResultRecord fail =
          reports::make_result(l->worker->job.suite, l->worker->job.model, l->backend(),
                               "performance", l->worker->job.batch_size);
      fail.status = Status::kFailToRun;
      fail.error = l->start_error.empty() ? "its timing worker gave no result" : l->start_error;
      r.results.push_back(fail);
    }
    if (l->cpu) {
      r.cpu_how = l->cpu->how();
      r.cpu_resolution_ms = l->cpu->resolution_ms();
    }
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// Tolerances of the outside checks. The worker's window starts after the parent's clock does and
// ends before it stops, so it can be no longer (5 us for the printed digits). It is shorter by a
// message each way and by the waits for a CPU of both ends (subtracted), and, on a VM whose vCPUs
// are taken away (steal, which neither end sees as waiting), by much more: an idle vCPU woken by
// a message then takes up to milliseconds (1.8 ms of a 2.5 ms sample here, at 38% steal; 2.7 ms
// of 6.7 ms in both of an honest eager's 2 samples on CI's host). So no gap is proof of a lie,
// and none fails a result: a gap past kLatencyMs + kLatencyShare of the sample in every sample,
// or past kLatencyMs + kLieShare in most of 3 or more, is said as a clock that runs fast, any
// other median gap past kLatencyShare as plain noise; both make the result noisy, and the first
// keeps it out of every speed-up (speedup_withheld): a clock that lies in most samples gains
// nothing (one that lies in fewer barely moves the median), and noise is not taken for guilt.
constexpr double kPrintedMs = 0.005;
constexpr double kLatencyMs = 0.2;
constexpr double kLatencyShare = 0.1;
constexpr double kLieShare = 0.25;
// How much shorter the worker's timed calls were than the parent's window, waits for a CPU aside
// (the worker's window holds nothing but its calls and the table of their outputs).
struct ClockGaps {
  size_t n = 0;
  double outside = 0;  // the median sample by the parent's clock
  double gap = 0;      // the median gap
  double least = 0;    // the smallest gap past what latency explains (kLatencyMs, kLatencyShare)
  size_t lying = 0;    // samples whose gap passes kLatencyMs + kLieShare of them

  explicit ClockGaps(const TurnRecord& r) {
    std::vector<double> o, g;
    least = INFINITY;
    for (const TurnWindow& w : r.windows) {
      o.push_back(w.outside_ms);
      g.push_back(w.outside_ms - w.inside.timed_ms - w.wait_ms);
      least = std::min(least, g.back() - kLatencyMs - kLatencyShare * w.outside_ms);
      if (g.back() > kLatencyMs + kLieShare * w.outside_ms) ++lying;
    }
    n = o.size();
    if (n > 0) {
      outside = reports::median(o);
      gap = reports::median(g);
    }
  }
  bool lie() const { return n > 0 && (least > 0 || (n >= 3 && 2 * lying > n)); }
  bool noise() const { return n > 0 && !lie() && gap > kLatencyMs + kLatencyShare * outside; }
  std::string said() const {
    if (lie())
      return fmt::format(
          "its samples lasted {:.3f} ms by the harness's clock and {:.3f} ms less by its own, "
          "waits for a CPU aside (the medians of {}; every sample {:.3f} ms or more past the "
          "latency allowed, {} past a quarter of it): its clock runs fast (a rewritten "
          "clock_gettime?) or its machine's vCPUs were taken away; no speed-up from it",
          outside, gap, n, std::max(0.0, least), lying);
    return fmt::format("its samples were {:.0f}% shorter by its clock than by the harness's",
                       100 * gap / outside);
  }
};

// What no honest worker's clock can say: a window longer than the parent's, calls longer than
// their window, more CPU than the machine has. "" when none.
std::string clock_failure(const TurnRecord& r, long cores) {
  for (const TurnWindow& w : r.windows) {
    if (w.inside.window_ms > w.outside_ms + kPrintedMs) {
      return fmt::format(
          "its clock counted {:.3f} ms for a sample the harness saw last {:.3f} ms: its clock "
          "runs slow (a rewritten clock_gettime?)",
          w.inside.window_ms, w.outside_ms);
    }
    if (w.inside.timed_ms > w.inside.window_ms + kPrintedMs) {
      return fmt::format("it counted {:.3f} ms of calls in a window of {:.3f} ms by its own clock",
                         w.inside.timed_ms, w.inside.window_ms);
    }
  }
  for (const TurnWindow& w : r.windows) {
    if (w.inside.cpu_ms > w.outside_ms * static_cast<double>(cores) * 1.05 + 1.0) {
      return fmt::format(
          "it claimed {:.3f} ms of CPU in a sample of {:.3f} ms on {} CPUs: more than the "
          "machine has",
          w.inside.cpu_ms, w.outside_ms, cores);
    }
  }
  return "";
}

// Marks `r` noisy for `why`, beside any reason it had.
void mark_noisy(reports::ResultRecord& r, const std::string& why) {
  r.noise_reason = r.noise_reason.empty() ? why : r.noise_reason + "; " + why;
  r.noisy = true;
}

// The backends whose timing workers `backend`'s worker stopped and continued, as one string.
std::string stopped_by(const std::vector<TurnRecord>& records, const std::string& backend) {
  std::vector<std::string> victims;
  for (const TurnRecord& other : records) {
    if (other.continued_by_backend == backend && !other.results.empty())
      victims.push_back(other.results[0].backend);
  }
  return fmt::format("{}", fmt::join(victims, ","));
}

// What one turn's settling may use unpaid, a pool's spin: twice the reference worker's median
// (its runtime's spin on this host at this thread count) or twice the spin the harness measured
// in its own pool (pool_spin.h: a reference that never used its pool spun nothing, and an honest
// peer's pool then failed under GOMP_SPINCOUNT=3000000), and at least kSpinAllowanceMs a CPU.
// Past it, the CPU a worker used after its turn is its own work outside the clock: a thread it
// woke to stream memory as the next worker starts, which settle() holds that worker off for.
constexpr double kSpinAllowanceMs = 5;
double spin_allowance(const std::vector<TurnRecord>& records) {
  double allowance = kSpinAllowanceMs * allowed_cpus();
  for (const TurnRecord& r : records) {
    allowance = std::max(allowance, 2 * r.pool_spin_ms);
    if (r.reference && !r.settle_cpu_ms.empty())
      allowance = std::max(allowance, 2 * reports::median(r.settle_cpu_ms));
  }
  return allowance;
}

// The CPU of one event in one of the others' samples that is not charged: the largest such
// window's, up to a pool's spin, once the worker waited through at least 3. What a worker does
// once while another is timed it could have done in its warm-up, unpaid anyway; work that serves
// its calls (a cache refilled, a side thread, a hog) recurs in every sample and stays charged.
// CI's honest eager used 3.2 and 3.5 ms so, in 1 of its 3 and 6 idle windows, under other tests'
// load (its pool had settled; the cause was not reproduced here in 37 loaded runs).
double one_idle_event(const TurnRecord& rec, double spin) {
  if (rec.idle_windows < 3) return 0;
  return std::min({rec.idle_most_ms, rec.idle_cpu_ms, spin});
}

}  // namespace

void judge_turns(std::vector<TurnRecord>& records) {
  const double spin = spin_allowance(records);
  for (TurnRecord& rec : records) {
    for (double ms : rec.settle_cpu_ms) rec.after_turn_cpu_ms += std::max(0.0, ms - spin);
    const double timed = rec.timed_ms();
    // As the worker allows its own threads (contention.h), plus two reads' steps a sample.
    const double allowance = std::max(kOutsideCpuMinMs, kOutsideCpuShare * timed) +
                             2 * rec.cpu_resolution_ms * static_cast<double>(rec.windows.size());
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const ClockGaps gaps(rec);
    const double forgiven = one_idle_event(rec, spin);
    for (reports::ResultRecord& r : rec.results) {
      std::vector<std::string> by;
      for (const auto& [other, ms] : rec.disturbed) {
        if (ms <= allowance) continue;
        by.push_back(other);
        mark_noisy(r, fmt::format("disturbed by backend {}: its worker used {:.1f} ms of CPU "
                                  "during these samples ({:.1f} ms timed, read from outside: {})",
                                  other, ms, timed, rec.cpu_how));
      }
      if (!by.empty()) {
        const std::string names = fmt::format("{}", fmt::join(by, ","));
        r.disturbed_by = r.disturbed_by.empty() ? names : r.disturbed_by + "," + names;
      }
      if (gaps.lie() || gaps.noise()) {
        // Said, and a lie kept out of every speed-up; not failed (see kLatencyMs).
        mark_noisy(r, gaps.said());
        if (gaps.lie()) r.speedup_withheld = true;
      }
      if (rec.continued_by != 0) {
        // Stopped and continued by another process: its samples hold the stop.
        mark_noisy(
            r,
            fmt::format("its timing worker was stopped and continued by {}{}; no speed-up from it",
                        rec.continued_by > 0 ? fmt::format("process {}", rec.continued_by)
                                             : std::string("a process that hid its pid"),
                        rec.continued_by_backend.empty()
                            ? ""
                            : fmt::format(", of backend {}'s worker", rec.continued_by_backend)));
        r.speedup_withheld = true;
      }
      if (r.status != Status::kPass || r.audit == reports::kAuditOff) continue;
      std::string why;
      const std::string stopped = stopped_by(records, r.backend);
      if (!rec.protocol_error.empty()) {
        why = "its timing worker broke the turn protocol: " + rec.protocol_error;
      } else if (!rec.read_error.empty()) {
        why = "the harness could not read its timed calls' outputs: " + rec.read_error;
      } else if (rec.windows.empty()) {
        why = "its timing worker reported samples the harness never saw";
      } else if (!stopped.empty()) {
        why = fmt::format(
            "its worker stopped and continued backend {}'s timing worker (SIGSTOP, SIGCONT) while "
            "it was timed: a baseline slowed from outside",
            stopped);
      } else if (!rec.stray.empty()) {
        why = fmt::format(
            "a process left its worker's tree and lived beside it while it was timed ({}; started "
            "with CLONE_PARENT or by a double fork): work no call is charged with",
            rec.stray);
      } else if (!rec.placement_change.empty()) {
        why = fmt::format(
            "its worker's threads were moved or reprioritized while it was timed ({}): another "
            "process may have slowed it",
            rec.placement_change);
      } else if (why = clock_failure(rec, cores); !why.empty()) {
      } else if (const double outside =
                     rec.idle_cpu_ms - forgiven + rec.inputs_cpu_ms + rec.after_turn_cpu_ms;
                 outside > allowance && rec.continued_by_backend.empty()) {
        // (A worker another backend's stopped and continued is not blamed for its pool's waking;
        // one continued by a hidden sender is: it may have been itself.)
        why = fmt::format(
            "its processes used {:.1f} ms of CPU where they had nothing to compute ({:.1f} ms "
            "while other backends were timed, in {} of their {} samples, at most {:.2f} ms in "
            "one, {:.2f} ms of it not charged; {:.1f} ms while the harness wrote its calls' "
            "inputs, {:.1f} ms after its turns "
            "past a pool's spin of {:.1f} ms; {:.1f} ms timed; read from outside: {}): work "
            "outside the clock",
            outside, rec.idle_cpu_ms, rec.idle_windows_used, rec.idle_windows, rec.idle_most_ms,
            forgiven, rec.inputs_cpu_ms, rec.after_turn_cpu_ms, spin, timed, rec.cpu_how);
      }
      if (why.empty()) continue;
      r.status = Status::kFailAudit;
      r.error = why;
    }
  }
}

}  // namespace crucible
