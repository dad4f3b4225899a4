// The start-of-run toolchain check (see toolchain_check.h).
#include "toolchain_check.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "crucible/core/error.h"

namespace crucible {

namespace {

// Whether `program` names an executable: a path (with a '/') directly, else in a PATH directory.
bool executable_found(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

std::string missing_toolchain(const std::vector<std::string>& backends, const char* cxx,
                              const char* path) {
  if (std::find(backends.begin(), backends.end(), "codegen") == backends.end()) return "";
  // The codegen toolchain's own rule (ToolchainOptions::default_compiler): $CXX when it holds a
  // word (a launcher such as `ccache g++` runs its first word), else c++.
  std::string first;
  if (cxx != nullptr) std::istringstream(cxx) >> first;
  const std::string program = first.empty() ? "c++" : first;
  if (executable_found(program, path ? path : "")) return "";
  if (!first.empty()) {
    return fmt::format(
        "codegen: no C++ compiler: $CXX is '{}' and '{}' is not an executable on PATH (install a "
        "compiler on this node, or set CXX to one)",
        cxx, program);
  }
  return "codegen: no C++ compiler: 'c++' is not on PATH and $CXX is unset (install g++ or "
         "clang++ on this node, or set CXX)";
}

void check_toolchain(const std::vector<std::string>& backends) {
  const std::string why = missing_toolchain(backends, std::getenv("CXX"), std::getenv("PATH"));
  if (!why.empty()) throw Error(why);
}

}  // namespace crucible
