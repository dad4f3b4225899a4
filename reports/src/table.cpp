// Rendering query tables (see table.h).
#include "crucible/reports/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "crucible/core/error.h"
#include "crucible/core/quote.h"
#include "crucible/reports/json.h"

namespace crucible::reports {

TableFormat parse_table_format(const std::string& name) {
  if (name == "table") return TableFormat::kTable;
  if (name == "csv") return TableFormat::kCsv;
  if (name == "json") return TableFormat::kJson;
  throw Error(fmt::format("--format must be table, csv or json, got '{}'", escape_controls(name)));
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string cell_text(const Cell& c, bool console) {
  if (std::holds_alternative<int64_t>(c)) return std::to_string(std::get<int64_t>(c));
  if (std::holds_alternative<double>(c)) {
    const double v = std::get<double>(c);
    if (!std::isfinite(v)) return fmt::format("{}", v);
    return console ? fmt::format("{:.4g}", v) : fmt::format("{}", v);
  }
  if (std::holds_alternative<std::string>(c)) return std::get<std::string>(c);
  return "";
}

namespace {

bool numeric(const Cell& c) {
  return std::holds_alternative<int64_t>(c) || std::holds_alternative<double>(c);
}

void write_console(std::ostream& out, const Table& t) {
  std::vector<size_t> width(t.columns.size());
  std::vector<bool> right(t.columns.size(), false);
  for (size_t i = 0; i < t.columns.size(); ++i) width[i] = t.columns[i].size();
  std::vector<std::vector<std::string>> text;
  for (const auto& row : t.rows) {
    text.emplace_back();
    for (size_t i = 0; i < row.size(); ++i) {
      // User text (an error, a tag) must not break the table's lines.
      text.back().push_back(escape_controls(cell_text(row[i], true)));
      width[i] = std::max(width[i], text.back().back().size());
      right[i] = right[i] || numeric(row[i]);
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) s += "  ";
      s += right[i] ? fmt::format("{:>{}}", cells[i], width[i])
                    : fmt::format("{:<{}}", cells[i], width[i]);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << "\n";
  };
  line(t.columns);
  for (const auto& cells : text) line(cells);
}

}  // namespace

void write_table(std::ostream& out, const Table& t, TableFormat format) {
  switch (format) {
    case TableFormat::kTable:
      write_console(out, t);
      return;
    case TableFormat::kCsv: {
      for (size_t i = 0; i < t.columns.size(); ++i)
        out << (i ? "," : "") << csv_field(t.columns[i]);
      out << "\n";
      for (const auto& row : t.rows) {
        for (size_t i = 0; i < row.size(); ++i) {
          out << (i ? "," : "") << csv_field(cell_text(row[i], false));
        }
        out << "\n";
      }
      return;
    }
    case TableFormat::kJson: {
      out << "[";
      for (size_t r = 0; r < t.rows.size(); ++r) {
        out << (r ? ",\n " : "\n ") << "{";
        for (size_t i = 0; i < t.columns.size(); ++i) {
          const Cell& c = t.rows[r][i];
          std::string v = std::holds_alternative<std::monostate>(c) ? "null"
                          : std::holds_alternative<std::string>(c)
                              ? json_string(std::get<std::string>(c))
                          : std::holds_alternative<double>(c) ? json_number(std::get<double>(c))
                                                              : cell_text(c, false);
          out << (i ? ", " : "") << json_string(t.columns[i]) << ": " << v;
        }
        out << "}";
      }
      out << (t.rows.empty() ? "]\n" : "\n]\n");
      return;
    }
  }
}

}  // namespace crucible::reports
