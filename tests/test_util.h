// Test helpers: build small tensors from literals and compare a tensor's dtype, shape and values.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/tensor.h"
#include "crucible/ir/op_registry.h"

// Skips a test whose verdict a sanitized build cannot give (ci/sanitize.sh), saying why; the
// normal build runs it.
#ifdef CRUCIBLE_SANITIZED
#define CRUCIBLE_SKIP_WHEN_SANITIZED(why) GTEST_SKIP() << "sanitized build: " << (why)
#else
#define CRUCIBLE_SKIP_WHEN_SANITIZED(why) static_cast<void>(0)
#endif

namespace crucible::testing {

inline Tensor T(DType dtype, Shape shape, std::vector<double> values) {
  return Tensor::from_doubles(dtype, std::move(shape), values);
}

// Checks dtype, shape and every value (NaN matches NaN; floats within `tol` relative+absolute).
inline void ExpectTensor(const Tensor& t, DType dtype, const Shape& shape,
                         const std::vector<double>& values, double tol = 1e-6) {
  ASSERT_EQ(dtype_name(t.dtype()), dtype_name(dtype));
  ASSERT_EQ(shape_str(t.shape()), shape_str(shape));
  ASSERT_EQ(static_cast<size_t>(t.numel()), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    double got = t.get(static_cast<int64_t>(i)), want = values[i];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i << " = " << got << ", want NaN";
    } else if (std::isinf(want)) {
      EXPECT_EQ(got, want) << "element " << i;
    } else {
      EXPECT_NEAR(got, want, tol * (1.0 + std::abs(want))) << "element " << i;
    }
  }
}

// Short names the op tests share.
namespace op_helpers {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline Tensor RunOp(std::string_view op, std::vector<Tensor> in, Attrs attrs = {}) {
  return run_op(op, in, std::move(attrs));
}
inline Tensor Op(std::string_view op, std::vector<Tensor> in, Attrs attrs = {}) {
  return run_op(op, in, std::move(attrs));
}

// Expects `f` to throw crucible::Error whose message contains `substr`.
template <typename F>
void ExpectErrorWith(F&& f, const std::string& substr) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected an Error containing '" << substr << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(substr), std::string::npos)
        << "message '" << e.what() << "' lacks '" << substr << "'";
  }
}

// Expects run_op(op, in, attrs) to throw an Error whose message contains `needle`.
inline void ExpectError(std::string_view op, std::vector<Tensor> in, Attrs attrs,
                        const std::string& needle) {
  ExpectErrorWith([&] { run_op(op, in, std::move(attrs)); }, needle);
}

}  // namespace op_helpers

}  // namespace crucible::testing
