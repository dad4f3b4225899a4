// Exception types shared by every part: each carries a one-line message meant for the user.
// Parsers prefix "file:line:col: "; the CLI prints what() and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace crucible {

// Invalid user input: malformed graph, bad attribute, shape mismatch, missing file.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A graph whose types or structure do not check out (raised by shape rules and the verifier).
class GraphError : public Error {
 public:
  using Error::Error;
};

}  // namespace crucible
