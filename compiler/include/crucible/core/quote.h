// Double-quoted string literals with C-style escapes, shared by the .graph printer and the JSON
// writer: both escape ", \, newline and tab; JSON additionally needs \r and \u00XX for other
// control bytes.
#pragma once

#include <string>
#include <string_view>

namespace crucible {

enum class QuoteStyle { kGraph, kJson };

std::string quote(std::string_view s, QuoteStyle style);

}  // namespace crucible
