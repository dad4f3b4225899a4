// Private temporary directories (see temp_dir.h).
#include "temp_dir.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>

#include "crucible/core/error.h"

namespace crucible {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw Error(fmt::format("cannot create a temporary directory in {}: {}",
                            fs::temp_directory_path().string(), std::strerror(errno)));
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace crucible
