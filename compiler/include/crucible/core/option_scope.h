// Which backends a -c option reaches: one rule for a run's workers (the harness) and for the
// commands the dashboard writes to reproduce a result (the reports), which share only core.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace crucible {

// The key an option given as `key` (what stands before the first '=') has for `backend`: "key"
// reaches every backend but eager (the reference runs as it is), "BACKEND:key" that backend alone,
// eager included. nullopt where it does not reach `backend`.
inline std::optional<std::string> option_key_for(std::string_view key, std::string_view backend) {
  const size_t colon = key.find(':');
  if (colon == std::string_view::npos) {
    if (backend == "eager") return std::nullopt;
    return std::string(key);
  }
  if (key.substr(0, colon) != backend) return std::nullopt;
  return std::string(key.substr(colon + 1));
}

}  // namespace crucible
