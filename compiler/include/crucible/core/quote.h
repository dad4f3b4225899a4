// Double-quoted string literals with C-style escapes, shared by the .graph printer and the JSON
// writer: both escape ", \, newline and tab; JSON additionally needs \r and \u00XX for other
// control bytes.
#pragma once

#include <string>
#include <string_view>

namespace crucible {

enum class QuoteStyle { kGraph, kJson };

std::string quote(std::string_view s, QuoteStyle style);

// `s` with every control byte (below 0x20, and 0x7f) written as an escape (\n, \t, \x1b), so
// text taken from a user's file cannot split or recolour a one-line message.
std::string printable(std::string_view s);

}  // namespace crucible
