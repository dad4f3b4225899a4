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

// Cells cut to fit are no narrower than this, and end in "...".
constexpr size_t kMinCut = 16;

void write_console(std::ostream& out, const Table& t, bool wide) {
  std::vector<size_t> shown;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    if (wide || t.brief.empty() ||
        std::find(t.brief.begin(), t.brief.end(), t.columns[i]) != t.brief.end())
      shown.push_back(i);
  }
  std::vector<size_t> width(shown.size());
  std::vector<bool> right(shown.size(), false);
  std::vector<std::string> header;
  for (size_t k = 0; k < shown.size(); ++k) {
    header.push_back(t.columns[shown[k]]);
    width[k] = header[k].size();
  }
  std::vector<std::vector<std::string>> text;
  for (const auto& row : t.rows) {
    text.emplace_back();
    for (size_t k = 0; k < shown.size(); ++k) {
      // User text (an error, a tag) must not break the table's lines.
      text.back().push_back(escape_controls(cell_text(row[shown[k]], true)));
      width[k] = std::max(width[k], text.back().back().size());
      right[k] = right[k] || numeric(row[shown[k]]);
    }
  }
  // Narrow the widest text column, a character at a time, until the table fits.
  auto total = [&] {
    size_t w = 0;
    for (size_t x : width) w += x + 2;
    return w - 2;
  };
  while (!wide && !shown.empty() && total() > kConsoleWidth) {
    size_t widest = shown.size();
    for (size_t k = 0; k < shown.size(); ++k) {
      const size_t floor = std::max(kMinCut, header[k].size());
      if (!right[k] && width[k] > floor && (widest == shown.size() || width[k] > width[widest]))
        widest = k;
    }
    if (widest == shown.size()) break;
    --width[widest];
  }
  for (auto& cells : text) {
    for (size_t k = 0; k < cells.size(); ++k) {
      if (cells[k].size() > width[k]) cells[k] = cells[k].substr(0, width[k] - 3) + "...";
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
  line(header);
  for (size_t r = 0; r < text.size(); ++r) {
    line(text[r]);
    for (const std::string& name : wide ? std::vector<std::string>{} : t.under) {
      const size_t c = t.column(name);
      if (c == t.columns.size()) continue;
      std::string v = escape_controls(cell_text(t.rows[r][c], true));
      if (v.empty()) continue;
      v = fmt::format("  {}: {}", name, v);
      if (v.size() > kConsoleWidth) v = v.substr(0, kConsoleWidth - 3) + "...";
      out << v << "\n";
    }
  }
}

}  // namespace

void write_table(std::ostream& out, const Table& t, TableFormat format, bool wide) {
  switch (format) {
    case TableFormat::kTable:
      write_console(out, t, wide);
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
