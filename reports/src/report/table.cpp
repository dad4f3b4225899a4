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

// Columns narrowed to fit are no narrower than this; what no longer fits wraps onto the next lines.
constexpr size_t kMinWidth = 16;

// Where a piece of at most `width` bytes of `s` from `at` ends: after a space, comma, slash or
// dash in its second half when there is one, else at the width, never inside a UTF-8 character.
size_t piece_end(const std::string& s, size_t at, size_t width) {
  if (s.size() - at <= width) return s.size();
  for (size_t k = at + width; k > at + width / 2; --k) {
    const char c = s[k - 1];
    if (c == ' ' || c == ',' || c == '/' || c == '-') return k;
  }
  size_t end = at + width;
  while (end > at + 1 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return end;
}

// `s` as lines of at most `width` bytes (wrapped, never cut): a table shows all it holds.
std::vector<std::string> wrap(const std::string& s, size_t width) {
  std::vector<std::string> lines;
  size_t at = 0;
  do {
    const size_t end = piece_end(s, at, std::max<size_t>(width, 1));
    std::string piece = s.substr(at, end - at);
    while (piece.size() > 1 && piece.back() == ' ') piece.pop_back();
    lines.push_back(std::move(piece));
    at = end;
    while (at < s.size() && s[at] == ' ') ++at;
  } while (at < s.size());
  return lines;
}

void write_console(std::ostream& out, const Table& t, bool wide) {
  if (!t.empty_note.empty() && t.rows.empty()) {
    out << t.empty_note << "\n";
    return;
  }
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
      const size_t floor = std::max(kMinWidth, header[k].size());
      if (!right[k] && width[k] > floor && (widest == shown.size() || width[k] > width[widest]))
        widest = k;
    }
    if (widest == shown.size()) break;
    --width[widest];
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
  // A row whose cells wrap takes as many lines as its longest cell.
  auto row_lines = [&](const std::vector<std::string>& cells) {
    std::vector<std::vector<std::string>> pieces;
    size_t n = 1;
    for (size_t k = 0; k < cells.size(); ++k) {
      pieces.push_back(wrap(cells[k], width[k]));
      n = std::max(n, pieces.back().size());
    }
    for (size_t i = 0; i < n; ++i) {
      std::vector<std::string> at;
      for (const auto& p : pieces) at.push_back(i < p.size() ? p[i] : "");
      line(at);
    }
  };
  row_lines(header);
  for (size_t r = 0; r < text.size(); ++r) {
    row_lines(text[r]);
    for (const std::string& name : wide ? std::vector<std::string>{} : t.under) {
      const size_t c = t.column(name);
      if (c == t.columns.size()) continue;
      const std::string v = escape_controls(cell_text(t.rows[r][c], true));
      if (v.empty()) continue;
      const std::string lead = fmt::format("  {}: ", name);
      const std::vector<std::string> lines = wrap(v, kConsoleWidth - lead.size());
      for (size_t i = 0; i < lines.size(); ++i)
        out << (i ? std::string(lead.size(), ' ') : lead) << lines[i] << "\n";
    }
  }
}

}  // namespace

std::string cell_json(const Cell& c) {
  if (std::holds_alternative<std::monostate>(c)) return "null";
  if (const auto* s = std::get_if<std::string>(&c)) return json_string(*s);
  if (const auto* d = std::get_if<double>(&c)) return json_number(*d);
  return cell_text(c, false);
}

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
          out << (i ? ", " : "") << json_string(t.columns[i]) << ": " << cell_json(t.rows[r][i]);
        }
        out << "}";
      }
      out << (t.rows.empty() ? "]\n" : "\n]\n");
      return;
    }
  }
}

}  // namespace crucible::reports
