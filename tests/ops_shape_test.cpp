// Shape op family: views share storage, python-style slicing, cat's promotion and strided inputs,
// full and arange, and the type rules' errors for bad dims, shapes and attributes.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

using Ints = std::vector<int64_t>;

Tensor Iota(DType dtype, Shape shape) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return T(dtype, std::move(shape), v);
}

// ---------------------------------------------------------------------------------------------------

TEST(Reshape, ViewsWhenPossibleAndCopiesOtherwise) {
  const Tensor a = Iota(DType::kF32, {2, 3});
  const Tensor r = RunOp("reshape", {a}, {{"shape", Ints{3, -1}}});
  EXPECT_EQ(r.storage(), a.storage());
  ExpectTensor(r, DType::kF32, {3, 2}, {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("reshape", {a}, {{"shape", Ints{6}}}), DType::kF32, {6}, {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("reshape", {a}, {{"shape", int64_t{6}}}), DType::kF32, {6},
               {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("reshape", {a}, {{"shape", Ints{1, 2, 1, 3}}}), DType::kF32, {1, 2, 1, 3},
               {0, 1, 2, 3, 4, 5});
  const Tensor t = RunOp("reshape", {a.transpose(0, 1)}, {{"shape", Ints{-1}}});
  ExpectTensor(t, DType::kF32, {6}, {0, 3, 1, 4, 2, 5});
  ExpectTensor(RunOp("reshape", {T(DType::kI64, {1}, {7})}, {{"shape", Ints{}}}), DType::kI64, {},
               {7});
  ExpectTensor(RunOp("reshape", {Tensor::empty(DType::kF32, {0, 3})}, {{"shape", Ints{3, 0}}}),
               DType::kF32, {3, 0}, {});
}

TEST(Reshape, Errors) {
  const Tensor a = Iota(DType::kF32, {2, 3});
  ExpectErrorWith(
      [&] {
        RunOp("reshape", {a}, {{"shape", Ints{4, -1}}});
      },
      "reshape: shape [4,-1] is invalid for 6 elements");
  ExpectErrorWith([&] { RunOp("reshape", {a}, {{"shape", Ints{5}}}); }, "invalid for 6 elements");
  ExpectErrorWith([&] { RunOp("reshape", {a}, {{"shape", Ints{-1, -1}}}); }, "more than one -1");
  ExpectErrorWith([&] { RunOp("reshape", {a}, {{"shape", Ints{-2, -3}}}); }, "invalid size -2");
  ExpectErrorWith(
      [&] {
        RunOp("reshape", {Tensor::empty(DType::kF32, {0, 3})}, {{"shape", Ints{0, -1}}});
      },
      "invalid for 0 elements");
  ExpectErrorWith([&] { RunOp("reshape", {a}); }, "reshape: missing attribute 'shape'");
  ExpectErrorWith(
      [&] {
        RunOp("reshape", {a, a}, {{"shape", Ints{6}}});
      },
      "expects 1 operand, got 2");
}

TEST(Permute, ReordersDimsAsAView) {
  const Tensor a = Iota(DType::kI32, {2, 3, 4});
  const Tensor p = RunOp("permute", {a}, {{"dims", Ints{2, 0, 1}}});
  EXPECT_EQ(p.storage(), a.storage());
  ASSERT_EQ(shape_str(p.shape()), "[4,2,3]");
  // p[k][i][j] = a[i][j][k] = 12i + 4j + k.
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(p.get(k * 6 + i * 3 + j), 12 * i + 4 * j + k);
  ExpectTensor(RunOp("permute", {Iota(DType::kF32, {2, 3})}, {{"dims", Ints{-1, -2}}}), DType::kF32,
               {3, 2}, {0, 3, 1, 4, 2, 5});
  ExpectTensor(RunOp("permute", {T(DType::kF32, {}, {5})}, {{"dims", Ints{}}}), DType::kF32, {},
               {5});
  ExpectErrorWith(
      [&] {
        RunOp("permute", {a}, {{"dims", Ints{0, 1}}});
      },
      "permute: dims [0,1] has 2 entries for a tensor of rank 3");
  ExpectErrorWith([&] { RunOp("permute", {a}, {{"dims", Ints{0, 1, 1}}}); }, "repeats dimension 1");
  ExpectErrorWith(
      [&] {
        RunOp("permute", {a}, {{"dims", Ints{0, 1, 3}}});
      },
      "dim 3 is out of range for a tensor of rank 3");
  ExpectErrorWith([&] { RunOp("permute", {a}, {{"dims", Ints{0, 1, -4}}}); }, "out of range");
}

TEST(Transpose, SwapsTwoDims) {
  const Tensor a = Iota(DType::kF64, {2, 3});
  const Tensor t = RunOp("transpose", {a}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  EXPECT_EQ(t.storage(), a.storage());
  ExpectTensor(t, DType::kF64, {3, 2}, {0, 3, 1, 4, 2, 5});
  ExpectTensor(RunOp("transpose", {a}, {{"dim0", int64_t{-1}}, {"dim1", int64_t{-2}}}), DType::kF64,
               {3, 2}, {0, 3, 1, 4, 2, 5});
  ExpectTensor(RunOp("transpose", {a}, {{"dim0", int64_t{1}}, {"dim1", int64_t{1}}}), DType::kF64,
               {2, 3}, {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("transpose", {Iota(DType::kU8, {2, 1, 2})},
                     {{"dim0", int64_t{0}}, {"dim1", int64_t{2}}}),
               DType::kU8, {2, 1, 2}, {0, 2, 1, 3});
  ExpectTensor(
      RunOp("transpose", {T(DType::kF32, {}, {3})}, {{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}}),
      DType::kF32, {}, {3});
  ExpectErrorWith(
      [&] {
        RunOp("transpose", {a}, {{"dim0", int64_t{0}}, {"dim1", int64_t{2}}});
      },
      "transpose: dim1 2 is out of range");
  ExpectErrorWith(
      [&] {
        RunOp("transpose", {a}, {{"dim0", int64_t{0}}});
      },
      "missing attribute 'dim1'");
}

TEST(Expand, BroadcastsSizeOneDims) {
  const Tensor row = T(DType::kF32, {3}, {1, 2, 3});
  const Tensor e = RunOp("expand", {row}, {{"shape", Ints{2, 3}}});
  EXPECT_EQ(e.storage(), row.storage());
  EXPECT_EQ(e.strides()[0], 0);
  ExpectTensor(e, DType::kF32, {2, 3}, {1, 2, 3, 1, 2, 3});
  ExpectTensor(RunOp("expand", {T(DType::kI64, {2, 1}, {4, 5})}, {{"shape", Ints{2, 3}}}),
               DType::kI64, {2, 3}, {4, 4, 4, 5, 5, 5});
  ExpectTensor(RunOp("expand", {T(DType::kI64, {2, 1}, {4, 5})}, {{"shape", Ints{2, -1, 2}}}),
               DType::kI64, {2, 2, 2}, {4, 4, 5, 5, 4, 4, 5, 5});
  ExpectTensor(RunOp("expand", {T(DType::kI64, {2, 1}, {4, 5})}, {{"shape", Ints{-1, 0}}}),
               DType::kI64, {2, 0}, {});
  ExpectTensor(RunOp("expand", {T(DType::kBool, {}, {1})}, {{"shape", Ints{2}}}), DType::kBool, {2},
               {1, 1});
  const Tensor a = Iota(DType::kF32, {2, 3});
  ExpectErrorWith(
      [&] {
        RunOp("expand", {a}, {{"shape", Ints{4, 3}}});
      },
      "expand: cannot expand [2,3] to [4,3]");
  ExpectErrorWith(
      [&] {
        RunOp("expand", {a}, {{"shape", Ints{3}}});
      },
      "cannot expand [2,3] to the shorter shape [3]");
  ExpectErrorWith(
      [&] {
        RunOp("expand", {a}, {{"shape", Ints{-1, 2, 3}}});
      },
      "new leading dimension");
  ExpectErrorWith(
      [&] {
        RunOp("expand", {T(DType::kF32, {1}, {1})}, {{"shape", Ints{-2}}});
      },
      "invalid size -2");
}

TEST(Slice, PythonStyleBounds) {
  const Tensor a = Iota(DType::kF32, {2, 5});
  auto slice = [&](int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                   std::optional<int64_t> step) {
    Attrs attrs{{"dim", dim}};
    if (start) attrs.set("start", *start);
    if (end) attrs.set("end", *end);
    if (step) attrs.set("step", *step);
    return RunOp("slice", {a}, attrs);
  };
  const Tensor s = slice(1, 1, 3, std::nullopt);
  EXPECT_EQ(s.storage(), a.storage());
  ExpectTensor(s, DType::kF32, {2, 2}, {1, 2, 6, 7});
  ExpectTensor(slice(1, std::nullopt, std::nullopt, 2), DType::kF32, {2, 3}, {0, 2, 4, 5, 7, 9});
  ExpectTensor(slice(1, 1, std::nullopt, 3), DType::kF32, {2, 2}, {1, 4, 6, 9});
  ExpectTensor(slice(-1, -2, std::nullopt, std::nullopt), DType::kF32, {2, 2}, {3, 4, 8, 9});
  ExpectTensor(slice(1, std::nullopt, -3, std::nullopt), DType::kF32, {2, 2}, {0, 1, 5, 6});
  ExpectTensor(slice(0, 1, 100, std::nullopt), DType::kF32, {1, 5}, {5, 6, 7, 8, 9});
  ExpectTensor(slice(1, -100, 2, std::nullopt), DType::kF32, {2, 2}, {0, 1, 5, 6});
  ExpectTensor(slice(1, 4, 2, std::nullopt), DType::kF32, {2, 0}, {});
  ExpectTensor(slice(1, 7, 9, std::nullopt), DType::kF32, {2, 0}, {});
  ExpectTensor(slice(1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                     std::nullopt),
               DType::kF32, {2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  // A step past the dim takes its first element: the size is computed without overflow (a step
  // of INT64_MAX once wrapped around), and the one element keeps its stride.
  ExpectTensor(slice(1, 1, std::nullopt, std::numeric_limits<int64_t>::max()), DType::kF32, {2, 1},
               {1, 6});
  ExpectTensor(slice(0, std::nullopt, std::nullopt, std::numeric_limits<int64_t>::max() - 1),
               DType::kF32, {1, 5}, {0, 1, 2, 3, 4});
  // Slicing a strided view composes strides.
  ExpectTensor(RunOp("slice", {a.transpose(0, 1)},
                     {{"dim", int64_t{0}}, {"start", int64_t{1}}, {"step", int64_t{2}}}),
               DType::kF32, {2, 2}, {1, 6, 3, 8});
  ExpectErrorWith([&] { slice(1, 0, 2, 0); }, "slice: step must be positive, got 0");
  ExpectErrorWith([&] { slice(1, 0, 2, -1); }, "step must be positive");
  ExpectErrorWith([&] { slice(2, 0, 2, std::nullopt); }, "dim 2 is out of range");
  ExpectErrorWith(
      [&] {
        RunOp("slice", {T(DType::kF32, {}, {1})}, {{"dim", int64_t{0}}});
      },
      "cannot slice a 0-d tensor");
  ExpectErrorWith([&] { RunOp("slice", {a}, {{"start", int64_t{0}}}); }, "missing attribute 'dim'");
}

TEST(Squeeze, DropsSizeOneDims) {
  const Tensor a = Iota(DType::kF32, {1, 3, 1, 2});
  const Tensor all = RunOp("squeeze", {a});
  EXPECT_EQ(all.storage(), a.storage());
  ExpectTensor(all, DType::kF32, {3, 2}, {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("squeeze", {a}, {{"dim", int64_t{2}}}), DType::kF32, {1, 3, 2},
               {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("squeeze", {a}, {{"dim", int64_t{-4}}}), DType::kF32, {3, 1, 2},
               {0, 1, 2, 3, 4, 5});
  // A dim that is not 1 is left alone, as in PyTorch.
  ExpectTensor(RunOp("squeeze", {a}, {{"dim", int64_t{1}}}), DType::kF32, {1, 3, 1, 2},
               {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("squeeze", {T(DType::kF32, {1, 1}, {4})}), DType::kF32, {}, {4});
  ExpectTensor(RunOp("squeeze", {T(DType::kF32, {}, {4})}, {{"dim", int64_t{0}}}), DType::kF32, {},
               {4});
  ExpectTensor(RunOp("squeeze", {Tensor::empty(DType::kI32, {0, 1})}), DType::kI32, {0}, {});
  // A transposed view keeps its strides through squeeze.
  ExpectTensor(RunOp("squeeze", {Iota(DType::kF32, {2, 1, 3}).permute(Ints{2, 1, 0})}), DType::kF32,
               {3, 2}, {0, 3, 1, 4, 2, 5});
  ExpectErrorWith(
      [&] {
        RunOp("squeeze", {a}, {{"dim", int64_t{4}}});
      },
      "squeeze: dim 4 is out of range");
}

TEST(Unsqueeze, InsertsSizeOneDims) {
  const Tensor a = Iota(DType::kF32, {2, 3});
  const Tensor u = RunOp("unsqueeze", {a}, {{"dim", int64_t{0}}});
  EXPECT_EQ(u.storage(), a.storage());
  ExpectTensor(u, DType::kF32, {1, 2, 3}, {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("unsqueeze", {a}, {{"dim", int64_t{1}}}), DType::kF32, {2, 1, 3},
               {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("unsqueeze", {a}, {{"dim", int64_t{2}}}), DType::kF32, {2, 3, 1},
               {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("unsqueeze", {a}, {{"dim", int64_t{-1}}}), DType::kF32, {2, 3, 1},
               {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("unsqueeze", {a}, {{"dim", int64_t{-3}}}), DType::kF32, {1, 2, 3},
               {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("unsqueeze", {T(DType::kF32, {}, {9})}, {{"dim", int64_t{0}}}), DType::kF32,
               {1}, {9});
  ExpectErrorWith(
      [&] {
        RunOp("unsqueeze", {a}, {{"dim", int64_t{3}}});
      },
      "unsqueeze: dim 3 is out of range");
  ExpectErrorWith([&] { RunOp("unsqueeze", {a}, {{"dim", int64_t{-4}}}); }, "out of range");
  ExpectErrorWith([&] { RunOp("unsqueeze", {a}); }, "missing attribute 'dim'");
}

TEST(Cat, ConcatenatesAlongADim) {
  const Tensor a = Iota(DType::kF32, {2, 2}), b = T(DType::kF32, {1, 2}, {10, 11});
  ExpectTensor(RunOp("cat", {a, b}), DType::kF32, {3, 2}, {0, 1, 2, 3, 10, 11});
  ExpectTensor(RunOp("cat", {a, b.transpose(0, 1)}, {{"dim", int64_t{1}}}), DType::kF32, {2, 3},
               {0, 1, 10, 2, 3, 11});
  ExpectTensor(RunOp("cat", {a, a, a}, {{"dim", int64_t{-1}}}), DType::kF32, {2, 6},
               {0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3});
  // Non-contiguous inputs: transposed, step-sliced, expanded.
  ExpectTensor(RunOp("cat", {a.transpose(0, 1), Iota(DType::kF32, {2, 4}).slice(1, 0, 4, 2),
                             T(DType::kF32, {1, 2}, {7, 8}).expand(Ints{2, 2})}),
               DType::kF32, {6, 2}, {0, 2, 1, 3, 0, 2, 4, 6, 7, 8, 7, 8});
  // Zero-size operands contribute nothing; all zero gives an empty result.
  ExpectTensor(
      RunOp("cat", {Tensor::empty(DType::kF32, {0, 2}), b, Tensor::empty(DType::kF32, {0, 2})}),
      DType::kF32, {1, 2}, {10, 11});
  ExpectTensor(
      RunOp("cat", {Tensor::empty(DType::kF32, {0, 2}), Tensor::empty(DType::kF32, {0, 2})}),
      DType::kF32, {0, 2}, {});
  ExpectTensor(RunOp("cat", {Tensor::empty(DType::kF32, {2, 0}), a}, {{"dim", int64_t{1}}}),
               DType::kF32, {2, 2}, {0, 1, 2, 3});
  // A single operand is a contiguous copy, not an alias.
  const Tensor one = RunOp("cat", {a.transpose(0, 1)});
  EXPECT_NE(one.storage(), a.storage());
  EXPECT_TRUE(one.is_contiguous());
  ExpectTensor(one, DType::kF32, {2, 2}, {0, 2, 1, 3});
}

TEST(Cat, PromotesAndRejectsMismatches) {
  ExpectTensor(RunOp("cat", {T(DType::kU8, {2}, {1, 255}), T(DType::kF32, {1}, {0.5})}),
               DType::kF32, {3}, {1, 255, 0.5});
  ExpectTensor(RunOp("cat", {T(DType::kI32, {1}, {-1}), T(DType::kI64, {1}, {5000000000.0}),
                             T(DType::kBool, {1}, {1})}),
               DType::kI64, {3}, {-1, 5000000000.0, 1});
  ExpectTensor(RunOp("cat", {T(DType::kBF16, {1}, {1.5}), T(DType::kBF16, {1}, {-2})}),
               DType::kBF16, {2}, {1.5, -2}, 0);
  const Tensor a = Iota(DType::kF32, {2, 2});
  ExpectErrorWith([&] { RunOp("cat", {a, Iota(DType::kF32, {2})}); }, "cat: operand 1 has rank 1");
  ExpectErrorWith(
      [&] {
        RunOp("cat", {a, Iota(DType::kF32, {2, 3})});
      },
      "operand 1 has shape [2,3], which differs from operand 0's [2,2] in dimension 1");
  ExpectErrorWith(
      [&] {
        RunOp("cat", {T(DType::kF32, {}, {1}), T(DType::kF32, {}, {2})});
      },
      "cannot concatenate 0-d");
  ExpectErrorWith([&] { RunOp("cat", {a, a}, {{"dim", int64_t{2}}}); }, "dim 2 is out of range");
  ExpectErrorWith([&] { RunOp("cat", {}); }, "cat: expects at least 1 operand");
}

TEST(Cat, LargeColumnConcatMatchesReference) {
  const int64_t rows = 1024, ca = 300, cb = 212;
  const Tensor a = Iota(DType::kF32, {rows, ca}), b = Iota(DType::kI32, {rows, cb});
  const Tensor out = RunOp("cat", {a, b}, {{"dim", int64_t{1}}});
  ASSERT_EQ(shape_str(out.shape()), "[1024,512]");
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < ca + cb; ++c) {
      const double want =
          c < ca ? static_cast<double>(r * ca + c) : static_cast<double>(r * cb + (c - ca));
      bad += out.data<float>()[r * (ca + cb) + c] != static_cast<float>(want);
    }
  }
  EXPECT_EQ(bad, 0);
}

// ---------------------------------------------------------------------------------------------------

TEST(Full, FillsWithDTypeDefaultF32) {
  ExpectTensor(RunOp("full", {}, {{"shape", Ints{2, 2}}, {"value", 1.5}}), DType::kF32, {2, 2},
               {1.5, 1.5, 1.5, 1.5});
  ExpectTensor(
      RunOp("full", {}, {{"shape", Ints{3}}, {"value", int64_t{7}}, {"dtype", DType::kI32}}),
      DType::kI32, {3}, {7, 7, 7});
  ExpectTensor(RunOp("full", {}, {{"shape", Ints{}}, {"value", -2.0}, {"dtype", DType::kF64}}),
               DType::kF64, {}, {-2});
  ExpectTensor(RunOp("full", {}, {{"shape", Ints{2}}, {"value", 2.0}, {"dtype", DType::kBool}}),
               DType::kBool, {2}, {1, 1});
  ExpectTensor(RunOp("full", {}, {{"shape", Ints{0, 4}}, {"value", 1.0}}), DType::kF32, {0, 4}, {});
  ExpectTensor(RunOp("full", {}, {{"shape", Ints{1}}, {"value", 1.001}, {"dtype", DType::kBF16}}),
               DType::kBF16, {1}, {1.0}, 0);
  ExpectTensor(
      RunOp("full", {}, {{"shape", Ints{1}}, {"value", std::numeric_limits<double>::infinity()}}),
      DType::kF32, {1}, {std::numeric_limits<double>::infinity()});
  ExpectErrorWith(
      [] {
        RunOp("full", {}, {{"shape", Ints{2, -1}}, {"value", 1.0}});
      },
      "full: shape [2,-1] has a negative size");
  ExpectErrorWith(
      [] {
        RunOp("full", {}, {{"shape", Ints{2}}, {"value", 256.0}, {"dtype", DType::kU8}});
      },
      "value 256 cannot be converted to u8");
  ExpectErrorWith(
      [] {
        RunOp("full", {}, {{"shape", Ints{2}}, {"value", -1.0}, {"dtype", DType::kU8}});
      },
      "overflow");
  ExpectErrorWith([] { RunOp("full", {}, {{"shape", Ints{2}}}); }, "missing attribute 'value'");
  ExpectErrorWith(
      [] {
        RunOp("full", {T(DType::kF32, {1}, {1})}, {{"shape", Ints{2}}, {"value", 1.0}});
      },
      "expects 0 operands, got 1");
}

TEST(Arange, LengthIsCeilOfSpanOverStep) {
  ExpectTensor(RunOp("arange", {}, {{"end", int64_t{5}}}), DType::kI64, {5}, {0, 1, 2, 3, 4});
  ExpectTensor(RunOp("arange", {}, {{"end", 10.0}, {"start", 2.0}, {"step", 3.0}}), DType::kI64,
               {3}, {2, 5, 8});
  ExpectTensor(RunOp("arange", {}, {{"end", 1.0}, {"step", 0.3}, {"dtype", DType::kF32}}),
               DType::kF32, {4}, {0, 0.3, 0.6, 0.9});
  ExpectTensor(
      RunOp("arange", {}, {{"end", -1.0}, {"start", 2.0}, {"step", -1.5}, {"dtype", DType::kF64}}),
      DType::kF64, {2}, {2, 0.5});
  ExpectTensor(RunOp("arange", {}, {{"end", 3.0}, {"start", 0.5}, {"dtype", DType::kI32}}),
               DType::kI32, {3}, {0, 1, 2});
  ExpectTensor(RunOp("arange", {}, {{"end", 3.0}, {"dtype", DType::kBF16}}), DType::kBF16, {3},
               {0, 1, 2}, 0);
  // A negative length is an empty result, not an error.
  ExpectTensor(RunOp("arange", {}, {{"end", 0.0}, {"start", 5.0}}), DType::kI64, {0}, {});
  ExpectTensor(RunOp("arange", {}, {{"end", 5.0}, {"start", 5.0}}), DType::kI64, {0}, {});
  ExpectErrorWith(
      [] {
        RunOp("arange", {}, {{"end", 5.0}, {"step", 0.0}});
      },
      "arange: step must be nonzero");
  ExpectErrorWith(
      [] {
        RunOp("arange", {}, {{"end", 5.0}, {"dtype", DType::kBool}});
      },
      "not supported for bool");
  ExpectErrorWith(
      [] {
        RunOp("arange", {}, {{"end", 300.0}, {"dtype", DType::kU8}});
      },
      "last value 299 cannot be converted");
  ExpectErrorWith(
      [] {
        RunOp("arange", {}, {{"end", std::numeric_limits<double>::infinity()}});
      },
      "must be finite");
  ExpectErrorWith([] { RunOp("arange", {}, {}); }, "missing attribute 'end'");
}

TEST(Arange, LargeIsExactInI64) {
  const int64_t n = 300000;
  const Tensor a = RunOp("arange", {}, {{"end", static_cast<double>(n)}});
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += a.data<int64_t>()[i] != i;
  EXPECT_EQ(bad, 0);
}

TEST(TypeRules, ShapeOpsInferWithoutData) {
  const OpRegistry& reg = OpRegistry::global();
  auto infer = [&](const char* op, std::vector<TensorType> in, Attrs attrs = {}) {
    return infer_type(reg.get(op), in, attrs);
  };
  EXPECT_EQ(infer("reshape", {{DType::kU8, {4, 6}}}, {{"shape", Ints{2, -1, 3}}}),
            (TensorType{DType::kU8, {2, 4, 3}}));
  EXPECT_EQ(infer("slice", {{DType::kF32, {10, 4}}},
                  {{"dim", int64_t{0}}, {"start", int64_t{-7}}, {"step", int64_t{3}}}),
            (TensorType{DType::kF32, {3, 4}}));
  EXPECT_EQ(infer("cat", {{DType::kI32, {2, 3}}, {DType::kF64, {5, 3}}}),
            (TensorType{DType::kF64, {7, 3}}));
  EXPECT_EQ(infer("squeeze", {{DType::kBool, {1, 2, 1}}}), (TensorType{DType::kBool, {2}}));
  EXPECT_EQ(infer("arange", {}, {{"end", 4.5}}), (TensorType{DType::kI64, {5}}));
  EXPECT_EQ(infer("full", {}, {{"shape", int64_t{3}}, {"value", 0.0}}),
            (TensorType{DType::kF32, {3}}));
}

TEST(Registry, EveryShapeOpIsRegistered) {
  for (const char* op : {"reshape", "permute", "transpose", "expand", "slice", "squeeze",
                         "unsqueeze", "cat", "full", "arange"}) {
    EXPECT_NE(OpRegistry::global().find(op), nullptr) << op;
  }
}

}  // namespace
}  // namespace crucible
