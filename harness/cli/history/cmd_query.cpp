// `crucible query`: one read-only SQL statement on the store.
#include "cli.h"
#include "crucible/reports/store.h"
#include "read_options.h"

namespace crucible::cli {

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
