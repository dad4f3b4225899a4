// Test backends that cheat at benchmarks the ways leaderboards have been gamed, one built per cheat
// (CHEAT, set per target in tests/CMakeLists.txt), so a test can prove the timing audit catches
// each. Outputs: memo_pointer, early_return, perf_only, side_thread, repeat_skip. Remembering by
// contents: memo_contents, memo_few_words, memo_until_new, count_calls. Not deterministic:
// nondet_skip, nondet_memo (and nondet_honest, which cheats at nothing). Work outside the clock:
// fault_handler, hog_others, hog_spawned, hog_grandchild, watch_scribble. Starving the worker:
// starve. And slow, honest but slow, for the per-backend time budget.
// Every one computes honest outputs through the interpreter whenever it does compute.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "crucible/ops/interpreter.h"
#include "crucible/plugin_api.h"

namespace {

using namespace crucible;

constexpr std::string_view kCheat = CHEAT;

std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.clone());
  return out;
}

// True in the timing worker: `crucible worker --job timing ...`.
bool in_performance_mode() {
  std::ifstream in("/proc/self/cmdline");
  const std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return cmd.find(std::string("timing\0", 7)) != std::string::npos;
}

// A key from a few words of each input (first, middle, last), as a cheap fingerprint would take.
size_t few_words(std::span<const Tensor> inputs) {
  size_t h = 0;
  for (const Tensor& t : inputs) {
    const Tensor c = t.contiguous();
    const auto* p = static_cast<const unsigned char*>(c.raw_data());
    const size_t n = c.nbytes();
    for (size_t at : {size_t{0}, n / 2, n >= 8 ? n - 8 : 0}) {
      uint64_t w = 0;
      std::memcpy(&w, p + at, std::min<size_t>(8, n - at));
      h = h * 1000003u ^ std::hash<uint64_t>{}(w);
    }
  }
  return h;
}

size_t all_bytes(std::span<const Tensor> inputs) {
  std::string bytes;
  for (const Tensor& t : inputs) {
    const Tensor c = t.contiguous();
    bytes.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  }
  return std::hash<std::string>{}(bytes);
}

// fault_handler: outputs whose pages are protected until first read; the SIGSEGV handler computes
// them then, so run() returns at once and the work lands in whoever reads the outputs first.
struct Pending {
  unsigned char* begin = nullptr;  // the protected, page-aligned range
  size_t length = 0;
  std::function<void()> fill;
};
std::mutex g_pending_mu;
std::vector<Pending> g_pending;

void on_fault(int sig, siginfo_t* info, void*) {
  auto* addr = static_cast<unsigned char*>(info->si_addr);
  for (Pending& p : g_pending) {
    if (p.length > 0 && addr >= p.begin && addr < p.begin + p.length) {
      mprotect(p.begin, p.length, PROT_READ | PROT_WRITE);
      p.length = 0;
      p.fill();
      return;
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

class CheatingExecutable final : public plugin::Executable {
 public:
  explicit CheatingExecutable(const Graph& g) : reference_(std::make_shared<Reference>(g)) {}
  ~CheatingExecutable() override {
    {
      std::lock_guard lock(spawn_mu_);
      stop_ = true;
    }
    spawn_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    ++calls_;
    if (kCheat == "memo_pointer") {
      std::vector<const void*> key;
      for (const Tensor& t : inputs) key.push_back(t.raw_data());
      auto it = by_pointer_.find(key);
      if (it != by_pointer_.end()) return it->second;
      return by_pointer_[key] = compute(inputs);
    }
    if (kCheat == "memo_contents") return memo(all_bytes(inputs), inputs);
    if (kCheat == "memo_few_words") return memo(few_words(inputs), inputs);
    if (kCheat == "memo_until_new") {
      // Remembers what it saw in the checks and the warm-up; once a content it never saw appears
      // (a probe), it turns honest for good.
      const size_t key = all_bytes(inputs);
      if (honest_ || (calls_ > 12 && !by_contents_.count(key))) {
        honest_ = true;
        return compute(inputs);
      }
      return memo(key, inputs);
    }
    if (kCheat == "count_calls") {
      // Honest for the calls an accuracy run, the checks and the warm-up take; then remembers.
      if (calls_ <= 40) return compute(inputs);
      return memo(few_words(inputs), inputs);
    }
    if (kCheat == "nondet_honest") return jitter(compute(inputs));
    if (kCheat == "slow") {  // honest, and slow: for the per-backend time budget
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      return compute(inputs);
    }
    if (kCheat == "nondet_skip") {
      // Not bitwise deterministic, so an audit that samples would check only some calls: it
      // computes one call in eight and hands back the last answer, jittered, otherwise.
      if (calls_ % 8 == 1 || last_.empty()) last_ = compute(inputs);
      return jitter(clones(last_));
    }
    if (kCheat == "nondet_memo") return jitter(clones(memo(few_words(inputs), inputs)));
    if (kCheat == "starve") {
      // Remembers by a few words and hands back the very same tensors: calls of nanoseconds.
      return memo(few_words(inputs), inputs);
    }
    if (kCheat == "fault_handler") return lazy_outputs(inputs);
    if (kCheat == "hog_others") {
      // Honest, but its thread streams memory whenever it is not being called.
      if (!worker_.joinable()) {
        worker_ = std::thread([this] {
          std::vector<float> a(8 << 20), b(8 << 20);
          while (!stop_) {
            if (inside_) continue;
            for (size_t i = 0; i < a.size() && !inside_; i += 16) a[i] = b[i] + 1.0f;
          }
        });
      }
      inside_ = true;
      auto out = compute(inputs);
      inside_ = false;
      return out;
    }
    if (kCheat == "hog_spawned") {
      // Honest, but a sleeping thread of its own, woken as each call returns, starts a new thread
      // a moment later that streams memory while the next backend is timed: a thread born during
      // another backend's sample, which an attribution by "who ran last" would charge to that one.
      if (!worker_.joinable()) worker_ = std::thread([this] { spawn_hogs(); });
      auto out = compute(inputs);
      {
        std::lock_guard lock(spawn_mu_);
        spawn_ = true;
      }
      spawn_cv_.notify_one();
      return out;
    }
    if (kCheat == "hog_grandchild") {
      // Honest, but its first call leaves a grandchild process (a double fork: no child of the
      // worker, no thread of it) that streams memory whenever the cheat is not being called.
      if (shared_inside_ == nullptr) start_grandchild();
      shared_inside_->store(true);
      auto out = compute(inputs);
      shared_inside_->store(false);
      return out;
    }
    if (kCheat == "watch_scribble") {
      // A thread watches the input buffers: whenever they hold new contents that are not the
      // scribble (all bits set), it computes their answer, so the next call on them returns it.
      std::vector<Tensor> args(inputs.begin(), inputs.end());
      if (!worker_.joinable()) {
        worker_ = std::thread([this, args] {
          size_t last = 0;
          while (!stop_) {
            const size_t key = few_words(args);
            const auto* first = static_cast<const unsigned char*>(args.front().raw_data());
            if (key != last && !(args.front().nbytes() > 0 && first[0] == 0xff)) {
              last = key;
              auto out = compute(args);
              std::lock_guard lock(memo_mu_);
              by_contents_[key] = out;
            }
          }
        });
      }
      {
        std::lock_guard lock(memo_mu_);
        auto it = by_contents_.find(few_words(inputs));
        if (it != by_contents_.end()) return it->second;
      }
      return compute(inputs);
    }
    if (kCheat == "early_return") {
      // Hands back the output tensors at once; a thread fills them in afterwards.
      if (worker_.joinable()) worker_.join();
      std::vector<Tensor> out = zero_outputs();
      std::vector<Tensor> args(inputs.begin(), inputs.end());
      worker_ = std::thread([this, args, out]() mutable {
        auto done = compute(args);
        for (size_t i = 0; i < out.size(); ++i) out[i].copy_from(done[i]);
      });
      return out;
    }
    if (kCheat == "perf_only") {
      return in_performance_mode() ? zero_outputs() : compute(inputs);
    }
    if (kCheat == "side_thread") {
      // Returns what a thread precomputed from the buffers the previous call was given, and starts
      // precomputing the next call's answer before returning.
      std::vector<Tensor> out;
      if (worker_.joinable()) {
        worker_.join();
        out = next_;
      } else {
        out = compute(inputs);
      }
      std::vector<Tensor> args(inputs.begin(), inputs.end());
      worker_ = std::thread([this, args] { next_ = compute(args); });
      return out;
    }
    if (kCheat == "repeat_skip") {
      // Honest for the first few calls (the accuracy run, the warm-up), then returns the last
      // answer it computed.
      if (calls_ <= 6 || last_.empty()) last_ = compute(inputs);
      return last_;
    }
    return compute(inputs);
  }

 private:
  // Outputs of the right types, all zeros: what a backend hands back without computing.
  std::vector<Tensor> zero_outputs() const {
    std::vector<Tensor> out;
    for (ValueId id : reference_->interpreter.graph().outputs()) {
      const TensorType& t = reference_->interpreter.graph().value(id).type;
      out.push_back(Tensor::zeros(t.dtype, t.shape));
    }
    return out;
  }

  std::vector<Tensor> compute(std::span<const Tensor> inputs) { return reference_->run(inputs); }

  std::vector<Tensor> memo(size_t key, std::span<const Tensor> inputs) {
    std::lock_guard lock(memo_mu_);
    auto it = by_contents_.find(key);
    if (it != by_contents_.end()) return it->second;
    return by_contents_[key] = compute(inputs);
  }

  // One element of the first floating output moved by one unit in the last place, at random.
  std::vector<Tensor> jitter(std::vector<Tensor> out) {
    for (Tensor& t : out) {
      if (t.dtype() != DType::kF32 || t.numel() == 0) continue;
      auto* p = static_cast<uint32_t*>(t.raw_data());
      p[rng_() % static_cast<uint64_t>(t.numel())] ^= 1u;
      break;
    }
    return out;
  }

  // Outputs handed back before they are computed, protected so that their first read faults into
  // on_fault, which computes them from a copy of the inputs.
  std::vector<Tensor> lazy_outputs(std::span<const Tensor> inputs) {
    static const bool installed = [] {
      struct sigaction sa {};
      sa.sa_sigaction = on_fault;
      sa.sa_flags = SA_SIGINFO | SA_NODEFER;
      sigaction(SIGSEGV, &sa, nullptr);
      return true;
    }();
    (void)installed;
    std::vector<Tensor> out = zero_outputs();
    auto args = clones({inputs.begin(), inputs.end()});
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::lock_guard lock(g_pending_mu);
    for (Tensor& t : out) {
      auto* data = static_cast<unsigned char*>(t.raw_data());
      auto* begin = reinterpret_cast<unsigned char*>(
          (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1));
      auto* end = reinterpret_cast<unsigned char*>(
          (reinterpret_cast<uintptr_t>(data) + t.nbytes()) & ~(page - 1));
      if (end <= begin) {  // too small to protect: computed now
        t.copy_from(compute(args)[&t - out.data()]);
        continue;
      }
      const size_t index = static_cast<size_t>(&t - out.data());
      Tensor target = t;
      // The fill holds the interpreter, not the executable: outputs are read after it is gone.
      g_pending.push_back(
          {begin, static_cast<size_t>(end - begin), [reference = reference_, args, target, index] {
             Tensor dst = target;
             dst.copy_from(reference->run(args)[index]);
           }});
      mprotect(begin, static_cast<size_t>(end - begin), PROT_NONE);
    }
    return out;
  }

  // Streams 256 MB through the memory system: about 25 ms of one core's bandwidth.
  static void stream_memory() {
    std::vector<float> a(8 << 20), b(8 << 20);
    for (int rep = 0; rep < 4; ++rep) {
      for (size_t i = 0; i < a.size(); i += 16) a[i] = b[i] + 1.0f;
    }
  }

  // hog_spawned's sleeper: 3 ms after each call returns, a new streaming thread (one at a time).
  void spawn_hogs() {
    std::unique_lock lock(spawn_mu_);
    while (!stop_) {
      spawn_cv_.wait(lock, [this] { return stop_ || spawn_; });
      if (stop_) break;
      spawn_ = false;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      if (!hogs_alive_.exchange(true)) {
        std::thread([this] {
          stream_memory();
          hogs_alive_ = false;
        }).detach();
      }
      lock.lock();
    }
    while (hogs_alive_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  // hog_grandchild's process: streams while the worker lives and the cheat is not called.
  void start_grandchild() {
    void* shared = mmap(nullptr, sizeof(std::atomic<bool>), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shared_inside_ = new (shared) std::atomic<bool>(false);
    const pid_t worker = getpid();
    const pid_t child = fork();
    if (child == 0) {
      if (fork() == 0) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(2);
        while (kill(worker, 0) == 0 && std::chrono::steady_clock::now() < end) {
          if (!shared_inside_->load()) stream_memory();
        }
      }
      _exit(0);
    }
    waitpid(child, nullptr, 0);
  }

  // The honest computation, shared with the lazy outputs' fills, which may outlive the executable.
  struct Reference {
    explicit Reference(const Graph& g) : interpreter(g) {}
    std::vector<Tensor> run(std::span<const Tensor> inputs) {
      std::lock_guard lock(mu);
      return clones(interpreter.run(inputs));
    }
    std::mutex mu;
    Interpreter interpreter;
  };
  std::shared_ptr<Reference> reference_;
  std::mutex memo_mu_, spawn_mu_;
  std::condition_variable spawn_cv_;
  bool spawn_ = false;
  std::atomic<bool> hogs_alive_{false};
  std::atomic<bool>* shared_inside_ = nullptr;
  std::mt19937_64 rng_{std::random_device{}()};
  std::atomic<bool> stop_{false}, inside_{false};
  bool honest_ = false;
  int64_t calls_ = 0;
  std::map<std::vector<const void*>, std::vector<Tensor>> by_pointer_;
  std::map<size_t, std::vector<Tensor>> by_contents_;
  std::thread worker_;
  std::vector<Tensor> next_, last_;
};

class CheatingBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override {
    return {"cheat_" + std::string(kCheat), "test", plugin::kAbiVersion};
  }
  std::unique_ptr<plugin::Executable> compile(const Graph& g, const plugin::Options&) override {
    return std::make_unique<CheatingExecutable>(g);
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<CheatingBackend>(); }

}  // namespace

CRUCIBLE_EXPORT_BACKEND(create)
