// The timing worker and its parent taking turns over a socket (the worker's descriptor 3): the
// parent says when a sample may start, the worker says when its clock stopped and what it read,
// and the parent timestamps both with a clock the worker's plugin cannot reach.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace crucible {

// The most calls a sample may have (the parent chooses each sample's).
inline constexpr int64_t kMaxTurnCalls = 1'000'000;

// Call `i` of round `r` has id r * kCallIdStride + i: its inputs are call_input_set(B, secret,
// id), the same in every backend's worker, so the reference's call serves every backend's.
inline constexpr int64_t kCallIdStride = int64_t{1} << 20;

// One output of one timed call, as the worker's table lists it for the parent to read from the
// worker's memory (untrusted: every field is checked before anything is read).
struct CallOutput {
  uint64_t call = 0;  // the call's id: its inputs are call_input_set(B, secret, call)
  uint64_t addr = 0;  // of its first element; the output is contiguous
  uint64_t nbytes = 0;
  int32_t dtype = 0;  // a DType
  int32_t ndim = 0;
  int64_t dims[8] = {};
};

// What the worker says at the end of a sample's timed part: the time since it read "go" and the
// time its clock counted in calls, both by its own clock; its CPU clock over the calls; the calls;
// and where its table of the calls' outputs is (`entries` CallOutput at `table`, call by call).
struct TurnDone {
  double window_ms = 0;
  double timed_ms = 0;
  double cpu_ms = 0;
  int64_t calls = 0;
  uint64_t table = 0;
  int64_t entries = 0;
  // The process that continued this worker after a stop since its last "done", when that was not
  // its parent reading its outputs: 0 for none, -1 for a sender whose pid the kernel did not vouch
  // for (sigqueue). A stop it did not see coming slowed its samples.
  int64_t continued_by = 0;
};

// One line from the worker: "prepared" (its next sample's inputs made and its bookkeeping done),
// "done ..." or "ready 0|1 calls" (1: it wants another sample, of that many calls).
struct TurnMessage {
  bool prepared = false;
  std::optional<TurnDone> done;
  bool ready = false;
  bool more = false;
  int64_t calls = 0;
};

// Parses one line (without its newline); nullopt for anything else, a worker's line being
// untrusted input.
std::optional<TurnMessage> parse_turn_message(const std::string& line);

// The worker's side, on descriptor 3 (set close-on-exec here, so a compiler it runs does not hold
// the parent's socket open). It ignores the stop signals a process may ignore and notes who sends
// it SIGCONT (TurnDone::continued_by): any process of its user may stop it with SIGSTOP, and
// only a SIGCONT ends that.
class TurnChannel {
 public:
  TurnChannel();
  // The parent's words, in this order per sample: "p<calls>\n" (prepare the next sample, of that
  // many calls, 1 to kMaxTurnCalls: true; "q" instead: false, the timing is over), "g" (go: the
  // window starts, see window_ms), "a" (after done(): the parent has read the outputs it verifies,
  // which must stay as they are until then). Each throws Error when the parent is gone or says
  // another word.
  bool wait_prepare(int64_t& calls);
  void wait_go();
  void wait_read();
  void prepared();
  double window_ms() const;      // since wait_go() returned, by the worker's raw clock
  void done(const TurnDone& d);  // continued_by is the channel's own
  void ready(bool more, int64_t calls);

 private:
  void send(const std::string& line);
  char read_word();
  void expect(char want);
  int fd_ = 3;
  int64_t go_ns_ = 0;
};

}  // namespace crucible
