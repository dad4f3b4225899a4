// The console table every query command prints (runs, results, history, compare, kernels): it fits
// the console's width by wrapping text onto the row's next lines, never by cutting it.
#include "crucible/reports/table.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace crucible::reports {
namespace {

std::string console(const Table& t) {
  std::ostringstream out;
  write_table(out, t, TableFormat::kTable);
  return out.str();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every word of the cells in column `k` of a table whose columns start at `starts`.
std::string column_text(const std::vector<std::string>& lines, size_t from, size_t to) {
  std::string text;
  for (const auto& line : lines) {
    if (line.size() <= from) continue;
    std::string piece = line.substr(from, to - from);
    while (!piece.empty() && piece.back() == ' ') piece.pop_back();
    text += piece;
  }
  return text;
}

TEST(ConsoleTable, WideTextWrapsWithinTheWidthAndNothingIsCut) {
  Table t;
  t.columns = {"model", "verdict", "times"};
  const std::string verdict = "pass -> fail_accuracy_in_perf, after 3 runs at the old level";
  const std::string times = "2026-12-06T04:43:45.123Z..2026-12-06T05:10:02.456Z (run 7 to run 9)";
  const std::string model = "onnx-zoo/efficientnet_b0_with_a_long_name";
  t.rows.push_back({model, verdict, times});
  t.rows.push_back({std::string("m"), std::string("same"), std::string("-")});
  const std::string text = console(t);
  const auto lines = lines_of(text);
  for (const auto& line : lines) EXPECT_LE(line.size(), kConsoleWidth) << line;
  EXPECT_EQ(text.find("..."), std::string::npos) << text;
  // Read back column by column: each cell's words are all there, in order.
  const size_t verdict_at = lines[0].find("verdict"), times_at = lines[0].find("times");
  std::string read = column_text(lines, verdict_at, times_at);
  for (const char* word : {"pass", "->", "fail_accuracy_in_perf,", "after", "old", "level"})
    EXPECT_NE(read.find(word), std::string::npos) << word << " in\n" << text;
  read = column_text(lines, times_at, std::string::npos);
  EXPECT_NE(read.find("(run 7 to run 9)"), std::string::npos) << text;
  EXPECT_NE(read.find("2026-12-06T05:10:02.456Z"), std::string::npos) << text;
  EXPECT_GT(lines.size(), 3u) << "the first row wraps onto lines of its own";
}

TEST(ConsoleTable, AWrappedCellNeverSplitsAUtf8Character) {
  Table t;
  t.columns = {"a", "b", "c"};
  std::string wide;
  for (int i = 0; i < 60; ++i) wide += "\xc3\xa9";  // é, two bytes each, no break point
  t.rows.push_back({wide, wide, wide});
  for (const auto& line : lines_of(console(t))) {
    for (size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      if (c == 0xc3) {
        ASSERT_LT(i + 1, line.size()) << line;
        EXPECT_EQ(static_cast<unsigned char>(line[i + 1]), 0xa9) << line;
      }
      if (c == 0xa9) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(static_cast<unsigned char>(line[i - 1]), 0xc3) << line;
      }
    }
  }
}

TEST(ConsoleTable, ANoteUnderARowWrapsInsteadOfBeingCut) {
  Table t;
  t.columns = {"model", "reason"};
  t.under = {"reason"};
  t.brief = {"model"};
  std::string reason;
  for (int i = 0; i < 40; ++i) reason += "word" + std::to_string(i) + " ";
  t.rows.push_back({std::string("m"), reason});
  const std::string text = console(t);
  for (const auto& line : lines_of(text)) EXPECT_LE(line.size(), kConsoleWidth) << line;
  EXPECT_NE(text.find("word0 "), std::string::npos) << text;
  EXPECT_NE(text.find("word39"), std::string::npos) << text;
  EXPECT_EQ(text.find("..."), std::string::npos) << text;
}

TEST(ConsoleTable, AnEmptyTableSaysItsNoteAndOtherFormatsStayData) {
  Table t;
  t.columns = {"result", "status"};
  t.empty_note = "run 3: none of its 8 results failed";
  EXPECT_EQ(console(t), "run 3: none of its 8 results failed\n");
  std::ostringstream csv;
  write_table(csv, t, TableFormat::kCsv);
  EXPECT_EQ(csv.str(), "result,status\n");
  std::ostringstream json;
  write_table(json, t, TableFormat::kJson);
  EXPECT_EQ(json.str(), "[]\n");
  t.empty_note.clear();
  EXPECT_EQ(console(t), "result  status\n");
}

}  // namespace
}  // namespace crucible::reports
