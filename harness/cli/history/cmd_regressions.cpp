// `crucible regressions`: the change detector's verdicts on the store's history (exit 1
// on a regression or a status change, for a nightly job).
#include <fmt/format.h>

#include "cli.h"
#include "crucible/reports/store.h"
#include "read_options.h"

namespace crucible::cli {

int regressions_command(const std::vector<std::string>& args) {
  po::options_description opts("regressions options");
  ReadOptions r;
  reports::RegressionQuery q;
  add_read_options(opts, r);
  opts.add_options()("run", po::value(&q.run),
                     "alerts confirmed by this run (default: the newest)")(
      "all", po::bool_switch(&q.all),
      "every alert of the whole history, and each judged series' detection floor (the "
      "smallest step it can show)")("suite", po::value(&q.suite), "only this suite")(
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

}  // namespace crucible::cli
