// `crucible check-expected RUN`: the expected-accuracy gate. Each suite keeps, per backend, the
// status every model is expected to reach (suites/<suite>/expected/<backend>.csv: name,accuracy);
// a run's accuracy results are judged against it as PyTorch's check_accuracy.py does (PASS,
// XFAIL, FAIL, IMPROVED, NEW), and a model whose status flips back and forth in the store's
// history is FLAKY, found from the data rather than a hand list. --update writes the CSVs.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "cli.h"
#include "crucible/core/error.h"
#include "crucible/reports/store.h"
#include "crucible/reports/table.h"
#include "suite.h"

namespace crucible::cli {

namespace {

namespace fs = std::filesystem;

// name -> expected status; a missing file is an empty map (every model NEW).
std::map<std::string, std::string> read_expected(const fs::path& csv) {
  std::map<std::string, std::string> out;
  std::ifstream in(csv);
  if (!in) return out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (n == 1) {
      if (line.rfind("name,accuracy", 0) != 0) {
        throw Error(fmt::format("{}:1: header must start with name,accuracy, got '{}'",
                                csv.string(), line));
      }
      continue;
    }
    if (line.empty()) continue;
    const size_t c1 = line.find(','), c2 = line.find(',', c1 + 1);
    if (c1 == std::string::npos || c1 == 0) {
      throw Error(fmt::format("{}:{}: want name,accuracy, got '{}'", csv.string(), n, line));
    }
    out[line.substr(0, c1)] = line.substr(c1 + 1, c2 == std::string::npos ? c2 : c2 - c1 - 1);
  }
  return out;
}

// Status flips (pass <-> not pass) in `history`.
int flips(const std::vector<std::string>& history) {
  int n = 0;
  for (size_t i = 1; i < history.size(); ++i) {
    n += (history[i] == "pass") != (history[i - 1] == "pass") ? 1 : 0;
  }
  return n;
}

}  // namespace

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

  std::map<fs::path, std::map<std::string, std::string>> expected, updated;
  reports::Table t;
  t.columns = {"suite", "model", "backend", "expected", "got", "verdict", "flips"};
  int bad = 0;
  for (const reports::ResultRow& r : store->results(run)) {
    if (r.mode != "accuracy") continue;
    const fs::path csv = csv_of(r.suite, r.backend);
    if (!expected.contains(csv)) expected[csv] = read_expected(csv);
    updated[csv][r.model] = r.status;
    const auto& want = expected[csv];
    const auto it = want.find(r.model);
    const int n =
        flips(store->status_history(r.suite, r.model, r.backend, "accuracy", run, window));
    std::string verdict;
    if (n >= flaky_flips) {
      verdict = "FLAKY";
    } else if (it == want.end()) {
      verdict = "NEW";
    } else if (r.status == it->second) {
      verdict = r.status == "pass" ? "PASS" : "XFAIL";
    } else if (r.status == "pass") {
      verdict = "IMPROVED";
    } else {
      verdict = "FAIL";
    }
    bad += verdict == "FAIL" || verdict == "IMPROVED" || verdict == "NEW" ? 1 : 0;
    t.rows.push_back({r.suite, r.model, r.backend,
                      it == want.end() ? reports::Cell{} : reports::Cell{it->second}, r.status,
                      verdict, static_cast<int64_t>(n)});
  }
  if (t.rows.empty()) {
    throw Error(fmt::format("run {} has no accuracy results to check", run));
  }
  if (update) {
    for (const auto& [csv, statuses] : updated) {
      auto merged = expected[csv];
      for (const auto& [model, status] : statuses) merged[model] = status;
      fs::create_directories(csv.parent_path());
      std::ofstream out(csv, std::ios::trunc);
      out << "name,accuracy\n";
      for (const auto& [model, status] : merged) out << model << "," << status << "\n";
      if (!out.flush()) throw Error(fmt::format("{}: cannot write", csv.string()));
      std::cerr << "wrote " << csv.string() << "\n";
    }
    return kExitOk;
  }
  reports::write_table(std::cout, t, fmt_out);
  // FAIL is a regression; IMPROVED and NEW mean the checked-in expectations are out of date.
  return bad > 0 ? kExitFailed : kExitOk;
}

}  // namespace crucible::cli
