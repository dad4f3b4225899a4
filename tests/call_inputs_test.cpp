// Every timed call's own inputs and the parent's read of its outputs: call inputs keep set B's
// values but differ from every other call's, the sampled elements are the same wherever they are
// drawn, and a stopped child's memory reads back (and a table that lies does not).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "call_reader.h"
#include "input_sets.h"
#include "output_digest.h"
#include "output_sample.h"

namespace crucible {
namespace {

std::vector<Tensor> set_b(int64_t n) {
  std::vector<double> x, idx;
  for (int64_t i = 0; i < n; ++i) x.push_back(0.5 + static_cast<double>(i) * 0.25);
  for (int64_t i = 0; i < 8; ++i) idx.push_back(static_cast<double>(i % 5));
  return {Tensor::from_doubles(DType::kF32, {n}, x), Tensor::from_doubles(DType::kI64, {8}, idx),
          Tensor::from_doubles(DType::kF32, {1}, std::vector<double>{3.0})};
}

TEST(CallInputs, KeepTheValuesOfSetBAndDifferFromEveryOtherCall) {
  const std::vector<Tensor> b = set_b(64);
  std::set<uint64_t> seen;
  for (uint64_t call = 0; call < 3000; ++call) {
    const std::vector<Tensor> in = call_input_set(b, 42, call);
    ASSERT_EQ(in.size(), b.size());
    for (size_t k = 0; k < b.size(); ++k) {
      ASSERT_EQ(in[k].shape(), b[k].shape());
      std::vector<double> got = in[k].to_doubles(), want = b[k].to_doubles();
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      ASSERT_EQ(got, want) << "call " << call << " input " << k;  // a permutation of B's values
    }
    // 64 rotations of the first input: the swaps tell the rest apart.
    EXPECT_TRUE(seen.insert(digest(in[0])).second) << "call " << call << " repeats an earlier one";
  }
  // The same call, the same inputs; another secret, others.
  EXPECT_EQ(digest(call_input_set(b, 42, 7)[0]), digest(call_input_set(b, 42, 7)[0]));
  EXPECT_NE(digest(call_input_set(b, 43, 7)[0]), digest(call_input_set(b, 42, 7)[0]));
  // Filling buffers in place gives what a fresh set does.
  std::vector<Tensor> into;
  fill_call_inputs(b, 42, 9, into);
  fill_call_inputs(b, 42, 11, into);
  EXPECT_EQ(digest_all(into), digest_all(call_input_set(b, 42, 11)));
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
