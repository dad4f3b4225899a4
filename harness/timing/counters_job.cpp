// The counters job (`crucible run --counters cachegrind`): started under Valgrind's callgrind
// tool with instrumentation and collection off, it runs one backend's graph call alone on one
// thread and has the cache simulator count inside each call only, reading each call's counts
// back from the dump it asks for. Valgrind 3.19 has no start/stop requests for cachegrind
// itself; callgrind's --cache-sim runs the same simulator and has them.
#include <fmt/format.h>
#include <valgrind/callgrind.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "worker.h"
#include "worker_session.h"

namespace crucible {

namespace {

using reports::Status;

// Calls counted per backend: instruction counts of one call repeat exactly, so a few suffice;
// the first's cache misses are cold, the others warm.
constexpr int kCountedCalls = 3;

struct CallCounts {
  double instructions = 0, d1_misses = 0, ll_misses = 0;
};

// The `summary:` line of a callgrind dump with cache simulation (events Ir Dr Dw I1mr D1mr D1mw
// ILmr DLmr DLmw; trailing zeros may be left out).
CallCounts read_dump(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: callgrind wrote no dump", path));
  std::vector<std::string> events;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "events:") {
      for (std::string e; words >> e;) events.push_back(e);
    } else if (key == "summary:") {
      std::map<std::string, double> v;
      double x = 0;
      for (size_t i = 0; words >> x; ++i) {
        if (i < events.size()) v[events[i]] = x;
      }
      if (!v.contains("Ir")) throw Error(fmt::format("{}: no instruction count", path));
      return {v["Ir"], v["D1mr"] + v["D1mw"], v["ILmr"] + v["DLmr"] + v["DLmw"]};
    }
  }
  throw Error(fmt::format("{}: no summary line", path));
}

// Each function's inclusive instructions in a callgrind dump: its own cost lines plus the cost
// line after each of its `calls=` lines (a call's inclusive cost). Names are compressed as
// "(id) name" the first time and "(id)" after, shared by fn= and cfn=.
std::map<std::string, double> inclusive_instructions(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, std::string> names;
  std::map<std::string, double> out;
  auto resolve = [&](std::string s) {
    if (s.empty() || s[0] != '(') return s;
    const size_t close = s.find(')');
    const std::string id = s.substr(0, close + 1);
    if (close + 1 < s.size()) names[id] = s.substr(s.find_first_not_of(' ', close + 1));
    return names[id];
  };
  std::string fn;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("fn=", 0) == 0) {
      fn = resolve(line.substr(3));
    } else if (line.rfind("cfn=", 0) == 0) {
      resolve(line.substr(4));
    } else if (!line.empty() && (std::isdigit(static_cast<unsigned char>(line[0])) ||
                                 line[0] == '+' || line[0] == '-' || line[0] == '*')) {
      std::istringstream words(line);
      std::string position;
      double ir = 0;
      if (words >> position >> ir) out[fn] += ir;
    }
  }
  return out;
}

}  // namespace

void counters_job(Session& s) {
  const std::string backend = s.job.backends.at(0);
  reports::ResultRecord r = s.record(backend, "performance");
  const char* out = std::getenv("CRUCIBLE_CALLGRIND_OUT");
  if (!RUNNING_ON_VALGRIND || out == nullptr) {
    r.status = Status::kFailToRun;
    r.error =
        "the counters job runs under valgrind --tool=callgrind, started by crucible run "
        "--counters cachegrind";
    return s.report.result(r);
  }
  std::unique_ptr<LoadedBackend> be;
  s.report.phase("load", backend);
  if (!attempt(r, Status::kFailToLoad, [&] { be = s.load(backend); })) return s.report.result(r);
  std::unique_ptr<plugin::Executable> exe;
  s.report.phase("compile", backend);
  if (!attempt(r, Status::kFailToCompile, [&] { exe = s.compile(*be, backend, false); })) {
    return s.report.result(r);
  }
  s.report.phase("count", backend);
  if (!attempt(r, Status::kFailToRun, [&] {
        // Lazy binding, first-touch pages and one-time setup happen before the counting.
        for (int i = 0; i < 2; ++i) exe->run(s.inputs);
        CALLGRIND_START_INSTRUMENTATION;
        for (int k = 1; k <= kCountedCalls; ++k) {
          CALLGRIND_ZERO_STATS;
          CALLGRIND_TOGGLE_COLLECT;
          std::vector<Tensor> outputs = exe->run(s.inputs);
          CALLGRIND_TOGGLE_COLLECT;
          CALLGRIND_DUMP_STATS_AT("crucible call");
          outputs.clear();
          const CallCounts c = read_dump(fmt::format("{}.{}", out, k));
          r.sim_instructions.push_back(c.instructions);
          r.sim_d1_misses.push_back(c.d1_misses);
          r.sim_ll_misses.push_back(c.ll_misses);
        }
        CALLGRIND_STOP_INSTRUMENTATION;
        // Per kernel, from the last (warm) call: the functions that hold at least 0.5% of it;
        // the runner keeps those named like the profile's kernels (codegen's are extern "C").
        const double total = r.sim_instructions.back();
        for (const auto& [name, ir] :
             inclusive_instructions(fmt::format("{}.{}", out, kCountedCalls))) {
          if (ir >= 0.005 * total && !name.empty()) r.kernels.push_back({name, 0, 0, ir});
        }
      })) {
    return s.report.result(r);
  }
  r.status = Status::kPass;
  s.report.result(r);
}

}  // namespace crucible
