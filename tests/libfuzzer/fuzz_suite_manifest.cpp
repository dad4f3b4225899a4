// libFuzzer target: suite manifests (parse_suite), as found beside a nightly's suites or passed
// with --suite PATH. Paths resolve below a folder that does not exist, and HOME points nowhere.
#include <cstdlib>

#include "crucible/core/error.h"
#include "fuzz_support.h"
#include "suites/suite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool env = [] {  // `~/` and ${HOME} must not send onnx_cases through a real home
    ::setenv("HOME", "/nonexistent/home", 1);
    return true;
  }();
  (void)env;
  try {
    crucible::parse_suite(std::string(crucible::fuzz::as_text(data, size)),
                          "/nonexistent/suites/fuzz/suite.manifest");
  } catch (const crucible::Error&) {
  }
  return 0;
}
