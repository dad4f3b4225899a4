// Double-quoted string literals with C-style escapes, shared by the .graph printer and the JSON
// writer, and the escaping of user text shown in one-line messages.
#pragma once

#include <string>
#include <string_view>

namespace crucible {

enum class QuoteStyle { kGraph, kJson };

// Both styles escape ", \, newline and tab; JSON additionally needs \r and \u00XX for other
// control bytes.
std::string quote(std::string_view s, QuoteStyle style);

// `s` with every control byte (0x00-0x1f and DEL) written as an escape (\n, \t, \r, \xNN) and
// nothing else changed, no quotes added: for user-supplied text (a path, a backend name, a plugin's
// output) inside a one-line message, so it cannot break the line or drive the terminal.
std::string escape_controls(std::string_view s);

}  // namespace crucible
