// Binary arithmetic with broadcasting and PyTorch type promotion: add, sub, mul, div, trunc_div,
// maximum, minimum, pow, mod. Operands are converted to the result type, then one loop per dtype
// runs.
#include <cmath>
#include <string>
#include <type_traits>

#include "crucible/core/error.h"
#include "crucible/ir/type_rules.h"
#include "elementwise/elementwise_internal.h"
#include "elementwise/elementwise_loop.h"

namespace crucible::ew {
namespace {

template <typename C>
inline constexpr bool kIsInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// Integer arithmetic wraps modulo 2^bits like PyTorch's; signed types compute through their
// unsigned type, where wrapping is defined, and convert back (modular since C++20).
template <typename C>
using Unsigned = std::make_unsigned_t<C>;

struct Add {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) {
      return a || b;
    } else if constexpr (kIsInt<C>) {
      return static_cast<C>(
          static_cast<Unsigned<C>>(static_cast<Unsigned<C>>(a) + static_cast<Unsigned<C>>(b)));
    } else {
      return a + b;
    }
  }
};

struct Sub {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) {
      return a != b;  // unreachable: the type rule rejects bool
    } else if constexpr (kIsInt<C>) {
      return static_cast<C>(
          static_cast<Unsigned<C>>(static_cast<Unsigned<C>>(a) - static_cast<Unsigned<C>>(b)));
    } else {
      return a - b;
    }
  }
};

struct Mul {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) {
      return a && b;
    } else if constexpr (kIsInt<C>) {
      return static_cast<C>(
          static_cast<Unsigned<C>>(static_cast<Unsigned<C>>(a) * static_cast<Unsigned<C>>(b)));
    } else {
      return a * b;
    }
  }
};

struct Div {  // only instantiated for float compute types (div's result is floating)
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return a / b;
    } else {
      return a;  // unreachable
    }
  }
};

// NaN propagates from either side: `a != a` is true only for NaN (and folds away for integers).
struct Maximum {
  template <typename C>
  C operator()(C a, C b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct Minimum {
  template <typename C>
  C operator()(C a, C b) const {
    return (a < b || a != a) ? a : b;
  }
};

// Integer pow by squaring, wrapping like the other integer ops. A negative exponent is an error in
// PyTorch; we define it as the truncated real result instead: 1 for base 1, +-1 for base -1, and 0
// for every other base (0 included), so the reference never throws from inside a kernel.
template <typename C>
C int_pow(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? C(-1) : C(1);
      return 0;
    }
  }
  using U = Unsigned<C>;
  U result = 1, b = static_cast<U>(base), e = static_cast<U>(exp);
  while (e != 0) {
    if (e & 1u) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e = static_cast<U>(e >> 1);
  }
  return static_cast<C>(result);
}

struct Pow {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::pow(a, b);
    } else if constexpr (kIsInt<C>) {
      return int_pow(a, b);
    } else {
      return a || !b;  // unreachable: the type rule rejects bool
    }
  }
};

// ONNX's Mod. fmod=false: the remainder takes the divisor's sign (Python's %, torch.remainder);
// fmod=true: the dividend's (C's fmod, torch.fmod). An integer divisor of 0 gives 0 (numpy's
// answer; the reference never traps), and so does a divisor of -1 (INT_MIN % -1 would trap).
template <bool kFmod>
struct Mod {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      C r = std::fmod(a, b);
      if constexpr (!kFmod) r = (r != C(0) && ((r < C(0)) != (b < C(0)))) ? r + b : r;
      return r;
    } else if constexpr (kIsInt<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (b == C(0) || b == C(-1)) return C(0);
        C r = static_cast<C>(a % b);
        if constexpr (!kFmod) r = (r != C(0) && ((r < C(0)) != (b < C(0)))) ? C(r + b) : r;
        return r;
      } else {
        return b == C(0) ? C(0) : static_cast<C>(a % b);
      }
    } else {
      return a;  // unreachable: the type rule rejects bool
    }
  }
};

// Division rounded toward zero in the operands' own type (torch.div(rounding_mode='trunc'), C's
// integer division, ONNX's Div on integers): exact for every int64, where a detour through f64
// rounds quotients above 2^53. As mod, an integer divisor of 0 gives 0 (the reference never
// traps), and -1 negates with wrapping (INT_MIN / -1 would trap).
struct TruncDiv {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::trunc(a / b);
    } else if constexpr (kIsInt<C>) {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1))
          return static_cast<C>(
              static_cast<Unsigned<C>>(Unsigned<C>(0) - static_cast<Unsigned<C>>(a)));
      }
      return static_cast<C>(a / b);
    } else {
      return a;  // unreachable: the type rule rejects bool
    }
  }
};

enum class BoolRule { kAllow, kRejectAnyBoolOperand, kRejectBoolResult };

// Both operands converted to the result type `ty`, then out = Op(a, b) elementwise.
template <typename Op>
Tensor run_binary(std::span<const Tensor> in, const TensorType& ty, const char* name) {
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  const Tensor a = as_operand(in[0], ty.dtype, ty.shape), b = as_operand(in[1], ty.dtype, ty.shape);
  dispatch_all(ty.dtype, name, [&]<typename T>() {
    using C = compute_t<T>;
    Elementwise<T, T>::template run<T>(
        out, {a, b}, [](C x, C y) { return Op{}(x, y); }, element_cost(name));
  });
  return out;
}

template <typename Op>
OpDef binary_def(std::string name, BoolRule bools, bool true_division = false) {
  OpDef d;
  d.schema = {name, 2, 2, {}};
  d.infer = [bools, true_division](std::span<const TensorType> in, const Attrs&) -> TensorType {
    Shape shape = broadcast_all(in);
    DType dtype = result_type(in);
    if (bools == BoolRule::kRejectAnyBoolOperand &&
        (in[0].dtype == DType::kBool || in[1].dtype == DType::kBool)) {
      // As PyTorch: bool subtraction is ambiguous (xor? inversion?), so it asks for logical ops
      // instead.
      throw Error("not supported for bool operands (use logical_xor or logical_not)");
    }
    if (bools == BoolRule::kRejectBoolResult) reject_bool(dtype);
    if (true_division) dtype = to_floating(dtype);
    return {dtype, std::move(shape)};
  };
  d.kernel = [name, infer = d.infer](std::span<const Tensor> in, const Attrs& attrs) {
    return run_binary<Op>(in, infer(types_of(in), attrs), name.c_str());
  };
  return d;
}

OpDef mod_def() {
  OpDef d = binary_def<Mod<false>>("mod", BoolRule::kRejectBoolResult);
  d.schema.attrs = {{"fmod", AttrKind::kBool, false}};
  d.kernel = [infer = d.infer](std::span<const Tensor> in, const Attrs& attrs) {
    const TensorType ty = infer(types_of(in), attrs);
    return attrs.get_bool_or("fmod", false) ? run_binary<Mod<true>>(in, ty, "mod")
                                            : run_binary<Mod<false>>(in, ty, "mod");
  };
  return d;
}

}  // namespace

void register_binary_ops(OpRegistry& r) {
  r.add(binary_def<Add>("add", BoolRule::kAllow));
  r.add(binary_def<Sub>("sub", BoolRule::kRejectAnyBoolOperand));
  r.add(binary_def<Mul>("mul", BoolRule::kAllow));
  r.add(binary_def<Div>("div", BoolRule::kAllow, /*true_division=*/true));
  r.add(binary_def<Maximum>("maximum", BoolRule::kAllow));
  r.add(binary_def<Minimum>("minimum", BoolRule::kAllow));
  r.add(binary_def<Pow>("pow", BoolRule::kRejectBoolResult));
  r.add(mod_def());
  r.add(binary_def<TruncDiv>("trunc_div", BoolRule::kRejectBoolResult));
}

}  // namespace crucible::ew
