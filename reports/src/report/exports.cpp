// Exports of a stored run (see exports.h).
#include "crucible/reports/exports.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "crucible/reports/html_report.h"
#include "crucible/reports/json.h"
#include "crucible/reports/status.h"

namespace crucible::reports {

namespace {

// XML text: the entities HTML uses (&#39; is valid XML too), and control bytes other than tab and
// newlines written out, since XML 1.0 has no place for them even escaped.
std::string xml_escape(const std::string& s) {
  std::string clean;
  for (unsigned char c : s) {
    if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') {
      clean += fmt::format("\\x{:02x}", c);
    } else {
      clean += static_cast<char>(c);
    }
  }
  return html_escape(clean);
}

}  // namespace

namespace {

// Google Benchmark's unit for a benchmark whose calls take `ms`: compare.py prints times with no
// decimals, so a sub-millisecond graph in ms would read 0.
struct TimeUnit {
  const char* name;
  double per_ms;
};
TimeUnit unit_for(double ms) { return ms < 1 ? TimeUnit{"ns", 1e6} : TimeUnit{"us", 1e3}; }

}  // namespace

void write_gbench_json(Store& store, int64_t run_id, std::ostream& out) {
  const RunRow run = store.run(run_id);
  const int threads = run.threads > 0 ? run.threads : std::max(run.cores, 1);
  out << "{\n  \"context\": {\n";
  out << fmt::format(
      "    \"date\": {},\n    \"host_name\": {},\n    \"num_cpus\": {},\n"
      "    \"library_build_type\": \"release\",\n    \"crucible_run\": {},\n"
      "    \"crucible_git_commit\": {}\n  }},\n  \"benchmarks\": [",
      json_string(run.started_at), json_string(run.hostname), run.cores, run.id,
      json_string(run.git_commit));
  bool first = true;
  int family = 0;
  for (const ResultRow& r : store.results(run_id)) {
    if (r.mode != "performance" || r.samples_ms.empty()) continue;
    const std::string run_name = fmt::format("{}/{}/{}", r.suite, r.model, r.backend);
    const TimeUnit unit = unit_for(r.stats.median);
    // cpu_time from the worker's CPU clock (every thread's); results stored before it was
    // measured carry their wall time there, as a single-threaded benchmark would.
    const bool have_cpu = r.cpu_ms.size() == r.samples_ms.size();
    const std::vector<double>& cpu = have_cpu ? r.cpu_ms : r.samples_ms;
    // One benchmark row; `extra` holds the fields of its kind, `real`/`cpu` are in `unit`.
    auto row = [&](const std::string& name, const std::string& kind, const std::string& extra,
                   size_t iterations, double real, double cpu) {
      out << (first ? "\n" : ",\n");
      first = false;
      out << fmt::format(
          "    {{\"name\": {}, \"family_index\": {}, \"per_family_instance_index\": 0, "
          "\"run_name\": {}, \"run_type\": \"{}\", \"repetitions\": {}, {}\"threads\": {}, "
          "\"iterations\": {}, \"real_time\": {}, \"cpu_time\": {}, \"time_unit\": \"{}\"}}",
          json_string(name), family, json_string(run_name), kind, r.samples_ms.size(), extra,
          threads, iterations, json_number(real), json_number(cpu), unit.name);
    };
    const auto calls = static_cast<size_t>(std::max<int64_t>(r.calls_per_sample, 1));
    for (size_t i = 0; i < r.samples_ms.size(); ++i) {
      row(run_name, "iteration", fmt::format("\"repetition_index\": {}, ", i), calls,
          r.samples_ms[i] * unit.per_ms, cpu[i] * unit.per_ms);
    }
    // The aggregates Google Benchmark writes after repetitions, which compare.py's U test and
    // its per-aggregate lines read.
    const SampleStats real = summarize(r.samples_ms), cpus = summarize(cpu);
    const auto aggregate = [&](const char* what, const char* unit_kind, double real_v, double cpu_v,
                               double scale) {
      row(run_name + "_" + what, "aggregate",
          fmt::format("\"aggregate_name\": \"{}\", \"aggregate_unit\": \"{}\", ", what, unit_kind),
          r.samples_ms.size(), real_v * scale, cpu_v * scale);
    };
    aggregate("mean", "time", real.mean, cpus.mean, unit.per_ms);
    aggregate("median", "time", real.median, cpus.median, unit.per_ms);
    aggregate("stddev", "time", real.stdev, cpus.stdev, unit.per_ms);
    aggregate("cv", "percentage", real.cv, cpus.cv, 1.0);
    ++family;
  }
  out << "\n  ]\n}\n";
}

void write_junit(Store& store, int64_t run_id, std::ostream& out) {
  const RunRow run = store.run(run_id);
  std::map<std::string, std::vector<ResultRow>> suites;
  for (ResultRow& r : store.results(run_id)) suites[r.suite + "." + r.backend].push_back(r);
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  std::string body;
  for (const auto& [name, rows] : suites) {
    int f = 0, e = 0, s = 0;
    double seconds = 0;
    std::string cases;
    for (const ResultRow& r : rows) {
      const double t = r.compile_s.value_or(0) + r.stats.n * (r.stats.n ? r.stats.mean : 0) / 1e3;
      seconds += t;
      cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"",
                           xml_escape(name), xml_escape(r.model + " (" + r.mode + ")"), t);
      const std::string status(status_name(r.status));
      const bool pass = r.status == Status::kPass;
      const bool skip = r.status == Status::kSkipped || r.status == Status::kXfail;
      const bool wrong =
          r.status == Status::kFailAccuracy || r.status == Status::kFailAccuracyInPerf;
      if (pass) {
        cases += "/>\n";
        continue;
      }
      const char* tag = skip ? "skipped" : wrong ? "failure" : "error";
      (skip ? s : wrong ? f : e) += 1;
      cases += fmt::format(">\n      <{} message=\"{}\" type=\"{}\">{}</{}>\n    </testcase>\n",
                           tag, xml_escape(status), xml_escape(status), xml_escape(r.error), tag);
    }
    tests += static_cast<int>(rows.size());
    failures += f;
    errors += e;
    skipped += s;
    body += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
        "time=\"{:.3f}\" timestamp=\"{}\" hostname=\"{}\">\n{}  </testsuite>\n",
        xml_escape(name), rows.size(), f, e, s, seconds, xml_escape(run.started_at),
        xml_escape(run.hostname), cases);
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format(
      "<testsuites name=\"crucible run {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
      "skipped=\"{}\">\n{}</testsuites>\n",
      run.id, tests, failures, errors, skipped, body);
}

void write_chrome_trace(Store& store, int64_t run_id, int64_t result_id, std::ostream& out) {
  store.run(run_id);  // a run that does not exist is said as such
  std::vector<std::pair<ResultRow, std::vector<KernelTiming>>> profiled;
  std::vector<ResultRow> rows = store.results(run_id);
  if (result_id != 0 && std::none_of(rows.begin(), rows.end(),
                                     [&](const ResultRow& r) { return r.id == result_id; })) {
    throw StoreError(
        rows.empty()
            ? fmt::format("run {} has no results, so no result {}", run_id, result_id)
            : fmt::format("run {} has no result {} (its results are {} to {}; crucible results {} "
                          "lists them)",
                          run_id, result_id, rows.front().id, rows.back().id, run_id));
  }
  for (ResultRow& r : rows) {
    if (result_id != 0 && r.id != result_id) continue;
    std::vector<KernelTiming> ks = store.kernels(r.id, true);
    if (!ks.empty()) profiled.push_back({std::move(r), std::move(ks)});
  }
  if (profiled.empty()) {  // before anything is written
    throw StoreError(
        result_id != 0 ? fmt::format("result {} of run {} has no kernel timings", result_id, run_id)
                       : fmt::format("run {} has no result with kernel timings (a performance "
                                     "run records them)",
                                     run_id));
  }
  out << "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [";
  bool first = true;
  auto event = [&](const std::string& e) {
    out << (first ? "\n" : ",\n") << e;
    first = false;
  };
  for (const auto& [r, ks] : profiled) {
    event(fmt::format(
        "{{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": {}, \"args\": {{\"name\": {}}}}}",
        r.id, json_string(fmt::format("{}/{} {} (result {})", r.model, r.backend, r.mode, r.id))));
    int64_t calls = 0;
    for (const KernelTiming& k : ks) calls = std::max(calls, k.calls);
    double t_us = 0;
    for (int64_t c = 0; c < calls; ++c) {
      for (const KernelTiming& k : ks) {
        if (c >= k.calls) continue;  // a kernel that ran fewer times than the graph
        const double dur_us = static_cast<double>(k.total_ns) / 1e3 / static_cast<double>(k.calls);
        event(fmt::format(
            "{{\"name\": {}, \"cat\": \"kernel\", \"ph\": \"X\", \"pid\": {}, \"tid\": 1, "
            "\"ts\": {}, \"dur\": {}, \"args\": {{\"call\": {}, \"mean_of_calls\": {}}}}}",
            json_string(k.name), r.id, json_number(t_us), json_number(dur_us), c, k.calls));
        t_us += dur_us;
      }
    }
  }
  out << "\n]}\n";
}

}  // namespace crucible::reports
