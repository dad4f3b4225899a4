// `crucible runs`: the store's newest runs, one line each.
#include "cli.h"
#include "crucible/reports/store.h"
#include "read_options.h"

namespace crucible::cli {

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

}  // namespace crucible::cli
