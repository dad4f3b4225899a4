// Test plugin: a well-formed backend that claims ABI version 999, which the loader must refuse
// before calling its factory.
#include <boost/dll/alias.hpp>
#include <cstdint>
#include <memory>

#include "crucible/plugin_api.h"

namespace {
uint32_t future_abi() { return 999; }
std::unique_ptr<crucible::plugin::Backend> create() { return nullptr; }
}  // namespace

BOOST_DLL_ALIAS(future_abi, crucible_plugin_abi)
BOOST_DLL_ALIAS(create, crucible_create_backend)
