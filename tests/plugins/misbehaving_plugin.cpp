// Test plugins that misbehave unconditionally, one built per behaviour (MISBEHAVIOUR, set per
// target in tests/CMakeLists.txt): hang_compile, hang_run, segv, abort, exit0 (exit(0) during run).
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "crucible/plugin_api.h"

namespace {

using namespace crucible;

constexpr std::string_view kHow = MISBEHAVIOUR;

// Blocks forever without spinning a core: only the harness's timeout ends it.
[[noreturn]] void hang() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

class MisbehavingExecutable final : public plugin::Executable {
 public:
  std::vector<Tensor> run(std::span<const Tensor>) override {
    if (kHow == "hang_run") hang();
    if (kHow == "segv") {
      // A real invalid store: page 0 is never mapped. Not nullptr itself, which the compiler may
      // treat as unreachable and drop; volatile so it cannot reason about the address at all.
      volatile uintptr_t address = 64;
      *reinterpret_cast<int*>(address) = 42;
    }
    if (kHow == "abort") std::abort();
    if (kHow == "exit0") std::exit(0);
    return {};
  }
};

class MisbehavingBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override {
    return {std::string(kHow), "test", plugin::kAbiVersion};
  }
  std::unique_ptr<plugin::Executable> compile(const Graph&, const plugin::Options&) override {
    if (kHow == "hang_compile") hang();
    return std::make_unique<MisbehavingExecutable>();
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<MisbehavingBackend>(); }

}  // namespace

CRUCIBLE_EXPORT_BACKEND(create)
