// Test plugin: the right ABI, but its factory throws, as a backend whose setup fails would.
#include <stdexcept>

#include "crucible/plugin_api.h"

namespace {
std::unique_ptr<crucible::plugin::Backend> create() {
  throw std::runtime_error("cannot reach the license server");
}
}  // namespace

CRUCIBLE_EXPORT_BACKEND(create)
