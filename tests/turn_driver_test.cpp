// The parent's judgement of timing workers that take turns (turn_driver.h): a worker's line is
// untrusted input, and a clock that disagrees with the parent's, CPU beyond the machine, threads
// moved by someone else and work outside the samples each fail a passing result; waits for a CPU
// do not.
#include "turn_driver.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "crucible/core/error.h"
#include "turn_channel.h"

namespace crucible {
namespace {

using reports::Status;

// A socket pair whose second end stands at descriptor 3, the worker's end of a turn channel, for
// the life of the object (what was at 3 is put back).
struct ChannelOnDescriptor3 {
  int sv[2] = {-1, -1};
  int saved = -1;
  ChannelOnDescriptor3() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    saved = ::dup(3);
    EXPECT_EQ(::dup2(sv[1], 3), 3);
  }
  ~ChannelOnDescriptor3() {
    ::close(sv[0]);
    ::close(sv[1]);
    if (saved >= 0) {
      ::dup2(saved, 3);
      ::close(saved);
    } else {
      ::close(3);
    }
  }
};

// The worker's side on descriptor 3 (a socket pair's end put there for the test): "p" carries the
// calls of the sample the parent chose; anything else is an error, not a guess.
TEST(TurnChannel, ThePrepareWordCarriesTheSamplesCalls) {
  ChannelOnDescriptor3 pair;
  const int* sv = pair.sv;
  auto say = [&](const char* words) {
    ASSERT_EQ(::write(sv[0], words, std::strlen(words)), static_cast<ssize_t>(std::strlen(words)));
  };
  {
    TurnChannel channel;
    int64_t calls = 0;
    say("p12\nq");
    EXPECT_TRUE(channel.wait_prepare(calls));
    EXPECT_EQ(calls, 12);
    EXPECT_FALSE(channel.wait_prepare(calls));
    for (const char* bad : {"p\n", "p0\n", "px\n", "p2000000\n", "p123456789\n", "x"}) {
      say(bad);
      EXPECT_THROW(channel.wait_prepare(calls), Error) << bad;
      // What a refused word left unread is drained before the next.
      char rest[32];
      while (::recv(sv[1], rest, sizeof rest, MSG_DONTWAIT) > 0) {
      }
    }
  }
}

// Any process of the user may stop a worker (SIGSTOP) to slow its samples; only SIGCONT ends the
// stop, and the worker's next "done" names who sent it (its parent's, after reading, aside).
TEST(TurnChannel, ASigcontFromAnotherProcessIsNamedInTheNextDone) {
  ChannelOnDescriptor3 pair;
  const int* sv = pair.sv;
  auto next_done = [&] {
    char line[256] = {};
    const ssize_t n = ::recv(sv[0], line, sizeof line - 1, 0);
    EXPECT_GT(n, 0);
    auto m =
        parse_turn_message(std::string(line, static_cast<size_t>(std::max<ssize_t>(0, n - 1))));
    EXPECT_TRUE(m && m->done) << line;
    return m && m->done ? m->done->continued_by : -99;
  };
  {
    TurnChannel channel;
    TurnDone d{1, 1, 1, 1, 0, 1};
    channel.done(d);
    EXPECT_EQ(next_done(), 0);
    const pid_t self = ::getpid();
    const pid_t child = ::fork();
    if (child == 0) {
      ::kill(self, SIGCONT);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    channel.done(d);
    EXPECT_EQ(next_done(), child);
    channel.done(d);  // said once
    EXPECT_EQ(next_done(), 0);
  }
  ::signal(SIGCONT, SIG_DFL);
}

TEST(TurnChannel, ParsesItsTwoLinesAndNothingElse) {
  auto ready = parse_turn_message("ready 1 7");
  ASSERT_TRUE(ready);
  EXPECT_TRUE(ready->ready && ready->more);
  EXPECT_EQ(ready->calls, 7);
  auto prepared = parse_turn_message("prepared");
  ASSERT_TRUE(prepared);
  EXPECT_TRUE(prepared->prepared && !prepared->ready && !prepared->done);
  auto done = parse_turn_message("done 1.5 1.25 2 40 140737488355328 80 0");
  ASSERT_TRUE(done && done->done);
  EXPECT_EQ(done->done->calls, 40);
  EXPECT_EQ(done->done->entries, 80);
  EXPECT_EQ(done->done->table, 140737488355328u);
  EXPECT_DOUBLE_EQ(done->done->timed_ms, 1.25);
  EXPECT_EQ(done->done->continued_by, 0);
  auto continued = parse_turn_message("done 1.5 1.25 2 40 140737488355328 80 4242");
  ASSERT_TRUE(continued && continued->done);
  EXPECT_EQ(continued->done->continued_by, 4242);
  // A table that is not a whole number of outputs per call, or has none, is a broken word too.
  for (const char* bad : {"",
                          "ready",
                          "ready 1",
                          "ready 2 1",
                          "ready 1 0",
                          "ready 1 x",
                          "ready 1 2000000",
                          "done 1 2 3",
                          "done 1 2 3 0 1 1 0",
                          "done -1 0.5 1 3 1 3 0",
                          "done nan 1 1 1 1 1 0",
                          "done inf 1 1 1 1 1 0",
                          "go",
                          "done 1 1 1 1 1 1 0 extra",
                          "done 1 1 1 1 1 1",
                          "done 1 1 1 1 1 1 -2",
                          "done 1 1 1 1 1 1 x",
                          "READY 1 1",
                          "done 1 1 1 4 1 6 0",
                          "done 1 1 1 4 1 2 0",
                          "done 1 1 1 4 1 -4 0",
                          "done 1 1 1 1 1 5000 0",
                          "prepared 1",
                          "start"}) {
    EXPECT_FALSE(parse_turn_message(bad)) << bad;
  }
}

// A record of `n` samples of 5 ms seen from outside, each window `inside` ms by the worker's clock.
TurnRecord record(int n, double inside, double wait = 0) {
  TurnRecord rec;
  reports::ResultRecord r = reports::make_result("s", "m", "b", "performance", 1);
  r.status = Status::kPass;
  r.audit = "bitwise";
  rec.results.push_back(r);
  for (int i = 0; i < n; ++i) {
    TurnWindow w;
    w.outside_ms = 5.0;
    w.inside = {inside, inside - 0.01, inside, 10, 0, 10};
    w.wait_ms = wait;
    rec.windows.push_back(w);
  }
  rec.cpu_how = "test";
  return rec;
}

reports::ResultRecord judged(TurnRecord rec) {
  std::vector<TurnRecord> v{std::move(rec)};
  judge_turns(v);
  return v[0].results[0];
}

TEST(TurnDriver, AnHonestWorkerPasses) {
  const auto honest = judged(record(10, 4.97));
  EXPECT_EQ(honest.status, Status::kPass);
  EXPECT_FALSE(honest.noisy || honest.speedup_withheld) << honest.noise_reason;
  // A parent or worker that waited for a CPU sees a longer window: not a lying clock.
  EXPECT_EQ(judged(record(10, 3.0, 2.0)).status, Status::kPass);
}

// A clock that runs fast is said and kept out of every speed-up, not failed: no gap is proof,
// since a VM's vCPUs taken away make honest gaps as large.
void expect_said_fast(const reports::ResultRecord& r) {
  EXPECT_EQ(r.status, Status::kPass) << r.error;
  EXPECT_TRUE(r.noisy);
  EXPECT_TRUE(r.speedup_withheld);
  EXPECT_NE(r.noise_reason.find("runs fast"), std::string::npos) << r.noise_reason;
  EXPECT_NE(r.noise_reason.find("no speed-up from it"), std::string::npos) << r.noise_reason;
}

TEST(TurnDriver, AClockThatRunsFastIsSaidAndOneThatRunsSlowFails) {
  expect_said_fast(judged(record(10, 5.0 / 4)));  // a quarter speed: calls look 4x faster
  const auto slow = judged(record(10, 6.0));      // more time than passed: a baseline made slower
  EXPECT_EQ(slow.status, Status::kFailAudit);
  EXPECT_NE(slow.error.find("runs slow"), std::string::npos) << slow.error;
  // A clock that lies in most samples but not all.
  TurnRecord most = record(10, 5.0 / 4);
  for (int k = 0; k < 3; ++k) most.windows[k].inside.timed_ms = 4.96;
  for (int k = 0; k < 3; ++k) most.windows[k].inside.window_ms = 4.97;
  expect_said_fast(judged(most));
  // A window as long as the parent's, but the calls counted in it a quarter of it: the worker's
  // window holds nothing but its calls, so the parent's clock bounds the calls' time.
  TurnRecord split = record(10, 4.97);
  for (TurnWindow& w : split.windows) w.inside.timed_ms = 5.0 / 4;
  expect_said_fast(judged(split));
  // CI's host: an honest eager's 2 samples of 6.7 ms were 2.7 ms shorter by its clock (vCPUs
  // taken away at the messages), which failed it as a fast clock before.
  TurnRecord ci = record(2, 3.98);
  for (TurnWindow& w : ci.windows) w.outside_ms = 6.69;
  expect_said_fast(judged(ci));
  // Samples a fifth shorter by its clock in the median but not in every sample: noisy, with its
  // speed-up (a lie in fewer than most samples barely moves the median).
  TurnRecord stolen = record(10, 4.0);
  for (int k = 0; k < 3; ++k) stolen.windows[k].inside.timed_ms = 4.96;
  for (int k = 0; k < 3; ++k) stolen.windows[k].inside.window_ms = 4.97;
  const auto n = judged(stolen);
  EXPECT_EQ(n.status, Status::kPass) << n.error;
  EXPECT_TRUE(n.noisy);
  EXPECT_FALSE(n.speedup_withheld);
  // Calls timed longer than the window they were timed in.
  TurnRecord inner = record(10, 4.97);
  inner.windows[3].inside.timed_ms = 4.99;
  EXPECT_EQ(judged(inner).status, Status::kFailAudit);
}

TEST(TurnDriver, CpuBeyondTheMachineFails) {
  TurnRecord rec = record(10, 4.97);
  rec.windows[0].inside.cpu_ms = 5.0 * 1000;  // a thousand CPUs' worth
  const auto r = judged(rec);
  EXPECT_EQ(r.status, Status::kFailAudit);
  EXPECT_NE(r.error.find("more than the machine has"), std::string::npos) << r.error;
}

TEST(TurnDriver, WorkOutsideItsSamplesFailsAndDisturbanceIsNamed) {
  TurnRecord rec = record(10, 4.97);
  rec.idle_cpu_ms = 2.4;  // 50 ms timed: the allowance is 2.5 ms
  EXPECT_EQ(judged(rec).status, Status::kPass);
  rec.idle_cpu_ms = 10;
  rec.idle_windows = 10;
  rec.idle_windows_used = 4;
  rec.idle_most_ms = 7;
  const auto r = judged(rec);
  EXPECT_EQ(r.status, Status::kFailAudit);
  EXPECT_NE(r.error.find("10.0 ms while other backends were timed, in 4 of their 10 samples, at "
                         "most 7.00 ms in one, 7.00 ms of it not charged"),
            std::string::npos)
      << r.error;
  // One event in one of the others' samples (CI's honest eager: 3.5 ms in 1 of 6) is not
  // charged; the same in every sample is.
  rec.idle_cpu_ms = 3.5;
  rec.idle_windows = 6;
  rec.idle_windows_used = 1;
  rec.idle_most_ms = 3.5;
  EXPECT_EQ(judged(rec).status, Status::kPass) << judged(rec).error;
  rec.idle_cpu_ms = 6 * 3.5;
  rec.idle_windows_used = 6;
  EXPECT_EQ(judged(rec).status, Status::kFailAudit);
  // Nor past 2 windows: with fewer, every window is charged.
  rec.idle_cpu_ms = 3.5;
  rec.idle_windows = 2;
  rec.idle_windows_used = 1;
  EXPECT_EQ(judged(rec).status, Status::kFailAudit);
  // Work while its inputs were written (ahead of "go") counts with it.
  rec.idle_windows = 10;
  rec.idle_cpu_ms = 1.5;
  rec.idle_most_ms = 0.5;
  rec.inputs_cpu_ms = 2.0;
  const auto w = judged(rec);
  EXPECT_EQ(w.status, Status::kFailAudit);
  EXPECT_NE(w.error.find("2.0 ms while the harness wrote its calls' inputs"), std::string::npos)
      << w.error;
  TurnRecord disturbed = record(10, 4.97);
  disturbed.disturbed["hog"] = 20;
  const auto d = judged(disturbed);
  EXPECT_EQ(d.status, Status::kPass);  // disturbed, not guilty: noisy, and by whom
  EXPECT_TRUE(d.noisy);
  EXPECT_EQ(d.disturbed_by, "hog");
}

TEST(TurnDriver, AWorkerStoppedFromOutsideGetsNoSpeedupAndItsStopperFails) {
  std::vector<TurnRecord> v{record(10, 4.97), record(10, 4.97), record(10, 4.97)};
  v[0].results[0].backend = "eager";
  v[0].continued_by = 4242;
  v[0].continued_by_backend = "attacker";
  v[1].results[0].backend = "attacker";
  v[2].results[0].backend = "bystander";
  judge_turns(v);
  const auto& eager = v[0].results[0];
  EXPECT_EQ(eager.status, Status::kPass) << eager.error;
  EXPECT_TRUE(eager.noisy && eager.speedup_withheld);
  EXPECT_NE(eager.noise_reason.find("stopped and continued by process 4242, of backend "
                                    "attacker's worker; no speed-up"),
            std::string::npos)
      << eager.noise_reason;
  EXPECT_EQ(v[1].results[0].status, Status::kFailAudit);
  EXPECT_NE(v[1].results[0].error.find("stopped and continued backend eager's timing worker"),
            std::string::npos)
      << v[1].results[0].error;
  EXPECT_EQ(v[2].results[0].status, Status::kPass);
  EXPECT_FALSE(v[2].results[0].noisy);
  // A worker that continues itself (to excuse its own work outside the clock) fails as a stopper.
  std::vector<TurnRecord> self{record(10, 4.97)};
  self[0].results[0].backend = "attacker";
  self[0].continued_by = 4243;
  self[0].continued_by_backend = "attacker";
  self[0].idle_cpu_ms = 100;
  judge_turns(self);
  EXPECT_EQ(self[0].results[0].status, Status::kFailAudit);
  EXPECT_NE(self[0].results[0].error.find("continued backend attacker's"), std::string::npos)
      << self[0].results[0].error;
  // A sender whose pid the kernel did not vouch for (sigqueue) is named as such.
  TurnRecord hidden = record(10, 4.97);
  hidden.continued_by = -1;
  const auto h = judged(hidden);
  EXPECT_NE(h.noise_reason.find("a process that hid its pid"), std::string::npos) << h.noise_reason;
  // Such a continue excuses no work outside the clock: it may have been the worker's own.
  hidden.idle_cpu_ms = 100;
  const auto hw = judged(hidden);
  EXPECT_EQ(hw.status, Status::kFailAudit);
  EXPECT_NE(hw.error.find("work outside the clock"), std::string::npos) << hw.error;
  v[0].idle_cpu_ms = 100;  // eager, continued by another backend's worker: not blamed
  v[0].results[0].status = Status::kPass;
  v[0].results[0].noise_reason.clear();
  judge_turns(v);
  EXPECT_EQ(v[0].results[0].status, Status::kPass) << v[0].results[0].error;
}

TEST(TurnDriver, ThreadsMovedOrReprioritizedFailAndAProtocolBreakFails) {
  TurnRecord moved = record(10, 4.97);
  moved.placement_change = "thread 7: nice 0, CPUs 0-1 -> nice 19, CPUs 0";
  const auto r = judged(moved);
  EXPECT_EQ(r.status, Status::kFailAudit);
  EXPECT_NE(r.error.find("nice 19"), std::string::npos) << r.error;
  TurnRecord broke = record(10, 4.97);
  broke.protocol_error = "it said 'hello'";
  EXPECT_EQ(judged(broke).status, Status::kFailAudit);
  // Outputs the parent could not read out of the stopped worker (a table that lies, a process
  // made undumpable) leave its calls unverified: that fails too.
  TurnRecord unread = record(10, 4.97);
  unread.read_error = "sample 2: output 0 of call 2097152 does not read at 0x10";
  const auto u = judged(unread);
  EXPECT_EQ(u.status, Status::kFailAudit);
  EXPECT_NE(u.error.find("could not read"), std::string::npos) << u.error;
  // Samples in its report the parent never saw.
  EXPECT_EQ(judged(record(0, 0)).status, Status::kFailAudit);
  // Unaudited timing is judged by none of this.
  TurnRecord off = record(10, 5.0 / 4);
  off.results[0].audit = std::string(reports::kAuditOff);
  EXPECT_EQ(judged(off).status, Status::kPass);
}

}  // namespace
}  // namespace crucible
