// A worker's Landlock sandbox (see landlock_sandbox.h). The access bits and the ruleset layout
// are the kernel's UAPI; they are spelled here because Debian 12's headers stop at ABI 2.
#include "landlock_sandbox.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "crucible/core/error.h"

namespace crucible {

namespace {

// Filesystem rights (LANDLOCK_ACCESS_FS_*) by the ABI that brought them.
constexpr uint64_t kWriteFile = 1ULL << 1;
constexpr uint64_t kAbi1Writes = kWriteFile | (1ULL << 4) | (1ULL << 5) | (1ULL << 6) |
                                 (1ULL << 7) | (1ULL << 8) | (1ULL << 9) | (1ULL << 10) |
                                 (1ULL << 11) | (1ULL << 12);  // write, remove, make
constexpr uint64_t kRefer = 1ULL << 13;     // ABI 2: link or rename across folders
constexpr uint64_t kTruncate = 1ULL << 14;  // ABI 3: truncate(2) and O_TRUNC
// Scopes (ABI 6): no signal to, and no abstract unix socket of, a process outside the sandbox.
constexpr uint64_t kScopeAbstractSocket = 1ULL << 0;
constexpr uint64_t kScopeSignal = 1ULL << 1;

// struct landlock_ruleset_attr as of ABI 6; older kernels are handed its first 8 or 16 bytes.
struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;
  uint64_t scoped = 0;
};

size_t ruleset_attr_size(int abi) { return abi >= 6 ? 24 : abi >= 4 ? 16 : 8; }

uint64_t handled_writes(int abi) {
  return kAbi1Writes | (abi >= 2 ? kRefer : 0) | (abi >= 3 ? kTruncate : 0);
}

bool off(const char* v) { return v == nullptr || *v == '\0' || std::string(v) == "0"; }

SandboxSupport probe() {
  SandboxSupport s;
  if (!off(std::getenv(kNoSandboxEnv))) {
    s.why_none = fmt::format("{} is set", kNoSandboxEnv);
    return s;
  }
  const long abi =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi <= 0) {
    s.why_none = errno == EOPNOTSUPP ? "Landlock is disabled on this kernel (lsm=)"
                                     : fmt::format("Landlock: {}", std::strerror(errno));
    return s;
  }
  s.abi = static_cast<int>(abi);
  if (s.abi < 3) s.gaps = "truncate(2) of any file the user may write";
  if (s.abi < 6) {
    if (!s.gaps.empty()) s.gaps += "; ";
    s.gaps += "signals to other processes of the user";
  }
  return s;
}

}  // namespace

const SandboxSupport& sandbox_support() {
  static const SandboxSupport s = probe();
  return s;
}

Sandbox::Sandbox(const std::vector<std::filesystem::path>& writable) {
  const int abi = sandbox_support().abi;
  if (abi == 0) return;
  RulesetAttr attr;
  attr.handled_access_fs = handled_writes(abi);
  if (abi >= 6) attr.scoped = kScopeAbstractSocket | kScopeSignal;
  const long fd = ::syscall(SYS_landlock_create_ruleset, &attr, ruleset_attr_size(abi), 0);
  if (fd < 0) {
    throw Error(
        fmt::format("cannot sandbox a worker: landlock_create_ruleset: {}", std::strerror(errno)));
  }
  ruleset_ = static_cast<int>(fd);
  std::vector<std::filesystem::path> paths = writable;
  paths.emplace_back("/dev/null");  // every program's sink
  for (const auto& path : paths) {
    const int at = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    struct stat st {};
    if (at < 0 || ::fstat(at, &st) != 0) {
      const int e = errno;
      if (at >= 0) ::close(at);
      ::close(ruleset_);
      throw Error(
          fmt::format("{}: cannot let a worker write there: {}", path.string(), std::strerror(e)));
    }
    // A file takes only the rights of a file; a folder all that are handled.
    landlock_path_beneath_attr rule{};
    rule.allowed_access = S_ISDIR(st.st_mode) ? attr.handled_access_fs
                                              : attr.handled_access_fs & (kWriteFile | kTruncate);
    rule.parent_fd = at;
    const long added =
        ::syscall(SYS_landlock_add_rule, ruleset_, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    const int e = errno;
    ::close(at);
    if (added != 0) {
      ::close(ruleset_);
      throw Error(fmt::format("{}: cannot let a worker write there: landlock_add_rule: {}",
                              path.string(), std::strerror(e)));
    }
  }
}

Sandbox::~Sandbox() {
  if (ruleset_ >= 0) ::close(ruleset_);
}

bool Sandbox::enter() const {
  if (ruleset_ < 0) return true;
  return ::syscall(SYS_landlock_restrict_self, ruleset_, 0) == 0;
}

}  // namespace crucible
