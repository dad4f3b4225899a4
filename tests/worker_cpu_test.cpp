// WorkerCpu::stray: a process that left a worker's tree (a CLONE_PARENT child, a double fork's
// grandchild) is named from the worker's cgroup; the worker's own children are not.
#include "worker_cpu.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

namespace crucible {
namespace {

enum class Spawn { kChild, kCloneParent, kDoubleFork };

[[noreturn]] void sleep_forever() {
  for (;;) ::pause();
}

// Started in a worker's place: waits for its byte on `go` (by then it sits in its cgroup), starts
// a process as `how` says, writes that process's pid to `said`, and sleeps.
[[noreturn]] void worker_body(int go, int said, Spawn how) {
  char byte = 0;
  if (::read(go, &byte, 1) != 1) ::_exit(1);
  pid_t started = 0;
  if (how == Spawn::kChild) {
    started = ::fork();
    if (started == 0) sleep_forever();
  } else if (how == Spawn::kCloneParent) {
    // The raw system call with no new stack: the child goes on, as after fork, on a copy of this
    // one (glibc's clone() wants a stack of the caller's, which ASan then warns about).
    started = static_cast<pid_t>(
        ::syscall(SYS_clone, CLONE_PARENT | SIGCHLD, nullptr, nullptr, nullptr, 0));
    if (started == 0) sleep_forever();
  } else {
    int pids[2];
    if (::pipe(pids) != 0) ::_exit(1);
    if (::fork() == 0) {
      const pid_t grandchild = ::fork();
      if (grandchild == 0) sleep_forever();
      if (::write(pids[1], &grandchild, sizeof grandchild) != sizeof grandchild) ::_exit(1);
      ::_exit(0);  // its child is left to the nearest subreaper
    }
    if (::read(pids[0], &started, sizeof started) != sizeof started) ::_exit(1);
    ::wait(nullptr);
  }
  if (::write(said, &started, sizeof started) != sizeof started) ::_exit(1);
  sleep_forever();
}

// What stray() says once the worker has started a process as `how` says (polled: the process
// joins the group as it starts), with that process's pid.
std::pair<std::string, pid_t> stray_after(Spawn how) {
  int go[2], said[2];
  EXPECT_EQ(::pipe(go), 0);
  EXPECT_EQ(::pipe(said), 0);
  const pid_t worker = ::fork();
  if (worker == 0) worker_body(go[0], said[1], how);
  std::pair<std::string, pid_t> out;
  {
    WorkerCpu cpu(worker);
    if (cpu.how().find("cgroup") == std::string::npos) {
      ::kill(worker, SIGKILL);
      ::waitpid(worker, nullptr, 0);
      return {"no cgroup: " + cpu.how(), 0};
    }
    EXPECT_EQ(cpu.stray(), "") << "before it started anything";
    EXPECT_EQ(::write(go[1], "g", 1), 1);
    EXPECT_EQ(::read(said[0], &out.second, sizeof out.second),
              static_cast<ssize_t>(sizeof out.second));
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (out.first.empty() && std::chrono::steady_clock::now() < end) {
      out.first = cpu.stray();
      if (how == Spawn::kChild) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    cpu.kill_all();
  }
  ::waitpid(worker, nullptr, 0);
  ::waitpid(out.second, nullptr, WNOHANG);  // the CLONE_PARENT child is this process's
  for (int fd : {go[0], go[1], said[0], said[1]}) ::close(fd);
  return out;
}

TEST(WorkerCpuStray, NamesACloneParentChild) {
  const auto [stray, pid] = stray_after(Spawn::kCloneParent);
  if (pid == 0) GTEST_SKIP() << stray;
  EXPECT_NE(stray.find(fmt::format("process {} ", pid)), std::string::npos) << stray;
  EXPECT_NE(stray.find(fmt::format("whose parent is {}", ::getpid())), std::string::npos) << stray;
}

TEST(WorkerCpuStray, NamesADoubleForksGrandchild) {
  const auto [stray, pid] = stray_after(Spawn::kDoubleFork);
  if (pid == 0) GTEST_SKIP() << stray;
  EXPECT_NE(stray.find(fmt::format("process {} ", pid)), std::string::npos) << stray;
}

TEST(WorkerCpuStray, TheWorkersOwnChildIsNoStray) {
  const auto [stray, pid] = stray_after(Spawn::kChild);
  if (pid == 0 && stray.rfind("no cgroup", 0) == 0) GTEST_SKIP() << stray;
  EXPECT_GT(pid, 0);
  EXPECT_EQ(stray, "");
}

}  // namespace
}  // namespace crucible
