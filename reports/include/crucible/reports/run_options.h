// What a stored run's command gave one backend: its -c options, read back from the shell words
// the run recorded. The dashboard's reproduce commands and `compare`'s same-code rule use it.
#pragma once

#include <string>
#include <vector>

namespace crucible::reports {

// The values of `command`'s -c / --config options that reach `backend` (core's option_scope
// rule: unscoped ones every backend but eager, "BACKEND:key=value" that one), in order.
std::vector<std::string> options_reaching(const std::string& command, const std::string& backend);

}  // namespace crucible::reports
