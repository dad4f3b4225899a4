// Every timed call's own inputs and the parent's read of its outputs: call inputs come from set
// B's values (shrunk by a secret amount) but differ from every other call's, the parent's region
// of them is one the worker cannot write, the sampled elements are the same wherever they are
// drawn, and a stopped child's memory reads back (and a table that lies does not).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "call_input_region.h"
#include "call_reader.h"
#include "crucible/core/error.h"
#include "input_sets.h"
#include "output_digest.h"
#include "output_sample.h"

namespace crucible {
namespace {

// Set B of a test: floats whose magnitudes lie 19% apart (so each element of a call's input names
// the one it came from, shrinking by at most 3.2%), with both signs; indices; a scalar.
std::vector<Tensor> set_b(int64_t n) {
  std::vector<double> x, idx;
  for (int64_t i = 0; i < n; ++i)
    x.push_back((i % 2 ? -1.0 : 1.0) * std::exp2(static_cast<double>(i) / 4 - 8));
  for (int64_t i = 0; i < 8; ++i) idx.push_back(static_cast<double>(i % 5));
  return {Tensor::from_doubles(DType::kF32, {n}, x), Tensor::from_doubles(DType::kI64, {8}, idx),
          Tensor::from_doubles(DType::kF32, {1}, std::vector<double>{3.0})};
}

// The element of `from` that `y` was made from: same sign, |y| in [(1 - 2^-5)|x|, |x|]; -1 if none.
int64_t source_of(double y, const std::vector<double>& from) {
  for (size_t k = 0; k < from.size(); ++k) {
    const double x = from[k];
    if (std::signbit(x) == std::signbit(y) && std::abs(y) <= std::abs(x) &&
        std::abs(y) >= std::abs(x) * (1 - 1.0 / 32))
      return static_cast<int64_t>(k);
  }
  return -1;
}

TEST(CallInputs, ComeFromSetBShrunkAndDifferFromEveryOtherCall) {
  const std::vector<Tensor> b = set_b(64);
  const std::vector<double> floats = b[0].to_doubles();
  std::set<uint64_t> seen;
  int64_t elements = 0, changed = 0;
  for (uint64_t call = 0; call < 3000; ++call) {
    const std::vector<Tensor> in = call_input_set(b, 42, call);
    ASSERT_EQ(in.size(), b.size());
    for (size_t k = 0; k < b.size(); ++k) ASSERT_EQ(in[k].shape(), b[k].shape());
    // Integers: a permutation of B's values.
    std::vector<double> got = in[1].to_doubles(), want = b[1].to_doubles();
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    ASSERT_EQ(got, want) << "call " << call;
    // Floats: each from one element of B, each of B's used once, almost all of them changed.
    std::vector<int64_t> sources;
    for (const double y : in[0].to_doubles()) {
      const int64_t from = source_of(y, floats);
      ASSERT_GE(from, 0) << "call " << call << ": " << y << " comes from no element of B";
      sources.push_back(from);
      ++elements;
      if (y != floats[static_cast<size_t>(from)]) ++changed;
    }
    std::sort(sources.begin(), sources.end());
    ASSERT_EQ(std::unique(sources.begin(), sources.end()), sources.end()) << "call " << call;
    EXPECT_TRUE(seen.insert(digest(in[0])).second) << "call " << call << " repeats an earlier one";
  }
  // An output remembered for B (or any other call) and moved into place is wrong almost
  // everywhere: only elements whose secret amount was zero kept their value.
  EXPECT_GT(changed, elements * 99 / 100);
  // The same call, the same inputs; another secret, others.
  EXPECT_EQ(digest(call_input_set(b, 42, 7)[0]), digest(call_input_set(b, 42, 7)[0]));
  EXPECT_NE(digest(call_input_set(b, 43, 7)[0]), digest(call_input_set(b, 42, 7)[0]));
  // Filling buffers in place, or a block by its layout, gives what a fresh set does.
  std::vector<Tensor> into;
  fill_call_inputs(b, 42, 9, into);
  fill_call_inputs(b, 42, 11, into);
  EXPECT_EQ(digest_all(into), digest_all(call_input_set(b, 42, 11)));
  const CallInputLayout layout(b);
  EXPECT_EQ(layout.slot_bytes(), 256u + 64 + 64);  // each input at a 64-byte boundary
  auto block = std::make_shared<Storage>(3 * layout.slot_bytes());
  layout.fill(b, 42, 11, 1, static_cast<std::byte*>(block->data()) + 2 * layout.slot_bytes(), {});
  EXPECT_EQ(digest_all(layout.views(b, block, 2)), digest_all(call_input_set(b, 42, 11)));
  EXPECT_THROW(layout.views(b, block, 3), Error);
}

// The parent writes a large sample on several threads, past the caches: each writer's share ends
// at a 64-byte boundary inside some input, often inside its rotation's wrap, and the streamed f32
// loop has a head and a tail. Every slot must hold what one call_input_set makes.
TEST(CallInputs, SeveralWritersAndStreamingWriteWhatOneWriterDoes) {
  const auto ramp = [](DType dtype, int64_t n, double scale) {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i) v.push_back((i % 3 ? -1.0 : 1.0) * scale * (1 + i % 17));
    return Tensor::from_doubles(dtype, {n}, v);
  };
  const std::vector<Tensor> b = {ramp(DType::kF32, 1001, 0.25), ramp(DType::kBF16, 333, 0.5),
                                 ramp(DType::kF64, 257, 1.5),   ramp(DType::kI64, 77, 1),
                                 ramp(DType::kF32, 3, 2),       ramp(DType::kBool, 65, 1)};
  const CallInputLayout layout(b);
  constexpr int64_t kCalls = 5;
  for (const int threads : {1, 2, 3, 7, 64}) {
    for (const bool stream : {false, true}) {
      auto block = std::make_shared<Storage>(kCalls * layout.slot_bytes());
      std::memset(block->data(), 0xa5, kCalls * layout.slot_bytes());
      layout.fill(b, 9, 100, kCalls, static_cast<std::byte*>(block->data()), {threads, stream});
      for (int64_t i = 0; i < kCalls; ++i) {
        EXPECT_EQ(digest_all(layout.views(b, block, i)),
                  digest_all(call_input_set(b, 9, 100 + static_cast<uint64_t>(i))))
            << threads << " writers, streamed " << stream << ", call " << i;
      }
    }
  }
}

TEST(CallInputs, ShrinkingKeepsSignsZerosAndSpecialValuesInEveryFloatType) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> special = {0.0, -0.0, inf, -inf, std::nan(""), 1e-310, 1.0, -1.0};
  for (const DType dt : {DType::kBF16, DType::kF32, DType::kF64}) {
    std::vector<double> v;
    for (int r = 0; r < 64; ++r) v.insert(v.end(), special.begin(), special.end());
    const std::vector<Tensor> b = {Tensor::from_doubles(dt, {static_cast<int64_t>(v.size())}, v)};
    const std::vector<double> before = b[0].to_doubles();
    int64_t ones_changed = 0;
    for (uint64_t call = 0; call < 20; ++call) {
      for (const double y : call_input_set(b, 5, call)[0].to_doubles()) {
        if (std::isnan(y) || std::isinf(y) || y == 0.0) continue;  // each kept as it was
        if (std::abs(y) < 1e-300 || (dt == DType::kBF16 && std::abs(y) < 1e-30)) continue;
        // What the shrinking may make of +-1: same sign, 1 - 2^-5 <= |y| <= 1.
        EXPECT_LE(std::abs(y), 1.0) << dtype_name(dt);
        EXPECT_GE(std::abs(y), 1 - 1.0 / 32) << dtype_name(dt);
        if (std::abs(y) != 1.0) ++ones_changed;
      }
      // As many infinities, NaN and zeros as B has: the shrinking makes and removes none.
      const std::vector<double> got = call_input_set(b, 5, call)[0].to_doubles();
      EXPECT_EQ(
          std::count_if(got.begin(), got.end(), [](double y) { return std::isnan(y); }),
          std::count_if(before.begin(), before.end(), [](double y) { return std::isnan(y); }));
      EXPECT_EQ(std::count(got.begin(), got.end(), inf), 64);
      EXPECT_EQ(std::count(got.begin(), got.end(), -inf), 64);
      EXPECT_EQ(std::count(got.begin(), got.end(), 0.0),
                std::count(before.begin(), before.end(), 0.0));
    }
    EXPECT_GT(ones_changed, 0) << dtype_name(dt);
  }
}

TEST(CallInputRegion, TheWorkerSeesWhatTheParentWroteAndCannotWriteIt) {
  const std::vector<Tensor> b = set_b(100);
  CallInputRegion region(b);
  EXPECT_EQ(region.capacity(), CallInputLayout(b).max_calls());
  region.write(77, 3, 5);
  const int worker_fd = ::dup(region.fd());
  ASSERT_GE(worker_fd, 0);
  const CallInputView view(worker_fd, b);  // takes worker_fd
  EXPECT_EQ(view.capacity(), region.capacity());
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(digest_all(view.call(i)),
              digest_all(call_input_set(b, 77, static_cast<uint64_t>(3 * kCallIdStride + i))));
  }
  // The next sample's inputs appear in the same views.
  const std::vector<Tensor> call0 = view.call(0);
  region.write(77, 4, 1);
  EXPECT_EQ(digest_all(call0),
            digest_all(call_input_set(b, 77, static_cast<uint64_t>(4 * kCallIdStride))));
  // Sealed: no new writable mapping, no write, no resize, not even through a reopened descriptor.
  const int again = ::open(fmt::format("/proc/self/fd/{}", region.fd()).c_str(), O_RDWR);
  ASSERT_GE(again, 0);
  EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0), MAP_FAILED);
  const char byte = 1;
  EXPECT_EQ(::pwrite(again, &byte, 1, 0), -1);
  EXPECT_NE(::ftruncate(again, 0), 0);
  EXPECT_NE(::ftruncate(again, 1 << 30), 0);
  void* ro = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, again, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_NE(::mprotect(ro, 4096, PROT_READ | PROT_WRITE), 0);
  ::munmap(ro, 4096);
  ::close(again);
  // Past its capacity, a clear error on either side.
  EXPECT_THROW(region.write(77, 5, region.capacity() + 1), Error);
  EXPECT_THROW(view.call(view.capacity()), Error);
  EXPECT_THROW(CallInputView(-1, b), Error);
}

TEST(TensorOver, ViewsBorrowedMemoryThatItsOwnerKeepsAlive) {
  auto owner = std::make_shared<std::vector<float>>(16, 2.5f);
  auto storage = std::make_shared<Storage>(owner->data(), 16 * sizeof(float), owner);
  const Tensor t = Tensor::over(storage, 8 * sizeof(float), DType::kF32, {2, 4});
  owner.reset();  // the storage holds it
  storage.reset();
  EXPECT_EQ(t.to_doubles(), std::vector<double>(8, 2.5));
  const auto s2 =
      std::make_shared<Storage>(t.raw_data(), 8 * sizeof(float), std::make_shared<int>(0));
  EXPECT_THROW(Tensor::over(s2, 4, DType::kF32, {2, 4}), Error);    // past the end
  EXPECT_THROW(Tensor::over(s2, 2, DType::kF32, {1}), Error);       // misaligned
  EXPECT_THROW(Tensor::over(nullptr, 0, DType::kF32, {1}), Error);  // no storage
  EXPECT_THROW(Storage(t.raw_data(), 4, nullptr), Error);           // no owner
}

TEST(OutputSample, SmallOutputsWholeLargeOnesAtSecretPositions) {
  EXPECT_EQ(sampled_elements(1, 2, 0, 5), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  const auto a = sampled_elements(1, 2, 0, 1 << 20), b = sampled_elements(1, 2, 0, 1 << 20);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), static_cast<size_t>(kSampledElements));
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_NE(a, sampled_elements(2, 2, 0, 1 << 20));  // another secret
  EXPECT_NE(a, sampled_elements(1, 3, 0, 1 << 20));  // another call
  EXPECT_NE(a, sampled_elements(1, 2, 1, 1 << 20));  // another output
  const Tensor t = Tensor::from_doubles(DType::kF64, {2, 3}, std::vector<double>{0, 1, 2, 3, 4, 5});
  const std::vector<int64_t> at = {1, 4, 4};
  EXPECT_EQ(gather_elements(t, at).to_doubles(), (std::vector<double>{1, 4, 4}));
  // Logical order, whatever the strides.
  EXPECT_EQ(gather_elements(t.transpose(0, 1), at).to_doubles(), (std::vector<double>{3, 2, 2}));
}

// A child that holds `t` and a table of it, says where, and waits to be killed.
struct Holder {
  pid_t pid = -1;
  TurnDone done;
};
Holder hold(const Tensor& t, bool lie) {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  Holder h;
  h.pid = ::fork();
  if (h.pid == 0) {
    static CallOutput rows[1];
    rows[0].call = 5;
    rows[0].addr = reinterpret_cast<uint64_t>(t.raw_data());
    rows[0].nbytes = lie ? 3 : t.nbytes();
    rows[0].dtype = static_cast<int32_t>(t.dtype());
    rows[0].ndim = 1;
    rows[0].dims[0] = t.numel();
    const uint64_t addr = reinterpret_cast<uint64_t>(rows);
    if (::write(p[1], &addr, sizeof addr) != sizeof addr) _exit(1);
    for (;;) ::pause();
  }
  ::close(p[1]);
  uint64_t addr = 0;
  EXPECT_EQ(::read(p[0], &addr, sizeof addr), static_cast<ssize_t>(sizeof addr));
  ::close(p[0]);
  h.done = {1, 1, 1, 1, addr, 1};
  return h;
}
void end(const Holder& h) {
  ::kill(h.pid, SIGKILL);
  ::waitpid(h.pid, nullptr, 0);
}

TEST(CallReader, ReadsAStoppedChildsOutputsAtTheSampledElements) {
  std::vector<double> v;
  for (int i = 0; i < 5000; ++i) v.push_back(i * 0.5);
  const Tensor t = Tensor::from_doubles(DType::kF32, {5000}, v);
  const Holder h = hold(t, false);
  {
    const StoppedWorker stopped(h.pid);
    ASSERT_EQ(stopped.error(), "");
    std::vector<CallOutput> rows;
    ASSERT_EQ(read_call_table(h.pid, h.done, 0, rows), "");
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].call, 5u);
    Tensor got;
    ASSERT_EQ(read_sampled_output(h.pid, rows[0], 0, 99, got), "");
    EXPECT_EQ(digest(got), digest(gather_elements(t, sampled_elements(99, 5, 0, 5000))));
    // An address it does not map reads as an error, not a crash.
    rows[0].addr = 16;
    EXPECT_NE(read_sampled_output(h.pid, rows[0], 0, 99, got), "");
  }
  end(h);
  const Holder liar = hold(t, true);
  std::vector<CallOutput> rows;
  EXPECT_NE(read_call_table(liar.pid, liar.done, 0, rows).find("says 3 bytes"), std::string::npos);
  end(liar);
  // A process that is gone cannot be stopped.
  EXPECT_NE(StoppedWorker(liar.pid).error(), "");
}

}  // namespace
}  // namespace crucible
