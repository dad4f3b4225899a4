// What a worker, which loads untrusted plugin code, can do to other processes: it holds no
// capability and gains none through exec, and it cannot read a process that kept its memory
// private.
#include "privileges.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "capless_sleeper.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace crucible {
namespace {

// What `script` printed, run by /bin/sh as a worker is (no_privileges) or as any child.
std::string run_shell(const std::string& script, bool no_privileges) {
  const TempDir dir("crucible_privileges_");
  const auto log = dir.path() / "log";
  ChildLimits limits;
  limits.timeout_s = 30;
  limits.no_privileges = no_privileges;
  const ChildOutcome o = run_child({"/bin/sh", "-c", script}, {}, log, limits);
  EXPECT_TRUE(o.exited && o.exit_code == 0) << script;
  std::ifstream in(log);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value of `field` in a /proc status text ("" when absent).
std::string field(const std::string& status, const std::string& name) {
  std::istringstream in(status);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + ":", 0) == 0)
      return line.substr(line.find_first_not_of(" \t", name.size() + 1));
  }
  return "";
}

TEST(Privileges, AWorkerHoldsNoCapabilityAndGainsNone) {
  const std::string status = run_shell("cat /proc/self/status", true);
  for (const char* set : {"CapEff", "CapPrm", "CapInh", "CapAmb"})
    EXPECT_EQ(field(status, set), "0000000000000000") << set;
  // A root harness also empties the bounding set, or root's exec would gain every capability.
  if (prepare_no_privileges().holds_any) {
    EXPECT_EQ(field(status, "CapBnd"), "0000000000000000");
    EXPECT_NE(field(run_shell("cat /proc/self/status", false), "CapEff"), "0000000000000000");
  }
  EXPECT_EQ(field(status, "NoNewPrivs"), "1");
}

// When the machine runs out of memory the kernel ends a worker, and so a status, before the
// harness, which holds the run: every child is the OOM killer's first choice, and what it starts
// inherits that.
TEST(Privileges, AWorkerIsTheOomKillersFirstChoiceAndTheHarnessIsNot) {
  EXPECT_EQ(run_shell("cat /proc/self/oom_score_adj", true), "1000\n");
  EXPECT_EQ(run_shell("sh -c 'cat /proc/self/oom_score_adj'", false), "1000\n");
  std::ifstream own("/proc/self/oom_score_adj");
  int adj = 1000;
  own >> adj;
  EXPECT_LT(adj, 1000);
}

TEST(Privileges, AWorkerIsToldToKeepItsMemoryPrivateWhenItsParentCanStillReadIt) {
  const std::string said = run_shell("echo \"${CRUCIBLE_PRIVATE_MEMORY:-unset}\"", true);
  EXPECT_EQ(said, can_read_private_memory() ? "1\n" : "unset\n");
  EXPECT_EQ(run_shell("echo \"${CRUCIBLE_PRIVATE_MEMORY:-unset}\"", false), "unset\n");
}

// A process of this user without capabilities, as a worker is, that sleeps until killed, its
// memory kept private or not. (One holding capabilities a reader lacks is refused to it anyway:
// a worker reads no root harness, whatever its dumpable flag.)
pid_t sleeper(bool private_memory) {
  return testing::capless_sleeper([private_memory] {
    if (private_memory) keep_memory_private(false);
    return true;
  });
}

// Whether a process of this user without capabilities (and without a sandbox, which refuses
// every process outside it anyway: landlock_sandbox_test.cpp) can read `pid`'s memory.
// /proc/PID/environ is guarded by the same check as /proc/PID/mem and process_vm_readv.
bool capless_reads(pid_t pid) {
  const NoPrivileges none = prepare_no_privileges();
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  const pid_t reader = ::fork();
  if (reader == 0) {
    if (!drop_privileges(none)) ::_exit(2);
    const int fd = ::open(path.c_str(), O_RDONLY);
    char c;
    ::_exit(fd >= 0 && ::read(fd, &c, 1) >= 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(reader, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 2) << "the reader did not start";
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(Privileges, NoWorkerReadsTheMemoryOfAProcessThatKeptItPrivate) {
  const pid_t open_one = sleeper(false), kept = sleeper(true);
  // The check can fail: such a process reads another that did not keep its memory private.
  EXPECT_TRUE(capless_reads(open_one));
  EXPECT_FALSE(capless_reads(kept));
  // A worker (sandboxed where the machine allows) reads neither when it is sandboxed.
  const std::string worker_reads = run_shell("if cat /proc/" + std::to_string(kept) +
                                                 "/environ >/dev/null 2>&1; then echo read; else "
                                                 "echo refused; fi",
                                             true);
  EXPECT_EQ(worker_reads, "refused\n");
  for (const pid_t p : {open_one, kept}) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
}

}  // namespace
}  // namespace crucible
