// Which -c options reach which backend: "key=value" every backend but eager (the reference runs
// as it is), "BACKEND:key=value" that backend alone, eager included.
#pragma once

#include <map>
#include <string>

namespace crucible {

std::map<std::string, std::string> backend_config(const std::map<std::string, std::string>& config,
                                                  const std::string& backend);

}  // namespace crucible
