// A worker's sandbox: it writes below the folders it is given and nowhere else (not through
// another process's /proc/PID/root either), and cannot trace or signal a process outside it.
#include "landlock_sandbox.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "capless_sleeper.h"
#include "cli_util.h"
#include "crucible/core/error.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sandbox_support().abi == 0)
      GTEST_SKIP() << "no sandbox on this machine: " << sandbox_support().why_none;
    fs::create_directories(own_);
    fs::create_directories(other_);
    std::ofstream(other_ / "kept") << "kept";
  }
  void TearDown() override {
    for (const pid_t p : sleepers_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
  }

  // What `script` printed on stdout (its errors dropped), run by /bin/sh as a worker is: no
  // privileges, writing own_ alone.
  std::string in_sandbox(const std::string& script) {
    ChildLimits limits;
    limits.timeout_s = 30;
    limits.no_privileges = true;
    limits.writable = {own_};
    const fs::path log = dir_.path() / "log";
    fs::remove(log);
    const ChildOutcome o =
        run_child({"/bin/sh", "-c", "exec 2>/dev/null; " + script}, {}, log, limits);
    EXPECT_TRUE(o.exited && o.exit_code == 0) << script << "\n" << slurp(log);
    return slurp(log);
  }

  // A process of this user without capabilities that sleeps until killed: a plain one (memory
  // not kept private, as a shell of the user's), or a worker in a sandbox of its own.
  pid_t sleeper(bool sandboxed) {
    const Sandbox own({});
    const pid_t pid = testing::capless_sleeper([&] { return !sandboxed || own.enter(); });
    sleepers_.push_back(pid);
    return pid;
  }

  TempDir dir_{"crucible_sandbox_"};
  fs::path own_ = dir_.path() / "own";
  fs::path other_ = dir_.path() / "other";
  std::vector<pid_t> sleepers_;
};

TEST_F(SandboxTest, AWorkerWritesBelowItsFolderAndNowhereElse) {
  const std::string o = own_.string(), x = other_.string();
  const std::string said = in_sandbox(
      "echo a > " + o + "/f && mkdir " + o + "/d && mv " + o + "/f " + o + "/d/g && echo own;" +
      "echo b > " + x + "/new 2>/dev/null && echo made;" + "echo b >> " + x +
      "/kept 2>/dev/null && echo appended;" + "mkdir " + x + "/d 2>/dev/null && echo mkdir;" +
      "truncate -s 0 " + x + "/kept 2>/dev/null && echo truncated;" + "ln -s kept " + x +
      "/link 2>/dev/null && echo linked;" + "mv " + x + "/kept " + o +
      "/stolen 2>/dev/null && echo moved;" + "rm -f " + x + "/kept 2>/dev/null; [ -e " + x +
      "/kept ] || echo removed;" + "echo c > /dev/null && echo sink");
  EXPECT_EQ(said, "own\nsink\n");
  EXPECT_EQ(slurp(other_ / "kept"), "kept");
  EXPECT_TRUE(fs::exists(own_ / "d" / "g"));
}

TEST_F(SandboxTest, NoPathThroughAnotherProcessLeadsOut) {
  // A plain process of the user: its memory, its root and its cwd are its own, and so is every
  // path through them.
  const pid_t plain = sleeper(false);
  const std::string proc = "/proc/" + std::to_string(plain);
  const std::string said = in_sandbox("echo b > " + proc + "/root" + other_.string() +
                                      "/new 2>/dev/null && echo wrote;" + "cat " + proc +
                                      "/environ >/dev/null 2>&1 && echo read;" + "ls " + proc +
                                      "/cwd/ >/dev/null 2>&1 && echo listed;" + "echo done");
  EXPECT_EQ(said, "done\n");
  EXPECT_FALSE(fs::exists(other_ / "new"));
}

TEST_F(SandboxTest, AWorkerSignalsNoProcessOutsideItsSandbox) {
  if (sandbox_support().abi < 6) {
    EXPECT_NE(sandbox_support().gaps.find("signals"), std::string::npos);
    GTEST_SKIP() << "Landlock ABI " << sandbox_support().abi << " does not scope signals";
  }
  const pid_t plain = sleeper(false), worker = sleeper(true);
  const std::string said =
      in_sandbox("kill -STOP " + std::to_string(plain) + " 2>/dev/null && echo stopped-plain;" +
                 "kill -STOP " + std::to_string(worker) + " 2>/dev/null && echo stopped-worker;" +
                 "sleep 30 & kill $! && echo own-child");
  EXPECT_EQ(said, "own-child\n");
}

TEST_F(SandboxTest, TwoWorkersCannotReadEachOther) {
  // Both hold no capability and run as this user; the other keeps its memory open (dumpable).
  const pid_t worker = sleeper(true);
  const std::string said = in_sandbox("cat /proc/" + std::to_string(worker) +
                                      "/environ >/dev/null 2>&1 && echo read; echo done");
  EXPECT_EQ(said, "done\n");
}

TEST(Sandbox, AFolderThatIsNotThereIsNamed) {
  if (sandbox_support().abi == 0) GTEST_SKIP() << sandbox_support().why_none;
  try {
    const Sandbox s({"/nonexistent/crucible/folder"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/crucible/folder"), std::string::npos)
        << e.what();
  }
}

// Asked to run without it, a run says so once, and its workers still do their jobs.
TEST(Sandbox, RunningWithoutItIsSaidOnce) {
  const std::string graph = std::string(CRUCIBLE_SOURCE_DIR) + "/suites/tutorial/sin_cos.graph";
  const auto r = testing::run_crucible("run-graph " + graph + " -b eager", "CRUCIBLE_NO_SANDBOX=1");
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string warning = "workers run without a sandbox (CRUCIBLE_NO_SANDBOX is set)";
  const size_t at = r.err.find(warning);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(warning, at + 1), std::string::npos) << r.err;
  if (sandbox_support().abi > 0 && sandbox_support().gaps.empty()) {  // else it names the gaps
    const auto sandboxed = testing::run_crucible("run-graph " + graph + " -b eager");
    EXPECT_EQ(sandboxed.status, 0) << sandboxed.err;
    EXPECT_EQ(sandboxed.err.find("sandbox"), std::string::npos) << sandboxed.err;
  }
}

}  // namespace
}  // namespace crucible
