// JSON writing helpers (see json.h).
#include "crucible/reports/json.h"

#include <fmt/format.h>

#include <cmath>

namespace crucible::reports {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{}", v);
}

std::string json_object(const std::map<std::string, std::string>& m) {
  std::string out = "{";
  for (const auto& [k, v] : m)
    out += fmt::format("{}{}: {}", out.size() > 1 ? ", " : "", json_string(k), json_string(v));
  return out + "}";
}

}  // namespace crucible::reports
