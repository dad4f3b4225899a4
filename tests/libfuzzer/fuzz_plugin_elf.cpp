// libFuzzer target: the plugin file check (validate_plugin_file) that stands between a file named
// by --plugin-path and dlopen. Only the check runs here; nothing is ever loaded.
#include "crucible/core/error.h"
#include "crucible/plugin_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = crucible::fuzz::write_scratch("crucible_backend_fuzz.so",
                                                  crucible::fuzz::as_text(data, size));
  try {
    crucible::validate_plugin_file(path);
  } catch (const crucible::Error&) {
  }
  return 0;
}
