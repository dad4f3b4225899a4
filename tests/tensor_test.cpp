// Tensor core: views share storage, copies convert, reshape views when it can, RNG streams are
// fixed.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "crucible/core/block_cache.h"
#include "crucible/core/error.h"
#include "crucible/core/rng.h"
#include "crucible/ir/graph.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;

TEST(Tensor, StorageIs64ByteAligned) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty(DType::kU8, {n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  }
}

// The storage counters follow tensors' lifetimes, whether a block comes from the system or from
// the cache of freed blocks, and the peak holds the most in use at once since its reset.
TEST(Tensor, StorageCountersTrackBytesInUseAndPeak) {
  const size_t base = storage_bytes_in_use();
  storage_peak_reset();
  EXPECT_EQ(storage_peak_bytes(), base);
  {
    Tensor a = Tensor::empty(DType::kF32, {1 << 20});  // 4 MiB
    Tensor view = a.reshape(Shape{1024, 1024});        // shares the storage: counted once
    EXPECT_EQ(storage_bytes_in_use(), base + (4u << 20));
    {
      Tensor b = Tensor::empty(DType::kU8, {100});  // allocated as 128: 64-byte multiples
      EXPECT_EQ(storage_bytes_in_use(), base + (4u << 20) + 128);
    }
  }
  EXPECT_EQ(storage_bytes_in_use(), base);
  EXPECT_EQ(storage_peak_bytes(), base + (4u << 20) + 128);
  storage_peak_reset();
  { Tensor again = Tensor::empty(DType::kF32, {1 << 20}); }  // now from the block cache
  EXPECT_EQ(storage_bytes_in_use(), base);
  EXPECT_EQ(storage_peak_bytes(), base + (4u << 20));
}

// get() on an element that is not there is an Error: on an empty tensor the index arithmetic
// once divided by its zero dim (SIGFPE), which an ONNX Range of empty constants reached.
TEST(Tensor, GetOutsideTheElementsIsAnError) {
  const Tensor empty = Tensor::zeros(DType::kF32, {2, 0, 3});
  EXPECT_THROW(empty.get(0), Error);
  const Tensor t = Tensor::zeros(DType::kF32, {2, 3});
  EXPECT_EQ(t.get(5), 0.0);
  EXPECT_THROW(t.get(6), Error);
  EXPECT_THROW(t.get(-1), Error);
}

TEST(Tensor, PermuteSliceExpandAreViews) {
  Tensor a = T(DType::kF32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor p = a.permute(std::vector<int64_t>{1, 0});
  EXPECT_EQ(p.storage(), a.storage());
  EXPECT_FALSE(p.is_contiguous());
  ExpectTensor(p, DType::kF32, {3, 2}, {0, 3, 1, 4, 2, 5});
  Tensor s = a.slice(1, 1, 3);
  ExpectTensor(s, DType::kF32, {2, 2}, {1, 2, 4, 5});
  Tensor st = a.slice(1, 0, 3, 2);
  ExpectTensor(st, DType::kF32, {2, 2}, {0, 2, 3, 5});
  Tensor e = T(DType::kF32, {1, 3}, {7, 8, 9}).expand(std::vector<int64_t>{2, 3});
  EXPECT_EQ(e.strides()[0], 0);
  ExpectTensor(e, DType::kF32, {2, 3}, {7, 8, 9, 7, 8, 9});
  EXPECT_THROW(a.expand(std::vector<int64_t>{4, 3}), Error);
}

TEST(Tensor, ReshapeViewsWhenStridesAllowAndCopiesOtherwise) {
  Tensor a = T(DType::kI64, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor r = a.reshape(std::vector<int64_t>{3, -1});
  EXPECT_EQ(r.storage(), a.storage());
  ExpectTensor(r, DType::kI64, {3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor t = a.transpose(0, 1).reshape(std::vector<int64_t>{6});
  EXPECT_NE(t.storage(), a.storage());
  ExpectTensor(t, DType::kI64, {6}, {0, 3, 1, 4, 2, 5});
  // A slice of rows stays viewable as a flat vector.
  Tensor rows = T(DType::kF32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}).slice(0, 1, 3);
  Tensor flat = rows.reshape(std::vector<int64_t>{4});
  EXPECT_EQ(flat.storage(), rows.storage());
  ExpectTensor(flat, DType::kF32, {4}, {2, 3, 4, 5});
  EXPECT_THROW(a.reshape(std::vector<int64_t>{4, -1}), Error);
  EXPECT_THROW(a.reshape(std::vector<int64_t>{-1, -1}), Error);
}

TEST(Tensor, SqueezeUnsqueezeAndZeroSize) {
  Tensor a = T(DType::kF32, {1, 3}, {1, 2, 3});
  ExpectTensor(a.squeeze(0), DType::kF32, {3}, {1, 2, 3});
  ExpectTensor(a.squeeze(1), DType::kF32, {1, 3}, {1, 2, 3});
  ExpectTensor(a.unsqueeze(-1), DType::kF32, {1, 3, 1}, {1, 2, 3});
  Tensor z = Tensor::empty(DType::kF32, {0, 4});
  EXPECT_EQ(z.numel(), 0);
  ExpectTensor(z.to(DType::kI32), DType::kI32, {0, 4}, {});
}

// A tensor with no elements is contiguous whatever its other sizes (as in PyTorch), so every
// recipe fills it: [2,0] had strides that failed the check and only zeros() could make one.
TEST(Tensor, ZeroSizeTensorsAreContiguousAndEveryRecipeFillsThem) {
  for (const Shape& shape : {Shape{2, 0}, Shape{0, 3}, Shape{3, 0, 2}, Shape{0}, Shape{5, 1, 0}}) {
    for (const char* kind : {"randn", "uniform", "randint", "zeros", "ones", "full"}) {
      SCOPED_TRACE(shape_str(shape) + " " + kind);
      Initializer init{kind, {}};
      if (std::string(kind) == "randint") init.args.set("high", int64_t{4});
      if (std::string(kind) == "full") init.args.set("value", 2.0);
      const Tensor t = materialize(init, {DType::kI32, shape}, {}, 1);
      EXPECT_TRUE(t.is_contiguous());
      EXPECT_EQ(t.numel(), 0);
      EXPECT_EQ(t.shape(), shape);
      EXPECT_TRUE(t.transpose(0, static_cast<int64_t>(shape.size()) - 1).is_contiguous());
    }
  }
}

// Element and byte counts are checked: an overflow is an Error, never a wrapped count.
TEST(Tensor, SizesThatOverflowAreErrors) {
  EXPECT_EQ(shape_numel(Shape{int64_t{1} << 40, 0, int64_t{1} << 40}), 0);
  EXPECT_EQ(shape_numel(Shape{int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
  EXPECT_THROW(shape_numel(Shape{int64_t{1} << 62, 2}), Error);
  EXPECT_THROW(shape_numel(Shape{int64_t{1} << 32, int64_t{1} << 32}), Error);
  EXPECT_THROW(Tensor::empty(DType::kF32, {int64_t{1} << 47}), Error);  // 2^49 bytes
  EXPECT_THROW(Tensor::empty(DType::kF64, {int64_t{1} << 62, 2}), Error);
  EXPECT_NO_THROW(check_shape_bytes(Shape{int64_t{1} << 46}, 4));
}

TEST(Tensor, ConversionsFollowPyTorch) {
  Tensor f = T(DType::kF32, {5}, {-1.5, 0.0, 2.7, 300.0, std::nan("")});
  ExpectTensor(f.to(DType::kI32), DType::kI32, {5}, {-1, 0, 2, 300, 0});
  ExpectTensor(f.to(DType::kBool), DType::kBool, {5}, {1, 0, 1, 1, 1});
  ExpectTensor(T(DType::kI32, {2}, {256, 257}).to(DType::kU8), DType::kU8, {2}, {0, 1});
  // bf16 keeps 8 mantissa bits: 1 + 2^-9 rounds to even (1.0), 1 + 3*2^-9 rounds up.
  ExpectTensor(T(DType::kF32, {2}, {1.0 + 1.0 / 512, 1.0 + 3.0 / 512}).to(DType::kBF16),
               DType::kBF16, {2}, {1.0, 1.0 + 1.0 / 128}, 0);
}

// fuzz_onnx_model: Selu on an int32 input made a constant of -1.5e26 as int32 through a plain
// cast (undefined). Every way a double becomes an element (full, from_doubles, the RNG fills)
// now stores it as the cast to that dtype does: NaN gives 0, a value past int64 INT64_MIN,
// wrapped to the narrower type.
TEST(Tensor, ValuesPastAnIntegerTypeAreStoredAsTheCastStoresThem) {
  const double values[] = {std::nan(""), 1e30, -1.5e26, HUGE_VAL, -HUGE_VAL, 3e9, -2.5, 300.7};
  for (DType dt : {DType::kU8, DType::kI32, DType::kI64, DType::kBool}) {
    for (double v : values) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dt), v));
      const Tensor cast = Tensor::full(DType::kF64, {2}, v).to(dt);
      ExpectTensor(Tensor::full(dt, {2}, v), dt, {2}, {cast.get(0), cast.get(1)});
      const double pair[] = {v, v};
      ExpectTensor(Tensor::from_doubles(dt, {2}, pair), dt, {2}, {cast.get(0), cast.get(1)});
      if (dt == DType::kBool || !std::isfinite(v)) continue;  // the fills' own rules for bool
      Tensor normal = Tensor::empty(dt, {2}), uniform = Tensor::empty(dt, {2});
      fill_randn(normal, 7, v, 0);
      fill_uniform(uniform, 7, v, v);
      ExpectTensor(normal, dt, {2}, {cast.get(0), cast.get(1)});
      ExpectTensor(uniform, dt, {2}, {cast.get(0), cast.get(1)});
    }
  }
  // The cast these follow: 1e30 is past int64, so INT64_MIN, whose low 32 and 8 bits are 0.
  EXPECT_EQ(Tensor::full(DType::kI64, {}, 1e30).get(0), -9223372036854775808.0);
  EXPECT_EQ(Tensor::full(DType::kI32, {}, 1e30).get(0), 0);
  EXPECT_EQ(Tensor::full(DType::kI32, {}, -2.5).get(0), -2);
}

TEST(Tensor, NonContiguousCopyConverts) {
  Tensor a = T(DType::kF64, {2, 3}, {0, 1, 2, 3, 4, 5}).transpose(0, 1);
  Tensor c = a.to(DType::kF32);
  EXPECT_TRUE(c.is_contiguous());
  ExpectTensor(c, DType::kF32, {3, 2}, {0, 3, 1, 4, 2, 5});
}

TEST(Rng, StreamsAreFixedAcrossMachines) {
  // Golden values: a change here changes every model's inputs and parameters.
  EXPECT_EQ(random_bits(0, 0), random_bits(0, 0));
  EXPECT_NE(random_bits(0, 0), random_bits(0, 1));
  EXPECT_NE(random_bits(0, 0), random_bits(1, 0));
  Tensor t = Tensor::empty(DType::kF32, {100000});
  fill_randn(t, 7, 0.0, 1.0);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    sum += t.get(i);
    sq += t.get(i) * t.get(i);
  }
  EXPECT_NEAR(sum / 1e5, 0.0, 0.02);
  EXPECT_NEAR(sq / 1e5, 1.0, 0.02);
  Tensor u = Tensor::empty(DType::kU8, {1000});
  fill_randint(u, 3, 0, 256);
  for (int64_t i = 0; i < u.numel(); ++i) EXPECT_LT(u.get(i), 256);
}

TEST(Rng, FillIsIndependentOfThreadCount) {
  Tensor a = Tensor::empty(DType::kF32, {300000}), b = Tensor::empty(DType::kF32, {300000});
  omp_set_num_threads(1);
  fill_randn(a, 11, 0, 1);
  omp_set_num_threads(2);
  fill_randn(b, 11, 0, 1);
  EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()));
}

}  // namespace
}  // namespace crucible
