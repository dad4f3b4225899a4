// A result's error cut to the one line a console row has room for: what failed, and the first
// compiler-style "error:" line behind it, with long paths shortened to their file names.
#pragma once

#include <string>
#include <string_view>

namespace crucible::reports {

// At most `width` characters, control characters escaped; "" for "".
std::string error_summary(std::string_view error, size_t width);

}  // namespace crucible::reports
