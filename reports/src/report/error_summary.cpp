// The one-line reason of a result (see error_summary.h).
#include "crucible/reports/error_summary.h"

#include <algorithm>

#include "crucible/core/quote.h"

namespace crucible::reports {

namespace {

std::string_view first_line(std::string_view s) { return s.substr(0, s.find('\n')); }

// A kernel cache or temp path says little on a console; its file name and what follows
// (":296:48:") say where.
std::string shorten_paths(std::string_view line) {
  std::string out;
  size_t i = 0;
  while (i < line.size()) {
    const size_t end = std::min(line.find(' ', i), line.size());
    std::string_view word = line.substr(i, end - i);
    const size_t slash = word.rfind('/');
    if (slash != std::string_view::npos && word.size() > 24 && word.find('/') < slash) {
      // Quotes and brackets in front of the path stay.
      const size_t start = word.find_first_not_of("'\"([<");
      out += word.substr(0, start);
      out += ".../";
      out += word.substr(slash + 1);
    } else {
      out += word;
    }
    if (end < line.size()) out += ' ';
    i = end + 1;
  }
  return out;
}

// The first line after the first that reads like a compiler's diagnosis ("...: error: ...").
std::string_view first_error_line(std::string_view error) {
  size_t at = error.find('\n');
  while (at != std::string_view::npos) {
    const std::string_view line = first_line(error.substr(at + 1));
    if (line.find("error: ") != std::string_view::npos) return line;
    at = error.find('\n', at + 1);
  }
  return {};
}

}  // namespace

std::string error_summary(std::string_view error, size_t width) {
  if (error.empty()) return "";
  std::string line = shorten_paths(first_line(error));
  const std::string_view diagnosis = first_error_line(error);
  if (!diagnosis.empty()) {
    const size_t at = diagnosis.find("error: ");
    // The location before "error:" keeps only its file name and line, and only the line when
    // the first line named the file already.
    std::string where = shorten_paths(diagnosis.substr(0, at));
    const std::string file = where.substr(0, where.find(':'));
    if (!file.empty() && file.size() < where.size() && line.find(file) != std::string::npos)
      where = "line " + where.substr(file.size() + 1);
    line += " " + where + std::string(diagnosis.substr(at));
  }
  line = escape_controls(line);
  std::string_view rest = error.substr(std::min(error.size(), first_line(error).size()));
  while (!rest.empty() && (rest.front() == '\n' || rest.front() == '\r')) rest.remove_prefix(1);
  const bool more = !rest.empty() && diagnosis.empty();
  if (line.size() > width || more) {
    size_t cut = std::min(line.size(), width - 4);
    // Never inside a UTF-8 sequence (GCC quotes with ‘ ’) or an escape ("\x1b").
    while (cut > 0 && cut < line.size() && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80)
      --cut;
    if (const size_t esc = line.rfind("\\x", cut); esc != std::string::npos && esc + 4 > cut)
      cut = esc;
    line = line.substr(0, cut) + " ...";
  }
  return line;
}

}  // namespace crucible::reports
