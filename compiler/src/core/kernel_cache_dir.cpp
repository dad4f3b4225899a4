// The default kernel cache folder (see kernel_cache_dir.h).
#include "crucible/core/kernel_cache_dir.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "crucible/core/error.h"

namespace crucible {

namespace fs = std::filesystem;

fs::path default_kernel_cache_dir() {
  const auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : std::string();
  };
  if (std::string d = set("CRUCIBLE_CACHE_DIR"); !d.empty()) return d;
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (std::string x = set("XDG_CACHE_HOME"); !x.empty() && fs::path(x).is_absolute()) {
    return fs::path(x) / "crucible" / "kernels";
  }
  std::string home = set("HOME");
  if (home.empty()) {
    if (const passwd* pw = getpwuid(geteuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  if (home.empty()) {
    throw Error(
        "no kernel cache directory: set CRUCIBLE_CACHE_DIR (neither XDG_CACHE_HOME nor HOME is "
        "set)");
  }
  return fs::path(home) / ".cache" / "crucible" / "kernels";
}

}  // namespace crucible
