// The timing audit's input sets beyond the model's own (set A): set B, drawn from --seed, and the
// inputs of every timed call, each its own, made from set B and a secret the timed plugin never
// holds. The parent makes them for timing workers (call_input_region.h), the reference worker and
// a worker timing in one process here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

namespace crucible {

// The model with every floating input that has a constant recipe (ones(), zeros(), full(), file())
// drawing randn instead, so that the audit's other sets differ from A even for a model that feeds
// constants.
Graph with_varied_inputs(const Graph& g);

// Input set B of the model (`varied` from with_varied_inputs) for --seed `seed`.
std::vector<Tensor> second_input_set(const Graph& varied, uint64_t seed);

// The inputs of timed call `call` (its id: see turn_channel.h) for `secret`: each input of set B
// rotated by a secret offset and eight pairs of its elements swapped (so indices stay valid and
// every call's contents differ), then every floating element's magnitude made smaller by a secret
// amount of up to 2^-5 of it, keeping its sign (so values stay in every op's domain of the
// kinds x > 0, |x| <= 1). A remembered output is a wrong one, and one remembered for set B and
// rotated is wrong almost everywhere, past any tolerance.
std::vector<Tensor> call_input_set(const std::vector<Tensor>& set_b, uint64_t secret,
                                   uint64_t call);
// The same, written into `into` (made like `set_b` when empty).
void fill_call_inputs(const std::vector<Tensor>& set_b, uint64_t secret, uint64_t call,
                      std::vector<Tensor>& into);

// How a block of calls' inputs is written: by `threads` threads, and `past_caches` (non-temporal
// stores, which spare reading each line they replace) for a block larger than the caches.
struct FillWay {
  int threads = 1;
  bool past_caches = false;
};

// Calls' inputs laid out in one block of memory: call i's at slot i, input k at offsets()[k] of
// it, each at a 64-byte boundary.
class CallInputLayout {
 public:
  explicit CallInputLayout(const std::vector<Tensor>& set_b);
  size_t slot_bytes() const { return slot_bytes_; }
  const std::vector<size_t>& offsets() const { return offsets_; }
  // The most calls a sample may have: their inputs within kMaxCallInputBytes.
  int64_t max_calls() const;
  // Writes the inputs of calls first_call .. first_call + calls - 1 into slots 0 .. calls - 1 of
  // `block` (64-byte aligned), as call_input_set makes them, the way `way` says.
  void fill(const std::vector<Tensor>& set_b, uint64_t secret, uint64_t first_call, int64_t calls,
            std::byte* block, FillWay way) const;
  // Tensors over slot `i` of `block` (views: they keep `block` alive).
  std::vector<Tensor> views(const std::vector<Tensor>& set_b, const std::shared_ptr<Storage>& block,
                            int64_t i) const;

 private:
  std::vector<size_t> offsets_;
  size_t slot_bytes_ = 0;
};

// A sample's calls' inputs take at most this much, and it has at most kMaxCallsPerSample calls.
inline constexpr size_t kMaxCallInputBytes = size_t{512} << 20;
inline constexpr int64_t kMaxCallsPerSample = 1'000'000;

// A secret from the OS's entropy (getrandom): the call inputs' and the verified elements' seeds.
uint64_t os_secret();

}  // namespace crucible
