// A worker's sandbox (Landlock): it writes only below the paths it is given, and cannot trace,
// signal or reach the abstract sockets of a process outside it (docs/guide/threat_model.md).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace crucible {

// Set (to anything but "" or "0") to start workers without a sandbox.
inline constexpr const char* kNoSandboxEnv = "CRUCIBLE_NO_SANDBOX";

// The Landlock ABI this kernel offers, read once: 0 when it has none, it is disabled or
// kNoSandboxEnv is set (`why_none` says which), and what an older ABI leaves a worker (`gaps`, ""
// when nothing the sandbox asks for is missing).
struct SandboxSupport {
  int abi = 0;
  std::string why_none;
  std::string gaps;
};
const SandboxSupport& sandbox_support();

// A Landlock ruleset made in the parent before fork, entered by the child before exec. Writing
// (and making, removing, renaming, truncating) is allowed below each of `writable` (folders or
// files, which must exist) and /dev/null, and nowhere else; reading and executing stay free.
// Landlock also refuses the child and all it starts any trace of a process outside (ptrace,
// /proc/PID/mem, /proc/PID/root), and from ABI 6 any signal to one: two workers, each in a
// sandbox of its own, cannot reach each other.
// Without Landlock (sandbox_support().abi == 0) it is inactive and enter() does nothing.
class Sandbox {
 public:
  // Throws Error naming a path that cannot be opened.
  explicit Sandbox(const std::vector<std::filesystem::path>& writable);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // In the forked child after PR_SET_NO_NEW_PRIVS, async-signal-safe: true when this process and
  // all it starts are now held by the rules (or there are none); false with errno set.
  bool enter() const;

 private:
  int ruleset_ = -1;
};

}  // namespace crucible
