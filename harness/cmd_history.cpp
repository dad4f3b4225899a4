// The read-only history commands: `crucible runs`, `results`, `history`, `kernels` and `query`.
// Each opens the store read-only (never creating or migrating it) and prints a table, CSV or JSON.
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "crucible/reports/store.h"

namespace crucible::cli {

namespace {

struct ReadOptions {
  std::string db = "crucible.db";
  std::string format = "table";
  bool wide = false;
};

void add_read_options(po::options_description& opts, ReadOptions& r) {
  opts.add_options()("db", po::value(&r.db)->default_value("crucible.db"),
                     "the SQLite store to read (never created or changed)")(
      "format", po::value(&r.format)->default_value("table"), "table | csv | json")(
      "wide", po::bool_switch(&r.wide),
      "the table with every column, nothing cut (default: the main columns, 120 wide; csv and "
      "json always have all)");
}

int print(const reports::Table& t, const ReadOptions& r) {
  reports::write_table(std::cout, t, reports::parse_table_format(r.format), r.wide);
  return kExitOk;
}

}  // namespace

int runs_command(const std::vector<std::string>& args) {
  po::options_description opts("runs options");
  ReadOptions r;
  int limit = 20;
  add_read_options(opts, r);
  opts.add_options()("limit", po::value(&limit)->default_value(20), "newest runs to list");
  po::variables_map vm;
  if (!parse("runs", "[--limit N] [--db F] [--format table|csv|json]", opts, {}, args, vm))
    return kExitOk;
  if (limit < 1) throw po::error("--limit must be at least 1");
  reports::parse_table_format(r.format);  // a bad --format before the store is opened
  return print(reports::Store::open_readonly(r.db)->runs_table(limit), r);
}

int results_command(const std::vector<std::string>& args) {
  po::options_description opts("results options");
  ReadOptions r;
  int64_t run = 0;
  bool failed = false;
  add_read_options(opts, r);
  opts.add_options()("run", po::value(&run)->required(), "the run id (from crucible runs)")(
      "failed", po::bool_switch(&failed), "only the results that did not pass");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse("results", "RUN [--failed] [--wide] [--db F] [--format table|csv|json]", opts, pos,
             args, vm)) {
    return kExitOk;
  }
  reports::parse_table_format(r.format);
  return print(reports::Store::open_readonly(r.db)->results_table(run, failed), r);
}

int history_command(const std::vector<std::string>& args) {
  po::options_description opts("history options");
  ReadOptions r;
  reports::HistoryQuery q;
  std::string since;
  add_read_options(opts, r);
  opts.add_options()("model", po::value(&q.model)->required(), "the model")(
      "backend", po::value(&q.backend)->required(), "the backend")(
      "metric", po::value(&q.metric)->default_value("speedup"),
      "speedup | latency | compile | memory | accuracy")(
      "suite", po::value(&q.suite), "only this suite (a model name may be in several)")(
      "since", po::value(&since), "only runs since: 30d, 12h, 2w, or a UTC date 2026-10-01");
  po::variables_map vm;
  if (!parse("history",
             "--model M --backend B [--metric speedup|latency|compile|memory|accuracy]"
             " [--since 30d] [--db F] [--format table|csv|json]",
             opts, {}, args, vm)) {
    return kExitOk;
  }
  reports::parse_table_format(r.format);
  if (!since.empty()) q.since = reports::since_utc(since);
  return print(reports::Store::open_readonly(r.db)->history(q), r);
}

int kernels_command(const std::vector<std::string>& args) {
  po::options_description opts("kernels options");
  ReadOptions r;
  int64_t result = 0;
  std::string model, backend;
  add_read_options(opts, r);
  opts.add_options()("result", po::value(&result), "a result id (from history or query)")(
      "model", po::value(&model), "or the newest profiled result of this model")(
      "backend", po::value(&backend), "... on this backend");
  po::positional_options_description pos;
  pos.add("result", 1);
  po::variables_map vm;
  if (!parse("kernels", "(RESULT | --model M --backend B) [--db F] [--format table|csv|json]", opts,
             pos, args, vm)) {
    return kExitOk;
  }
  reports::parse_table_format(r.format);
  if (vm.count("result") == (model.empty() && backend.empty() ? 0u : 1u)) {
    throw po::error("give a result id or --model and --backend, not both");
  }
  if (!vm.count("result") && (model.empty() || backend.empty())) {
    throw po::error("--model and --backend go together");
  }
  auto store = reports::Store::open_readonly(r.db);
  if (!vm.count("result")) {
    const auto id = store->latest_profiled_result(model, backend);
    if (!id) {
      throw reports::StoreError(fmt::format(
          "{}: no result of model '{}' on '{}' has kernel timings", r.db, model, backend));
    }
    result = *id;
  }
  return print(store->kernels_table(result), r);
}

int regressions_command(const std::vector<std::string>& args) {
  po::options_description opts("regressions options");
  ReadOptions r;
  reports::RegressionQuery q;
  add_read_options(opts, r);
  opts.add_options()("run", po::value(&q.run),
                     "alerts confirmed by this run (default: the newest)")(
      "all", po::bool_switch(&q.all), "every alert of the whole history")(
      "suite", po::value(&q.suite), "only this suite")(
      "model", po::value(&q.model), "only this model")("backend", po::value(&q.backend),
                                                       "only this backend")(
      "reference", po::value(&q.reference)->default_value("eager"),
      "the backend each other one is judged against, by its time over the reference's in the "
      "same run (a machine-wide shift cancels); \"\" judges times alone");
  po::variables_map vm;
  if (!parse("regressions",
             "[--run ID | --all] [--suite S] [--model M] [--backend B] [--reference B] [--db F]"
             " [--format table|csv|json]",
             opts, {}, args, vm)) {
    return kExitOk;
  }
  reports::parse_table_format(r.format);
  if (q.all && vm.count("run")) throw po::error("--run and --all exclude each other");
  auto store = reports::Store::open_readonly(r.db);
  if (!vm["reference"].defaulted() && !q.reference.empty()) {
    // A reference named by hand that never ran would quietly judge every time alone.
    std::string known;
    bool found = false;
    for (const auto& row : store->query("SELECT DISTINCT backend FROM results ORDER BY 1").rows) {
      const std::string b = reports::cell_text(row[0], false);
      found |= b == q.reference;
      known += (known.empty() ? "" : ", ") + b;
    }
    if (!found) {
      throw po::error(fmt::format("--reference {}: no result of that backend in {} (backends: {})",
                                  q.reference, r.db, known.empty() ? "none" : known));
    }
  }
  const reports::Table t = store->regressions(q);
  print(t, r);
  // For a nightly job: exit 1 when a regression or a status change (pass -> fail) is listed;
  // not_judged rows (a series whose timing the detector could not judge at that run) do not count.
  for (const auto& row : t.rows) {
    const std::string kind = reports::cell_text(row[0], false);
    if (kind == "regression" || kind == "status") return kExitFailed;
  }
  return kExitOk;
}

int compare_command(const std::vector<std::string>& args) {
  po::options_description opts("compare options");
  ReadOptions r;
  std::vector<int64_t> runs;
  add_read_options(opts, r);
  opts.add_options()("runs", po::value(&runs)->multitoken(), "RUN_A RUN_B");
  po::positional_options_description pos;
  pos.add("runs", 2);
  po::variables_map vm;
  if (!parse("compare", "RUN_A RUN_B [--db F] [--format table|csv|json]", opts, pos, args, vm))
    return kExitOk;
  if (runs.size() != 2) throw po::error("compare takes two run ids");
  reports::parse_table_format(r.format);
  return print(reports::Store::open_readonly(r.db)->compare(runs[0], runs[1]), r);
}

int query_command(const std::vector<std::string>& args) {
  po::options_description opts("query options");
  ReadOptions r;
  std::string sql;
  add_read_options(opts, r);
  opts.add_options()("sql", po::value(&sql)->required(), "one SQL statement that only reads");
  po::positional_options_description pos;
  pos.add("sql", 1);
  po::variables_map vm;
  if (!parse("query", "'SELECT ...' [--db F] [--format table|csv|json]", opts, pos, args, vm))
    return kExitOk;
  reports::parse_table_format(r.format);
  return print(reports::Store::open_readonly(r.db)->query(sql), r);
}

}  // namespace crucible::cli
