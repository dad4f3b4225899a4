// `crucible compare A B`: two runs side by side, with the change, its confidence and what the
// verdict judged (a backend's time over eager's where both runs have eager).
#include "cli.h"
#include "crucible/reports/store.h"
#include "read_options.h"

namespace crucible::cli {

int compare_command(const std::vector<std::string>& args) {
  po::options_description opts("compare options");
  ReadOptions r;
  std::vector<int64_t> runs;
  add_read_options(opts, r);
  opts.add_options()("runs", po::value(&runs)->multitoken(), "RUN_A RUN_B");
  po::positional_options_description pos;
  pos.add("runs", 2);
  po::variables_map vm;
  if (!parse("compare",
             "RUN_A RUN_B [--db F] [--format table|csv|json]\n\n"
             "A backend with eager beside it in both runs is judged on its time over eager's in\n"
             "the same run (judged_on time/eager: a machine that moved moves both and cancels);\n"
             "eager, and a backend of a run without eager, on its time (judged_on time).",
             opts, pos, args, vm))
    return kExitOk;
  if (runs.size() != 2) throw po::error("compare takes two run ids");
  reports::parse_table_format(r.format);
  return print(reports::Store::open_readonly(r.db)->compare(runs[0], runs[1]), r);
}

}  // namespace crucible::cli
