// Where the audit's fresh inputs hide among the timed calls: which rounds of samples carry a call
// on inputs never seen before, and at which call of each backend's sample. Drawn from a secret
// taken from the OS per run (not from --seed), so a plugin cannot replay it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace crucible {

class ProbeSchedule {
 public:
  // Round 0, then of the first `repeat` rounds a random kMinFresh (or kRate of them, if more)
  // carry a fresh call; every later round does with probability kRate.
  static constexpr int kMinFresh = 3;
  static constexpr double kRate = 0.2;

  ProbeSchedule(uint64_t secret, int repeat);

  bool fresh_round(int round) const;
  // Rounds added to confirm a suspicion (see timing_job.cpp): each carries a fresh call with
  // probability kConfirmRate, so those without one grow the baseline too.
  static constexpr double kConfirmRate = 0.5;
  bool confirm_round_is_fresh(int round) const;
  // The call of `backend`'s sample of `calls` calls in `round` that gets the fresh inputs.
  int64_t call_index(int round, size_t backend, int64_t calls) const;
  uint64_t secret() const { return secret_; }

 private:
  uint64_t hash(uint64_t a, uint64_t b) const;
  uint64_t secret_;
  int repeat_;
  int first_block_fresh_;
};

// A secret from the OS's entropy (getrandom), for ProbeSchedule and the fresh inputs' seeds.
uint64_t os_secret();

}  // namespace crucible
