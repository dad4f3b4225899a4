// Test plugin: exports the ABI version but no backend factory.
#include <boost/dll/alias.hpp>

#include "crucible/plugin_api.h"

BOOST_DLL_ALIAS(crucible::plugin::abi_version, crucible_plugin_abi)
