// "Did you mean": the known name closest to a mistyped one, for errors that list what exists.
// Closeness is the edit distance (insertions, deletions, substitutions, adjacent swaps).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace crucible {

// The candidate nearest to `typed` when it is within a third of the longer name's length (at
// least 1, at most 3 edits), or a candidate starting with it; "" when none is that close.
std::string closest_name(std::string_view typed, const std::vector<std::string>& candidates);

// " (did you mean 'X'?) known: a, b, c" for an error message; only the list when nothing is
// close, "" when there are no candidates.
std::string suggest_names(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace crucible
