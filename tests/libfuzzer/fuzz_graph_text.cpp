// libFuzzer target: the .graph text parser. Beyond "no crash, only crucible::Error", the format's
// promise is checked: whatever parses prints to text that parses and prints back identically.
#include <cstdio>
#include <cstdlib>

#include "crucible/core/error.h"
#include "crucible/ir/text_format.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crucible;
  std::string printed;
  try {
    printed = print_graph(parse_graph(fuzz::as_text(data, size), "fuzz.graph"));
  } catch (const Error&) {
    return 0;  // refused with a message: what bad input must get
  }
  std::string again;
  try {
    again = print_graph(parse_graph(printed, "printed.graph"));
  } catch (const Error& e) {
    std::fprintf(stderr, "printed graph does not parse: %s\n%s", e.what(), printed.c_str());
    std::abort();
  }
  if (again != printed) {
    std::fprintf(stderr, "print(parse(print(g))) differs:\n%s\n---\n%s", printed.c_str(),
                 again.c_str());
    std::abort();
  }
  return 0;
}
