// Double-quoted string literals with C-style escapes, shared by the .graph printer and the JSON
// writer, the escaping of user text shown in one-line messages, and shell words.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace crucible {

enum class QuoteStyle { kGraph, kJson };

// Both styles escape ", \, newline and tab; JSON additionally needs \r and \u00XX for other
// control bytes.
std::string quote(std::string_view s, QuoteStyle style);

// `s` with every control byte (0x00-0x1f and DEL) written as an escape (\n, \t, \r, \xNN) and
// nothing else changed, no quotes added: for user-supplied text (a path, a backend name, a plugin's
// output) inside a one-line message, so it cannot break the line or drive the terminal.
std::string escape_controls(std::string_view s);

// escape_controls(s), and past `max` bytes its head and tail around a note of how much was left
// out (never inside a UTF-8 character): a message that quotes a file's contents (a million-entry
// attribute, a name with a NUL) stays one readable line and is never cut by what() at the NUL.
std::string message_text(std::string_view s, size_t max = 2000);

// argv as one line a POSIX shell runs the same way: plain words as they are, any other in single
// quotes (a quote inside as '\''). What runs record as their command, so it can be run again.
std::string shell_command(const std::vector<std::string>& argv);

// The words a POSIX shell makes of `line` (single and double quotes, backslash escapes; no
// expansion): shell_command's inverse, and a plain split for a line of plain words.
std::vector<std::string> shell_words(std::string_view line);

}  // namespace crucible
