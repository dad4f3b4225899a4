// The options every read-only store command shares (--db, --format, --wide) and how they print:
// each opens the store read-only (never creating or migrating it) and prints a table, CSV or JSON.
#pragma once

#include <string>

#include "cli.h"
#include "crucible/reports/table.h"

namespace crucible::cli {

struct ReadOptions {
  std::string db = "crucible.db";
  std::string format = "table";
  bool wide = false;
};

void add_read_options(po::options_description& opts, ReadOptions& r);

// Writes `t` in the asked format; returns kExitOk.
int print(const reports::Table& t, const ReadOptions& r);

}  // namespace crucible::cli
