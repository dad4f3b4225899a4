// JSON writing helpers (see json.h).
#include "crucible/reports/json.h"

#include <fmt/format.h>

#include <cmath>

#include "crucible/core/quote.h"

namespace crucible::reports {

std::string json_string(std::string_view s) { return quote(s, QuoteStyle::kJson); }

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

std::string json_numbers(const std::map<std::string, double>& m) {
  std::string out = "{";
  for (const auto& [k, v] : m)
    out += fmt::format("{}{}: {}", out.size() > 1 ? ", " : "", json_string(k), json_number(v));
  return out + "}";
}

}  // namespace crucible::reports
