// The .graph text format: human-readable and runnable. print_graph emits the canonical text, and
// parse_graph(print_graph(g)) prints back identically; errors read "file:line:col: what is wrong".
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "crucible/core/error.h"
#include "crucible/ir/graph.h"

namespace crucible {

// A syntax or type error at a position in a .graph text.
class ParseError : public Error {
 public:
  ParseError(std::string_view file, int line, int col, std::string_view message);
  int line() const { return line_; }
  int col() const { return col_; }

 private:
  int line_;
  int col_;
};

// Canonical text. Parameters with bound data (no initializer) print as file(path="<name>.bin"); use
// save_graph_file to write those side files too.
std::string print_graph(const Graph& g);

// One node's canonical line without indent or newline: "%y: f32[4,8] = softmax(%x, dim=-1)".
std::string print_node(const Graph& g, const Node& n);

// Parses and verifies a graph; `file` names the source in error messages.
Graph parse_graph(std::string_view text, std::string_view file = "<input>");

// Reads a .graph file (base_dir = its directory, for file(path=...) initializers).
// A missing or unreadable file gives Error "path: cannot read: reason".
Graph load_graph_file(const std::filesystem::path& path);

// Writes `bytes` to a temporary name beside `path` and renames it into place, so a reader never
// sees half a file. Throws Error when the write fails.
void write_atomically(const std::filesystem::path& path, const void* data, size_t bytes);

// Writes canonical text to `path` and raw little-endian data of bound parameters beside it
// as "<stem>.<param>.bin"; each file is written to a temporary name and renamed into place.
void save_graph_file(const Graph& g, const std::filesystem::path& path);

}  // namespace crucible
