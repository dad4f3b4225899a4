// The turn protocol's lines and the worker's side of it (see turn_channel.h).
#include "turn_channel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "crucible/core/error.h"
#include "raw_clock.h"

namespace crucible {

std::optional<TurnMessage> parse_turn_message(const std::string& line) {
  std::istringstream in(line);
  std::string kind;
  in >> kind;
  TurnMessage m;
  if (kind == "prepared") {
    m.prepared = true;
  } else if (kind == "ready") {
    int more = -1;
    if (!(in >> more >> m.calls) || (more != 0 && more != 1) || m.calls < 1 ||
        m.calls > kMaxTurnCalls)
      return std::nullopt;
    m.ready = true;
    m.more = more == 1;
  } else if (kind == "done") {
    TurnDone d;
    if (!(in >> d.window_ms >> d.timed_ms >> d.cpu_ms >> d.calls >> d.table >> d.entries >>
          d.continued_by) ||
        d.continued_by < -1 || d.continued_by > std::numeric_limits<pid_t>::max())
      return std::nullopt;
    for (double v : {d.window_ms, d.timed_ms, d.cpu_ms})
      if (!std::isfinite(v) || v < 0) return std::nullopt;
    // The table: a whole number of outputs per call (graphs of more than 4096 outputs aside).
    if (d.calls < 1 || d.entries < d.calls || d.entries % d.calls != 0 ||
        d.entries / d.calls > 4096)
      return std::nullopt;
    m.done = d;
  } else {
    return std::nullopt;
  }
  std::string rest;
  if (in >> rest) return std::nullopt;
  return m;
}

namespace {

pid_t g_parent = 0;
std::atomic<int64_t> g_continued_by{0};

// The kernel fills si_pid for kill() and tgkill(); sigqueue() lets the sender write it.
void note_continue(int, siginfo_t* info, void*) {
  const bool vouched = info->si_code == SI_USER || info->si_code == SI_TKILL;
  if (vouched && info->si_pid == g_parent) return;  // the parent, after reading the outputs
  g_continued_by.store(vouched ? info->si_pid : -1);
}

}  // namespace

TurnChannel::TurnChannel() {
  if (::fcntl(fd_, F_SETFD, FD_CLOEXEC) != 0)
    throw Error(fmt::format("--turns: descriptor 3 is not open: {}", strerror(errno)));
  g_parent = ::getppid();
  struct sigaction sa {};
  sa.sa_sigaction = note_continue;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGCONT, &sa, nullptr);
  for (const int stop : {SIGTSTP, SIGTTIN, SIGTTOU}) ::signal(stop, SIG_IGN);
}

char TurnChannel::read_word() {
  char c = 0;
  ssize_t n;
  do {
    n = ::read(fd_, &c, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) throw Error("--turns: the parent is gone");
  return c;
}

void TurnChannel::expect(char want) {
  const char c = read_word();
  if (c != want) throw Error(fmt::format("--turns: word {:d} from the parent, not '{}'", c, want));
}

bool TurnChannel::wait_prepare(int64_t& calls) {
  const char c = read_word();
  if (c == 'q') return false;
  if (c != 'p') throw Error(fmt::format("--turns: unknown word {:d} from the parent", c));
  std::string digits;
  for (char d = read_word(); d != '\n'; d = read_word()) {
    if (d < '0' || d > '9' || digits.size() > 7)
      throw Error("--turns: the parent's 'p' carries no number of calls");
    digits += d;
  }
  calls = digits.empty() ? 0 : std::stoll(digits);
  if (calls < 1 || calls > kMaxTurnCalls)
    throw Error(fmt::format("--turns: a sample of {} calls", calls));
  return true;
}

void TurnChannel::wait_go() {
  expect('g');
  go_ns_ = raw_monotonic_ns();
}

void TurnChannel::wait_read() { expect('a'); }

void TurnChannel::prepared() { send("prepared\n"); }

double TurnChannel::window_ms() const {
  return static_cast<double>(raw_monotonic_ns() - go_ns_) / 1e6;
}

void TurnChannel::done(const TurnDone& d) {
  send(fmt::format("done {:.9g} {:.9g} {:.9g} {} {} {} {}\n", d.window_ms, d.timed_ms, d.cpu_ms,
                   d.calls, d.table, d.entries, g_continued_by.exchange(0)));
}

void TurnChannel::ready(bool more, int64_t calls) {
  send(fmt::format("ready {} {}\n", more ? 1 : 0, calls));
}

void TurnChannel::send(const std::string& line) {
  size_t at = 0;
  while (at < line.size()) {
    const ssize_t n = ::send(fd_, line.data() + at, line.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("--turns: the parent is gone");
    at += static_cast<size_t>(n);
  }
}

}  // namespace crucible
