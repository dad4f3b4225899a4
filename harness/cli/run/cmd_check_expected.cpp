// `crucible check-expected RUN`: the expected-accuracy gate. Each suite keeps, per backend, the
// status every model is expected to reach (suites/<suite>/expected/<backend>.csv: name,accuracy);
// a run's accuracy results are judged against it (the rules: reports/expected_accuracy.h), a
// model whose status flips back and forth in the store's history is FLAKY, found from the data
// rather than a hand list. --update writes the CSVs.
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <optional>

#include "cli.h"
#include "crucible/core/error.h"
#include "crucible/reports/expected_accuracy.h"
#include "crucible/reports/store.h"
#include "crucible/reports/table.h"
#include "suite.h"

namespace crucible::cli {

namespace fs = std::filesystem;

int check_expected_command(const std::vector<std::string>& args) {
  po::options_description opts("check-expected options");
  int64_t run = 0;
  std::string db, expected_dir, format;
  std::vector<std::string> suite_paths;
  int window = 30, flaky_flips = 2;
  bool update = false;
  opts.add_options()("run", po::value(&run)->required(), "the run id (crucible runs)")(
      "db", po::value(&db)->default_value("crucible.db"), "the SQLite store")(
      "expected-dir", po::value(&expected_dir),
      "where <suite>/<backend>.csv are (default: each suite's own expected/ directory)")(
      "suite-path", po::value(&suite_paths)->composing(), "extra suite directories")(
      "flaky-window", po::value(&window)->default_value(30), "runs of history looked at")(
      "flaky-flips", po::value(&flaky_flips)->default_value(2),
      "pass <-> fail flips in that window that make a model flaky")(
      "update", po::bool_switch(&update), "write the run's statuses as the new expectations")(
      "format", po::value(&format)->default_value("table"), "table | csv | json");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse("check-expected", "RUN [--expected-dir D] [--update] [--db F]", opts, pos, args, vm))
    return kExitOk;
  const reports::TableFormat fmt_out = reports::parse_table_format(format);
  if (window < 2 || flaky_flips < 1) throw po::error("--flaky-window >= 2, --flaky-flips >= 1");
  auto store = reports::Store::open_readonly(db);
  store->run(run);
  const auto dirs = suite_search_path(suite_paths);
  auto csv_of = [&](const std::string& suite, const std::string& backend) {
    const fs::path base = expected_dir.empty()
                              ? find_suite(suite, dirs).manifest.parent_path() / "expected"
                              : fs::path(expected_dir) / suite;
    return base / (backend + ".csv");
  };

  std::map<fs::path, std::map<std::string, reports::Status>> expected, updated;
  reports::Table t;
  t.columns = {"suite", "model", "backend", "expected", "got", "verdict", "flips"};
  int bad = 0;
  for (const reports::ResultRow& r : store->results(run)) {
    if (r.mode != "accuracy") continue;
    const fs::path csv = csv_of(r.suite, r.backend);
    if (!expected.contains(csv)) expected[csv] = reports::read_expected_csv(csv);
    updated[csv][r.model] = r.status;
    const auto& want = expected[csv];
    const auto it = want.find(r.model);
    const std::optional<reports::Status> wanted =
        it == want.end() ? std::nullopt : std::optional(it->second);
    const int n = reports::status_flips(
        store->status_history(r.suite, r.model, r.backend, "accuracy", run, window));
    const reports::ExpectedVerdict verdict =
        reports::judge_expected(r.status, wanted, n, flaky_flips);
    bad += reports::fails_gate(verdict) ? 1 : 0;
    t.rows.push_back(
        {r.suite, r.model, r.backend,
         wanted ? reports::Cell{std::string(reports::status_name(*wanted))} : reports::Cell{},
         std::string(reports::status_name(r.status)), std::string(reports::verdict_name(verdict)),
         static_cast<int64_t>(n)});
  }
  if (t.rows.empty()) {
    throw Error(fmt::format("run {} has no accuracy results to check", run));
  }
  if (update) {
    for (const auto& [csv, statuses] : updated) {
      auto merged = expected[csv];
      for (const auto& [model, status] : statuses) merged[model] = status;
      reports::write_expected_csv(csv, merged);
      std::cerr << "wrote " << csv.string() << "\n";
    }
    return kExitOk;
  }
  reports::write_table(std::cout, t, fmt_out);
  return bad > 0 ? kExitFailed : kExitOk;
}

}  // namespace crucible::cli
