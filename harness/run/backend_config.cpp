// -c options scoped per backend (see backend_config.h).
#include "backend_config.h"

namespace crucible {

std::map<std::string, std::string> backend_config(const std::map<std::string, std::string>& config,
                                                  const std::string& backend) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : config) {
    const size_t colon = key.find(':');
    if (colon == std::string::npos) {
      if (backend != "eager") out[key] = value;
    } else if (key.compare(0, colon, backend) == 0 && colon == backend.size()) {
      out[key.substr(colon + 1)] = value;
    }
  }
  return out;
}

}  // namespace crucible
