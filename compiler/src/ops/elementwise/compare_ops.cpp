// Comparisons (eq, ne, lt, le, gt, ge), logical_and/or/xor (-> bool) and where(cond, a, b):
// operands are promoted to a common type first, then compared or selected in one loop per dtype.
#include <fmt/format.h>

#include <string>

#include "crucible/core/error.h"
#include "crucible/ir/type_rules.h"
#include "elementwise/elementwise_internal.h"
#include "elementwise/elementwise_loop.h"

namespace crucible::ew {
namespace {

// IEEE comparisons: every ordered comparison with NaN is false and `ne` is true, as in PyTorch.
struct Eq {
  template <typename C>
  bool operator()(C a, C b) const {
    return a == b;
  }
};
struct Ne {
  template <typename C>
  bool operator()(C a, C b) const {
    return a != b;
  }
};
struct Lt {
  template <typename C>
  bool operator()(C a, C b) const {
    return a < b;
  }
};
struct Le {
  template <typename C>
  bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct Gt {
  template <typename C>
  bool operator()(C a, C b) const {
    return a > b;
  }
};
struct Ge {
  template <typename C>
  bool operator()(C a, C b) const {
    return a >= b;
  }
};

template <typename Op>
OpDef compare_def(std::string name) {
  OpDef d;
  d.schema = {name, 2, 2, {}};
  d.infer = [](std::span<const TensorType> in, const Attrs&) -> TensorType {
    return {DType::kBool, broadcast_all(in)};
  };
  d.kernel = [name](std::span<const Tensor> in, const Attrs&) {
    const std::vector<TensorType> types = types_of(in);
    const Shape shape = broadcast_all(types);
    const DType common = result_type(types);
    Tensor out = Tensor::empty(DType::kBool, shape);
    const Tensor a = as_operand(in[0], common, shape), b = as_operand(in[1], common, shape);
    dispatch_all(common, name.c_str(), [&]<typename T>() {
      using C = compute_t<T>;
      Elementwise<T, T>::template run<bool>(out, {a, b}, [](C x, C y) { return Op{}(x, y); });
    });
    return out;
  };
  return d;
}

// logical_and / logical_or / logical_xor: any dtypes, each operand true where nonzero (NaN too),
// broadcast; bool result (ONNX's And/Or/Xor take bool; torch's logical_* take any dtype).
struct And {
  bool operator()(uint8_t a, uint8_t b) const { return a != 0 && b != 0; }
};
struct Or {
  bool operator()(uint8_t a, uint8_t b) const { return a != 0 || b != 0; }
};
struct Xor {
  bool operator()(uint8_t a, uint8_t b) const { return (a != 0) != (b != 0); }
};

template <typename Op>
OpDef logical_def(std::string name) {
  OpDef d;
  d.schema = {name, 2, 2, {}};
  d.infer = [](std::span<const TensorType> in, const Attrs&) -> TensorType {
    return {DType::kBool, broadcast_all(in)};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs&) {
    const Shape shape = broadcast_all(types_of(in));
    Tensor out = Tensor::empty(DType::kBool, shape);
    // Read as the bytes bool is stored in (0 or 1), which GCC vectorizes.
    const Tensor a = as_operand(in[0], DType::kBool, shape),
                 b = as_operand(in[1], DType::kBool, shape);
    Elementwise<uint8_t, uint8_t>::template run<bool>(out, {a, b}, Op{});
    return out;
  };
  return d;
}

TensorType where_rule(std::span<const TensorType> in, const Attrs&) {
  if (in[0].dtype != DType::kBool) {
    throw Error(fmt::format("condition must be bool, got {}", dtype_name(in[0].dtype)));
  }
  return {result_type(in.subspan(1)), broadcast_all(in)};
}

OpDef where_def() {
  OpDef d;
  d.schema = {"where", 3, 3, {}};
  d.infer = where_rule;
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const TensorType ty = where_rule(types_of(in), attrs);
    Tensor out = Tensor::empty(ty.dtype, ty.shape);
    const Tensor c = as_operand(in[0], DType::kBool, ty.shape);
    const Tensor a = as_operand(in[1], ty.dtype, ty.shape),
                 b = as_operand(in[2], ty.dtype, ty.shape);
    dispatch_all(ty.dtype, "where", [&]<typename T>() {
      using C = compute_t<T>;
      // The condition is read as the bytes it is stored in (bool is 0 or 1): GCC vectorizes byte
      // loads with a compare, but not loads of bool.
      Elementwise<uint8_t, T, T>::template run<T>(
          out, {c, a, b}, [](uint8_t k, C x, C y) { return k != 0 ? x : y; });
    });
    return out;
  };
  return d;
}

}  // namespace

void register_compare_ops(OpRegistry& r) {
  r.add(compare_def<Eq>("eq"));
  r.add(compare_def<Ne>("ne"));
  r.add(compare_def<Lt>("lt"));
  r.add(compare_def<Le>("le"));
  r.add(compare_def<Gt>("gt"));
  r.add(compare_def<Ge>("ge"));
  r.add(where_def());
  r.add(logical_def<And>("logical_and"));
  r.add(logical_def<Or>("logical_or"));
  r.add(logical_def<Xor>("logical_xor"));
}

}  // namespace crucible::ew
