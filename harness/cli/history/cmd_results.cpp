// `crucible results RUN`: one run's results, each failure's reason under its row.
#include "cli.h"
#include "crucible/reports/store.h"
#include "read_options.h"

namespace crucible::cli {

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

}  // namespace crucible::cli
