// `crucible history`: one model's metric on one backend over the store's runs.
#include "cli.h"
#include "crucible/reports/store.h"
#include "read_options.h"

namespace crucible::cli {

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

}  // namespace crucible::cli
