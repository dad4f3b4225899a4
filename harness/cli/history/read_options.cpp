// The read-only store commands' shared options (see read_options.h).
#include "read_options.h"

#include <iostream>

namespace crucible::cli {

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

}  // namespace crucible::cli
