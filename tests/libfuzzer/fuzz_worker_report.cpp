// libFuzzer target: a worker's report file (read_report), which the parent reads after the
// worker ran a third party's plugin: whatever that process left in it, torn or forged.
#include "crucible/core/error.h"
#include "fuzz_support.h"
#include "worker/worker_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path =
      crucible::fuzz::write_scratch("report.txt", crucible::fuzz::as_text(data, size));
  try {
    crucible::read_report(path);
  } catch (const crucible::Error&) {
  }
  return 0;
}
