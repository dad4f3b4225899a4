// Minimal JSON writing (strings, numbers, flat string maps) for the store's JSON columns and the
// exports; reading JSON is never needed.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace crucible::reports {

std::string json_string(std::string_view s);  // quoted and escaped
std::string json_number(double v);            // null for NaN/inf, shortest round-trip otherwise
std::string json_object(const std::map<std::string, std::string>& m);  // {"k": "v", ...}
std::string json_numbers(const std::map<std::string, double>& m);      // {"k": 1.5, ...}

}  // namespace crucible::reports
