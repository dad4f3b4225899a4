// Test backend: runs graphs op by op like eager, but on demand misbehaves the ways real compiled
// backends do, so the harness's isolation and status mapping can be tested end to end.

// -c fault.<graph
// name>=segv|abort|hang|oom|compile_error|run_error|wrong|nudge[:E]|sleep_ms:N|reserve_mb:N|
//                       gate:DIR|flaky:DIR|hang_without:OP|slower_pct:X|extra_loop:N|fp64
// (fp64: the graph computed in f64 and rounded at the end, off eager where eager loses precision
// but closer to the fp64 reference than eager is, which the accuracy rule passes;
// reserve_mb: N MB of address space allocated and never touched, as stacks and arenas are;
// gate: run() creates DIR/<graph>.started, then waits for DIR/<graph>.go, so a test can act while
// a worker is known to be inside run(), without guessing at timings; flaky: every third run()
// across processes, counted in DIR/<graph>.runs, gives wrong outputs; hang_without: wrong outputs
// from a graph with a node of OP, a hang from one without, as a minifier's candidate may;
// nudge: the first element of each row of output 0 moved by E (0.6e-4 unless given) relative;
// slower_pct: every call busy-waits X% of its own work time longer, the way a code change slows
// a backend, so the change detector can be tested on real runs; extra_loop: every call runs N
// more iterations of an empty loop, a fixed number of instructions, for the instruction counts)
//
// With FAULTY_DECLARES=1 in its environment it declares, as a third party's backend would
// (backend_declaration.h), a load-time "mood" (FAULTY_MOOD, read once at load: calm computes
// right, grumpy wrong, and each says its mood in the version; the liar candidate expects "honest"
// but loads calm) and one pass, `-c shortcut=off`, without which -c fault.<graph>=shortcut
// computes wrong results.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "crucible/ir/op_registry.h"
#include "crucible/ir/transforms.h"
#include "crucible/ops/interpreter.h"
#include "crucible/plugin_api.h"

namespace {

using namespace crucible;

// FAULTY_MOOD when the plugin loaded, as a library that reads its setting once does.
const std::string kMood = [] {
  const char* m = std::getenv("FAULTY_MOOD");
  return std::string(m != nullptr ? m : "");
}();

// Blocks until `dir`/<name>.go exists, after announcing itself with <name>.started.
void pass_gate(const std::filesystem::path& dir, const std::string& name) {
  std::ofstream(dir / (name + ".started")) << ::getpid() << "\n";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!std::filesystem::exists(dir / (name + ".go"))) {
    if (std::chrono::steady_clock::now() > give_up) throw Error("faulty: gate never opened");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

class FaultyExecutable final : public plugin::Executable {
 public:
  FaultyExecutable(const Graph& g, std::string fault) : interpreter_(g), fault_(std::move(fault)) {}

  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    if (fault_ == "segv") {
      ::raise(SIGSEGV);
    } else if (fault_ == "abort") {
      std::abort();
    } else if (fault_ == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    } else if (fault_ == "oom") {
      std::vector<char*> hog;
      for (;;) {
        char* p = new char[64 << 20];
        std::memset(p, 1, 64 << 20);  // touch it: resident, not just reserved
        hog.push_back(p);
      }
    } else if (fault_ == "run_error") {
      throw Error("faulty: kernel launch failed");
    } else if (fault_.rfind("reserve_mb:", 0) == 0) {
      reserved_.reset(new char[static_cast<size_t>(std::stoi(fault_.substr(11))) << 20]);
    } else if (fault_.rfind("sleep_ms:", 0) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(fault_.substr(9))));
    } else if (fault_.rfind("hang_without:", 0) == 0) {
      bool has = false;
      for (const Node& n : interpreter_.graph().nodes()) has |= n.op == fault_.substr(13);
      while (!has) std::this_thread::sleep_for(std::chrono::seconds(1));
    } else if (fault_.rfind("gate:", 0) == 0) {
      pass_gate(fault_.substr(5), interpreter_.graph().name());
    }
    const auto work_start = std::chrono::steady_clock::now();
    std::vector<Tensor> out;
    if (fault_ == "fp64") {
      // More accurate than eager: the graph in f64, rounded to its dtypes at the end.
      Interpreter wide(widen_to_f64(interpreter_.graph()));
      const auto exact =
          wide.run(widen_inputs_to_f64(std::vector<Tensor>(inputs.begin(), inputs.end())));
      for (size_t i = 0; i < exact.size(); ++i) {
        const ValueId id = interpreter_.graph().outputs()[i];
        out.push_back(exact[i].to(interpreter_.graph().value(id).type.dtype));
      }
      return out;
    }
    for (const Tensor& t : interpreter_.run(inputs)) out.push_back(t.clone());
    if (fault_.rfind("extra_loop:", 0) == 0) {
      const long n = std::stol(fault_.substr(11));
      for (long i = 0; i < n; ++i) asm volatile("" ::: "memory");
    }
    if (fault_.rfind("slower_pct:", 0) == 0) {
      // Spin rather than sleep: a sleeping thread would show as idle time, not as work.
      const auto work = std::chrono::steady_clock::now() - work_start;
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 work * (std::stod(fault_.substr(11)) / 100.0));
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    if ((fault_ == "nudge" || fault_.rfind("nudge:", 0) == 0) && !out.empty() &&
        out[0].numel() > 0) {
      // By default inside allclose (tol 1e-4) but far from fp64: the first element of every row
      // moved by 0.6 of the tolerance, the way a sloppy fused reduction errs.
      const double by = fault_ == "nudge" ? 0.6e-4 : std::stod(fault_.substr(6));
      Tensor t = out[0].contiguous().clone();
      const int64_t row = t.dim() > 0 ? t.size(-1) : 1;
      for (int64_t i = 0; i < t.numel(); i += row) {
        const double v = t.get(i);
        Tensor one = t.reshape(std::vector<int64_t>{t.numel()}).slice(0, i, i + 1);
        one.copy_from(Tensor::full(t.dtype(), {1}, v + by * (1 + std::abs(v))));
      }
      out[0] = t;
    }
    bool wrong = fault_ == "wrong" || fault_ == "shortcut" || kMood == "grumpy" ||
                 fault_.rfind("hang_without:", 0) == 0;
    if (fault_.rfind("flaky:", 0) == 0) {
      const std::filesystem::path counter =
          std::filesystem::path(fault_.substr(6)) / (interpreter_.graph().name() + ".runs");
      int runs = 0;
      std::ifstream(counter) >> runs;
      std::ofstream(counter, std::ios::trunc) << ++runs;
      wrong = runs % 3 == 0;
    }
    if (wrong && !out.empty() && out[0].numel() > 0) {
      Tensor shifted =
          run_op("add", std::vector<Tensor>{out[0], Tensor::full(out[0].dtype(), {}, 1.0)});
      out[0] = shifted;
    }
    return out;
  }

 private:
  Interpreter interpreter_;
  std::string fault_;
  std::unique_ptr<char[]> reserved_;
};

class FaultyBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override {
    return {"faulty", kMood.empty() ? "test" : "test; mood " + kMood, plugin::kAbiVersion};
  }
  plugin::Declaration declaration() const override {
    const char* on = std::getenv("FAULTY_DECLARES");
    if (on == nullptr || std::string(on) != "1") return {};
    plugin::Declaration d;
    plugin::LoadEnvChoice mood;
    mood.option = "mood";
    mood.version_fact = "mood ";
    mood.reason_var = "FAULTY_MOOD_REASON";
    mood.probe_graph = "graph mood_probe(%x: f32[8]) {\n  %y = neg(%x)\n  return %y\n}\n";
    mood.candidates = {{"env", {}, ""},
                       {"calm", {{"FAULTY_MOOD", "calm"}}, "calm"},
                       {"grumpy", {{"FAULTY_MOOD", "grumpy"}}, "grumpy"},
                       {"liar", {{"FAULTY_MOOD", "calm"}}, "honest"}};
    d.load_env = mood;
    d.bisection.passes = {{"shortcut", "shortcut", "off", {}, false}};
    return d;
  }
  std::unique_ptr<plugin::Executable> compile(const Graph& g, const plugin::Options& o) override {
    std::string fault = o.get("fault." + g.name());
    if (fault == "shortcut" && o.get("shortcut") == "off") fault.clear();
    if (fault == "compile_error")
      throw plugin::CompileError("faulty: cannot lower op 'neg' for u8");
    return std::make_unique<FaultyExecutable>(g, fault);
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<FaultyBackend>(); }

}  // namespace

CRUCIBLE_EXPORT_BACKEND(create)
