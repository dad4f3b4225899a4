// The timing worker and its parent taking turns over a socket (the worker's descriptor 3): the
// parent says when a sample may start, the worker says when its clock stopped and what it read,
// and the parent timestamps both with a clock the worker's plugin cannot reach.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace crucible {

// What the worker says at the end of a sample's timed part: the time since it read "go" and the
// time its clock counted in calls, both by its own clock; its CPU clock over the calls; the calls.
struct TurnDone {
  double window_ms = 0;
  double timed_ms = 0;
  double cpu_ms = 0;
  int64_t calls = 0;
};

// One line from the worker: "done ..." or "ready 0|1" (1: it wants another sample).
struct TurnMessage {
  std::optional<TurnDone> done;
  bool ready = false;
  bool more = false;
};

// Parses one line (without its newline); nullopt for anything else, a worker's line being
// untrusted input.
std::optional<TurnMessage> parse_turn_message(const std::string& line);

// The worker's side, on descriptor 3 (set close-on-exec here, so a compiler it runs does not hold
// the parent's socket open).
class TurnChannel {
 public:
  TurnChannel();
  // Blocks until the parent says "go" (true, the window starts: see window_ms) or "quit" (false);
  // throws Error when the parent is gone.
  bool wait_go();
  double window_ms() const;  // since wait_go() returned true, by the worker's raw clock
  void done(const TurnDone& d);
  void ready(bool more);

 private:
  void send(const std::string& line);
  int fd_ = 3;
  int64_t go_ns_ = 0;
};

}  // namespace crucible
