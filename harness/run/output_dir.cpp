// Output folders claimed one run at a time (see output_dir.h).
#include "output_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "crucible/core/error.h"
#include "crucible/core/fnv1a.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarker = ".crucible_run";
constexpr std::string_view kPlaceholder = "{run}";

// Run 0 is a run still starting (its row not yet made): the marker names its process, so a claim
// left by one that was killed is taken over, not honoured for ever.
std::string marker_text(const fs::path& db, int64_t run_id) {
  const std::string store = fs::weakly_canonical(fs::absolute(db)).string();
  return run_id == 0 ? fmt::format("a run of {} still starting (pid {})\n", store, ::getpid())
                     : fmt::format("run {} of {}\n", run_id, store);
}

// A starting run's marker whose process is gone.
bool abandoned(const fs::path& marker) {
  std::ifstream in(marker);
  std::string line;
  std::getline(in, line);
  const size_t at = line.rfind("(pid ");
  if (at == std::string::npos || line.find("still starting") == std::string::npos) return false;
  const long pid = std::strtol(line.c_str() + at + 5, nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

fs::path default_output_dir(const fs::path& db, int64_t run_id) {
  const std::string where = fs::weakly_canonical(fs::absolute(db)).string();
  return fs::path("crucible_out") /
         fmt::format("{}-{:08x}", db.stem().string(), fnv1a(where) & 0xffffffffu) /
         fmt::format("run_{}", run_id);
}

bool has_run_placeholder(const std::string& pattern) {
  return pattern.find(kPlaceholder) != std::string::npos;
}

fs::path expand_output_dir(const std::string& pattern, int64_t run_id) {
  std::string out = pattern;
  for (size_t at = out.find(kPlaceholder); at != std::string::npos;
       at = out.find(kPlaceholder, at)) {
    out.replace(at, kPlaceholder.size(), std::to_string(run_id));
  }
  return out;
}

fs::path first_free_name(const fs::path& base, const std::function<bool(const fs::path&)>& take) {
  for (int n = 1; n <= 1000; ++n) {
    const fs::path dir = n == 1 ? base : fs::path(fmt::format("{}.{}", base.string(), n));
    if (take(dir)) return dir;
  }
  throw Error(fmt::format("{}: no free folder of that name (tried .2 to .1000)", base.string()));
}

bool claim_output_dir(const fs::path& dir, const fs::path& db, int64_t run_id) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error(fmt::format("{}: cannot create the output folder: {}", dir.string(), ec.message()));
  const fs::path marker = dir / kMarker;
  // O_EXCL: of two runs claiming one folder at once, exactly one gets it.
  int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST && abandoned(marker)) {
    fs::remove(marker, ec);
    fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw Error(fmt::format("{}: cannot write: {}", marker.string(), std::strerror(errno)));
  }
  const std::string text = marker_text(db, run_id);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) throw Error(fmt::format("{}: cannot write", marker.string()));
  return true;
}

void mark_output_dir(const fs::path& dir, const fs::path& db, int64_t run_id) {
  std::ofstream(dir / kMarker, std::ios::trunc) << marker_text(db, run_id);
}

void release_output_dir(const fs::path& dir) {
  std::error_code ec;
  fs::remove(dir / kMarker, ec);
}

std::string output_dir_owner(const fs::path& dir) {
  std::ifstream in(dir / kMarker);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "another run" : line;
}

}  // namespace crucible
