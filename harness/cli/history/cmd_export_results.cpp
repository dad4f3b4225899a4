// `crucible export-results RUN --format csv|gbench-json|junit|chrome-trace`: one stored run for
// other tools. A file is written under a temporary name and renamed, so a failure leaves none.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "crucible/ir/text_format.h"
#include "crucible/reports/csv_export.h"
#include "crucible/reports/exports.h"
#include "crucible/reports/status.h"
#include "crucible/reports/store.h"

namespace crucible::cli {

namespace {

// The stored rows as the records the dynamo CSV writer takes.
std::vector<reports::ResultRecord> as_records(reports::Store& store, int64_t run_id) {
  std::vector<reports::ResultRecord> out;
  for (const reports::ResultRow& row : store.results(run_id)) {
    reports::ResultRecord r =
        reports::make_result(row.suite, row.model, row.backend, row.mode, row.batch_size);
    r.status = row.status;
    r.samples_ms = row.samples_ms;
    r.speedup = row.speedup;
    r.compile_s = row.compile_s;
    r.peak_rss_mb = row.peak_rss_mb;
    r.memory_ratio = row.memory_ratio;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

int export_results_command(const std::vector<std::string>& args) {
  po::options_description opts("export-results options");
  int64_t run = 0, result = 0;
  std::string format, out, db;
  opts.add_options()("run", po::value(&run)->required(), "the run id (crucible runs)")(
      "format", po::value(&format)->required(), "csv | gbench-json | junit | chrome-trace")(
      "output,o", po::value(&out),
      "file to write (default: standard output); for csv, the directory (default export_RUN)")(
      "result", po::value(&result), "chrome-trace: only this result's kernels")(
      "db", po::value(&db)->default_value("crucible.db"), "the SQLite store to read");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse("export-results",
             "RUN --format csv|gbench-json|junit|chrome-trace [-o PATH] [--result ID] [--db F]",
             opts, pos, args, vm)) {
    return kExitOk;
  }
  if (format != "csv" && format != "gbench-json" && format != "junit" && format != "chrome-trace")
    throw po::error(
        fmt::format("--format must be csv, gbench-json, junit or chrome-trace, got '{}'", format));
  if (vm.count("result") && format != "chrome-trace")
    throw po::error("--result goes with --format chrome-trace");
  auto store = reports::Store::open_readonly(db);
  if (format == "csv") {
    store->run(run);  // an unknown run before any directory is made
    const std::filesystem::path dir = out.empty() ? fmt::format("export_{}", run) : out;
    std::filesystem::create_directories(dir);
    for (const auto& f : reports::write_dynamo_csvs(dir, as_records(*store, run))) {
      std::cout << "wrote " << f.string() << "\n";
    }
    return kExitOk;
  }
  std::ostringstream text;  // whole before anything is written
  if (format == "gbench-json") {
    reports::write_gbench_json(*store, run, text);
  } else if (format == "junit") {
    reports::write_junit(*store, run, text);
  } else {
    reports::write_chrome_trace(*store, run, result, text);
  }
  if (out.empty()) {
    std::cout << text.str();
  } else {
    const std::string bytes = text.str();
    write_atomically(out, bytes.data(), bytes.size());
  }
  return kExitOk;
}

}  // namespace crucible::cli
