// Nearest-name suggestions (see did_you_mean.h).
#include "crucible/core/did_you_mean.h"

#include <fmt/format.h>

#include <algorithm>

namespace crucible {

namespace {

// Optimal string alignment distance: Levenshtein plus adjacent transpositions ("bakcend").
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(std::string_view typed, const std::vector<std::string>& candidates) {
  if (typed.empty() || typed.size() > 256) return "";
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& c : candidates) {
    if (c.size() > 256) continue;
    const size_t limit = std::clamp<size_t>(std::max(c.size(), typed.size()) / 3, 1, 3);
    const size_t dist = edit_distance(typed, c);
    if (dist <= limit && dist < best_distance) {
      best = c;
      best_distance = dist;
    }
  }
  if (!best.empty()) return best;
  for (const std::string& c : candidates) {
    if (typed.size() >= 3 && c.starts_with(typed)) return c;
  }
  return "";
}

std::string suggest_names(std::string_view typed, const std::vector<std::string>& candidates) {
  if (candidates.empty()) return "";
  std::vector<std::string> sorted = candidates;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const std::string near = closest_name(typed, sorted);
  return fmt::format("{}known: {}", near.empty() ? "" : fmt::format("did you mean '{}'? ", near),
                     fmt::join(sorted, ", "));
}

}  // namespace crucible
