// A query's answer as a table of typed cells, and its three renderings: an aligned console table,
// CSV (RFC 4180 quoting) and JSON (an array of objects, numbers as numbers, NULL as null).
#pragma once

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace crucible::reports {

using Cell = std::variant<std::monostate, int64_t, double, std::string>;  // monostate: NULL

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;  // each as long as `columns`
  // The columns the console table shows unless asked for all (every one when empty), and those
  // it shows on a line of their own under each row ("  note: ..."), when not empty.
  std::vector<std::string> brief, under;
  // What the console says instead of a bare header when there are no rows ("" for the header).
  std::string empty_note;

  // The position of column `name` (columns.size() when there is none): read by name, so a new
  // column cannot shift what a reader takes.
  size_t column(std::string_view name) const {
    return static_cast<size_t>(std::find(columns.begin(), columns.end(), name) - columns.begin());
  }
};

enum class TableFormat { kTable, kCsv, kJson };

// "table", "csv" or "json"; throws Error naming the bad one.
TableFormat parse_table_format(const std::string& name);

// The console table fits kConsoleWidth columns unless `wide`: only `brief` columns, `under` ones
// below each row, and the widest text columns narrowed until it fits, their text wrapped (never
// cut) onto the row's next lines. CSV and JSON always carry everything.
constexpr size_t kConsoleWidth = 120;
void write_table(std::ostream& out, const Table& t, TableFormat format, bool wide = false);

// One CSV field, quoted when it holds a comma, quote or line break.
std::string csv_field(const std::string& s);

// A cell as text: "" for NULL, doubles to 4 significant digits in the console table and
// shortest round-trip elsewhere.
std::string cell_text(const Cell& c, bool console);

// A cell as a JSON value: null, a number (null for NaN and infinities) or a quoted string.
std::string cell_json(const Cell& c);

}  // namespace crucible::reports
