// The parent reading a timed call's outputs out of its timing worker: the worker is stopped
// (SIGSTOP) the moment it says "done", so nothing in it can finish or change an output after its
// clock stopped, and the sampled elements are read from its memory (process_vm_readv).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "crucible/core/tensor.h"
#include "turn_channel.h"

namespace crucible {

// Stops every thread of `pid` for its lifetime, and lets them go on after.
class StoppedWorker {
 public:
  explicit StoppedWorker(pid_t pid);
  ~StoppedWorker();
  StoppedWorker(const StoppedWorker&) = delete;
  StoppedWorker& operator=(const StoppedWorker&) = delete;
  // "" once every thread is stopped, else why not (gone, or a thread did not stop in time).
  const std::string& error() const { return error_; }

 private:
  pid_t pid_;
  std::string error_;
};

// The outputs of the call at `index` in a done sample's table (outputs_per_call rows each), read
// from `pid`; "" or why they do not read (the table is the worker's word: every row is checked).
std::string read_call_table(pid_t pid, const TurnDone& done, int64_t index,
                            std::vector<CallOutput>& rows);

// The elements of output `output` of a row at sampled_elements(secret, row.call, output, numel),
// as a 1-d tensor; "" or why not.
std::string read_sampled_output(pid_t pid, const CallOutput& row, size_t output, uint64_t secret,
                                Tensor& out);

}  // namespace crucible
