// Where a timing worker's calls find their inputs: memory the parent writes before each sample and
// the worker maps read-only (descriptor 4), so the secret the inputs come from never enters the
// process that runs the plugin, and the worker's main thread makes nothing between samples.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "crucible/core/tensor.h"
#include "input_sets.h"

namespace crucible {

// The worker's descriptor that holds the region.
inline constexpr int kCallInputFd = 4;

// The parent's side: a sealed memfd of layout.max_calls() slots (its pages made as they are
// written). No process can write it but through this mapping, shrink or grow it.
class CallInputRegion {
 public:
  explicit CallInputRegion(std::vector<Tensor> set_b);  // throws Error
  ~CallInputRegion();
  CallInputRegion(const CallInputRegion&) = delete;
  CallInputRegion& operator=(const CallInputRegion&) = delete;

  int fd() const { return fd_; }
  int64_t capacity() const { return capacity_; }
  // Writes the inputs of calls 0 .. calls-1 of round `round` (ids: turn_channel.h); throws Error
  // past the capacity.
  void write(uint64_t secret, int64_t round, int64_t calls);

 private:
  std::vector<Tensor> set_b_;
  CallInputLayout layout_;
  int64_t capacity_ = 0;
  int fd_ = -1;
  std::byte* map_ = nullptr;
  size_t bytes_ = 0;
};

// The worker's side: the region on `fd`, mapped read-only, as tensors of each call's inputs.
class CallInputView {
 public:
  CallInputView(int fd, const std::vector<Tensor>& set_b);  // throws Error
  int64_t capacity() const { return capacity_; }
  std::vector<Tensor> call(int64_t i) const;  // views into the mapping; throws past the capacity

 private:
  std::vector<Tensor> shapes_;  // set B: its dtypes and shapes
  CallInputLayout layout_;
  std::shared_ptr<Storage> block_;
  int64_t capacity_ = 0;
};

}  // namespace crucible
