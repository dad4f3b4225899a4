// The hidden probe schedule (see probe_schedule.h).
#include "probe_schedule.h"

#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <vector>

namespace crucible {

namespace {
// Keys the confirmation rounds' draw apart from the call positions (keyed 2 + backend index).
constexpr uint64_t kConfirmTag = 1ull << 40;

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

ProbeSchedule::ProbeSchedule(uint64_t secret, int repeat)
    : secret_(secret),
      repeat_(std::max(repeat, 0)),
      first_block_fresh_(
          std::min(repeat_, std::max(kMinFresh, static_cast<int>(std::lround(kRate * repeat_))))) {}

uint64_t ProbeSchedule::hash(uint64_t a, uint64_t b) const {
  return mix(secret_ ^ mix(a * 0x9e3779b97f4a7c15ULL + b + 1));
}

bool ProbeSchedule::fresh_round(int round) const {
  if (round < 0) return false;
  // The first round always: a backend that remembers until it meets a new content and then turns
  // honest is honest for the whole timing, and its numbers are true.
  if (round == 0) return true;
  if (round >= repeat_) return static_cast<double>(hash(round, 0) >> 11) * 0x1p-53 < kRate;
  // Rank the first block's rounds by a keyed hash; the lowest first_block_fresh_ are fresh.
  int below = 0;
  const uint64_t mine = hash(round, 1);
  for (int r = 0; r < repeat_; ++r) {
    const uint64_t h = hash(r, 1);
    if (h < mine || (h == mine && r < round)) ++below;
  }
  return below < first_block_fresh_;
}

bool ProbeSchedule::confirm_round_is_fresh(int round) const {
  return static_cast<double>(hash(round, kConfirmTag) >> 11) * 0x1p-53 < kConfirmRate;
}

int64_t ProbeSchedule::call_index(int round, size_t backend, int64_t calls) const {
  if (calls <= 1) return 0;
  return static_cast<int64_t>(hash(round, 2 + backend) % static_cast<uint64_t>(calls));
}

uint64_t os_secret() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) {
    v = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return v;
}

}  // namespace crucible
