// Unary elementwise ops: dtype-keeping (neg, abs, relu, clamp, floor, ceil, round, sign),
// float-valued math (exp ... atanh, gelu, silu ...), bool-valued (isnan, isinf, logical_not).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "crucible/core/error.h"
#include "crucible/core/fast_math.h"
#include "crucible/ops/clamp_bounds.h"
#include "elementwise/activation_math.h"
#include "elementwise/elementwise_internal.h"
#include "elementwise/elementwise_loop.h"

#if defined(__AVX512F__)
#include <immintrin.h>
// glibc's libmvec (part of libc6): sinf/cosf on 16 lanes, within 4 ulp by glibc's manual, NaN for
// NaN and infinities as libm. PyTorch's eager runs SLEEF's vectors on these ops; with scalar libm
// calls our eager took 3.1 us for torch.compile's 10x10 sin(x) + cos(y) against its 2.1.
extern "C" __m512 _ZGVeN16v_sinf(__m512);
extern "C" __m512 _ZGVeN16v_cosf(__m512);
#endif

namespace crucible::ew {

void reject_bool(DType t) {
  if (t == DType::kBool) throw Error("not supported for bool");
}

namespace {

template <typename C>
inline constexpr bool kIsInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// --- dtype-keeping ops. Integers go through their unsigned type so that neg/abs of the minimum
// value wrap (as PyTorch's two's-complement kernels do) instead of being undefined behaviour.
struct Neg {
  template <typename C>
  C operator()(C x) const {
    if constexpr (kIsInt<C>) {
      using U = std::make_unsigned_t<C>;
      return static_cast<C>(static_cast<U>(U(0) - static_cast<U>(x)));
    } else if constexpr (std::is_same_v<C, bool>) {
      return x;  // unreachable: the type rule rejects bool
    } else {
      return -x;
    }
  }
};

struct Abs {
  template <typename C>
  C operator()(C x) const {
    if constexpr (kIsInt<C> && std::is_signed_v<C>) {
      return x < 0 ? Neg{}(x) : x;
    } else if constexpr (std::is_floating_point_v<C>) {
      return std::abs(x);
    } else {
      return x;  // unsigned (and bool, unreachable)
    }
  }
};

struct Relu {
  template <typename C>
  C operator()(C x) const {
    return x <= C(0) ? C(0) : x;  // NaN fails the comparison and passes through, as in PyTorch
  }
};

// Rounding keeps integers as they are; round is half to even (nearbyint in the default rounding
// mode), as ONNX's Round and torch.round.
#define CRUCIBLE_ROUNDING(Name, fn)                                 \
  struct Name {                                                     \
    template <typename C>                                           \
    C operator()(C x) const {                                       \
      if constexpr (std::is_floating_point_v<C>) return std::fn(x); \
      return x;                                                     \
    }                                                               \
  };
CRUCIBLE_ROUNDING(Floor, floor)
CRUCIBLE_ROUNDING(Ceil, ceil)
CRUCIBLE_ROUNDING(Round, nearbyint)
#undef CRUCIBLE_ROUNDING
// -1, 0 or 1; NaN stays NaN (numpy's sign, ONNX's reference).
struct Sign {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return x != x ? x : static_cast<C>((x > C(0)) - (x < C(0)));
    } else if constexpr (std::is_signed_v<C>) {
      return static_cast<C>((x > C(0)) - (x < C(0)));
    } else {
      return static_cast<C>(x > C(0));
    }
  }
};

// --- float-valued ops: C is always float or double here.
// exp, tanh, sigmoid, erf and gelu compute float (and bf16) with fast_math.h's vectorizable forms,
// as PyTorch's eager kernels use vectorized SLEEF ones: libm's scalar calls would leave eager
// compute-bound at a tenth of memory bandwidth (gelu over 8192x2048: 65 ms against 2 ms), and a
// speed-up over such a baseline measures libm, not fusion. The codegen backend emits the same
// functions, so both agree to the rounding of the surrounding arithmetic; f64 keeps libm.
using act::erf_of;
using act::exp_of;
using act::tanh_of;

struct Exp {
  template <typename C>
  C operator()(C x) const {
    return exp_of(x);
  }
};
struct Log {
  template <typename C>
  C operator()(C x) const {
    return std::log(x);
  }
};
struct Sqrt {
  template <typename C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};
struct Rsqrt {
  template <typename C>
  C operator()(C x) const {
    return C(1) / std::sqrt(x);
  }
};
struct Sin {
  template <typename C>
  C operator()(C x) const {
    return std::sin(x);
  }
};
struct Cos {
  template <typename C>
  C operator()(C x) const {
    return std::cos(x);
  }
};
#define CRUCIBLE_LIBM_UNARY(Name, fn) \
  struct Name {                       \
    template <typename C>             \
    C operator()(C x) const {         \
      return std::fn(x);              \
    }                                 \
  };
CRUCIBLE_LIBM_UNARY(Tan, tan)
CRUCIBLE_LIBM_UNARY(Asin, asin)
CRUCIBLE_LIBM_UNARY(Acos, acos)
CRUCIBLE_LIBM_UNARY(Atan, atan)
CRUCIBLE_LIBM_UNARY(Sinh, sinh)
CRUCIBLE_LIBM_UNARY(Cosh, cosh)
CRUCIBLE_LIBM_UNARY(Asinh, asinh)
CRUCIBLE_LIBM_UNARY(Acosh, acosh)
CRUCIBLE_LIBM_UNARY(Atanh, atanh)
#undef CRUCIBLE_LIBM_UNARY
struct Tanh {
  template <typename C>
  C operator()(C x) const {
    return tanh_of(x);
  }
};
using act::Sigmoid;
struct Erf {
  template <typename C>
  C operator()(C x) const {
    return erf_of(x);
  }
};
struct Reciprocal {
  template <typename C>
  C operator()(C x) const {
    return C(1) / x;
  }
};
struct GeluErf {
  template <typename C>
  C operator()(C x) const {
    return C(0.5) * x * (C(1) + erf_of(x * C(0.70710678118654752440)));
  }
};
struct GeluTanh {
  template <typename C>
  C operator()(C x) const {
    const C kBeta = C(0.79788456080286535588);  // sqrt(2/pi)
    const C inner = kBeta * (x + C(0.044715) * x * x * x);
    return C(0.5) * x * (C(1) + tanh_of(inner));
  }
};

using act::Hardsigmoid;  // the mobile networks' activations (activation_math.h)
using act::Hardswish;
using act::Silu;

template <typename Op>
OpDef same_dtype_def(std::string name) {
  OpDef d;
  d.schema = {name, 1, 1, {}};
  d.infer = [](std::span<const TensorType> in, const Attrs&) {
    reject_bool(in[0].dtype);
    return in[0];
  };
  d.kernel = [name, infer = d.infer](std::span<const Tensor> in, const Attrs& attrs) {
    const TensorType ty = infer(types_of(in), attrs);
    Tensor out = Tensor::empty(ty.dtype, ty.shape);
    dispatch_all(ty.dtype, name.c_str(), [&]<typename T>() {
      Elementwise<T>::template run<T>(
          out, {in[0]}, [](compute_t<T> x) { return Op{}(x); }, element_cost(name));
    });
    return out;
  };
  return d;
}

// y = sin(x) or cos(x) over n contiguous floats with libmvec's 16-lane calls (the tail padded);
// false where the build has no AVX-512 (the elementwise loop's libm calls then run).
template <typename Op>
bool vector_trig_f32(const float* x, float* y, int64_t n, int64_t cost) {
#if defined(__AVX512F__)
  constexpr int64_t kLanes = 16;
  const int64_t blocks = (n + kLanes - 1) / kLanes;
#pragma omp parallel for schedule(static) if (worth_parallel(n, cost) && blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t at = b * kLanes, len = std::min(kLanes, n - at);
    const __mmask16 m = static_cast<__mmask16>((1u << len) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + at);
    const __m512 r = std::is_same_v<Op, Sin> ? _ZGVeN16v_sinf(v) : _ZGVeN16v_cosf(v);
    _mm512_mask_storeu_ps(y + at, m, r);
  }
  return true;
#else
  (void)x, (void)y, (void)n, (void)cost;
  return false;
#endif
}

// Runs a float-valued op: floating inputs compute in their own compute type; bool and integer
// inputs are converted to an f32 copy first (the same value the loop's cast gives) and the result
// is f32. The copy keeps each op to 3 loop instantiations rather than 7: this file was 65 of the
// first run's 814 CPU seconds of build, and integer inputs to float math are rare.
template <typename Op>
Tensor run_float_unary(const Tensor& x, const TensorType& ty, const char* name) {
  if (!is_floating(x.dtype())) return run_float_unary<Op>(x.to(DType::kF32), ty, name);
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if constexpr (std::is_same_v<Op, Sin> || std::is_same_v<Op, Cos>) {
    if (x.dtype() == DType::kF32 && x.is_contiguous() &&
        vector_trig_f32<Op>(x.data<float>(), out.data<float>(), x.numel(), element_cost(name))) {
      return out;
    }
  }
  dispatch_float(x.dtype(), name, [&]<typename T>() {
    Elementwise<T>::template run<T>(
        out, {x}, [](compute_t<T> v) { return Op{}(v); }, element_cost(name));
  });
  return out;
}

TensorType float_rule(std::span<const TensorType> in, const Attrs&) {
  return {to_floating(in[0].dtype), in[0].shape};
}

template <typename Op>
OpDef float_def(std::string name) {
  OpDef d;
  d.schema = {name, 1, 1, {}};
  d.infer = float_rule;
  d.kernel = [name](std::span<const Tensor> in, const Attrs& attrs) {
    return run_float_unary<Op>(in[0], float_rule(types_of(in), attrs), name.c_str());
  };
  return d;
}

bool gelu_uses_tanh(const Attrs& attrs) {
  const std::string mode = attrs.get_string_or("approximate", "none");
  if (mode != "none" && mode != "tanh") {
    throw Error(fmt::format("approximate must be 'none' or 'tanh', got '{}'", mode));
  }
  return mode == "tanh";
}

OpDef gelu_def() {
  OpDef d;
  d.schema = {"gelu", 1, 1, {{"approximate", AttrKind::kString, false}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) {
    gelu_uses_tanh(attrs);
    return float_rule(in, attrs);
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const TensorType ty = float_rule(types_of(in), attrs);
    return gelu_uses_tanh(attrs) ? run_float_unary<GeluTanh>(in[0], ty, "gelu")
                                 : run_float_unary<GeluErf>(in[0], ty, "gelu");
  };
  return d;
}

// clamp bounds are converted to x's dtype. For integer dtypes they saturate to the type's range
// first (min=-5 on u8 means "no lower bound", not a wrapped 251) and then truncate toward zero,
// which is what converting the scalar to the tensor's type does in PyTorch versions without scalar
// promotion.
template <typename T>
compute_t<T> clamp_bound(double b) {
  using C = compute_t<T>;
  if constexpr (kIsInt<T>) {
    if (b <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (b >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(b);
  } else {
    return static_cast<C>(static_cast<T>(static_cast<C>(b)));  // rounds to bf16 for bf16 tensors
  }
}

TensorType clamp_rule(std::span<const TensorType> in, const Attrs& attrs) {
  reject_bool(in[0].dtype);
  const std::optional<double> lo = attrs.get_optional_float("min"),
                              hi = attrs.get_optional_float("max");
  if (!lo && !hi) throw Error("needs at least one of the attributes 'min' and 'max'");
  if (!is_floating(in[0].dtype) && ((lo && std::isnan(*lo)) || (hi && std::isnan(*hi)))) {
    throw Error(fmt::format("a NaN bound cannot be converted to {}", dtype_name(in[0].dtype)));
  }
  return in[0];
}

OpDef clamp_def() {
  OpDef d;
  d.schema = {"clamp", 1, 1, {{"min", AttrKind::kFloat, false}, {"max", AttrKind::kFloat, false}}};
  d.infer = clamp_rule;
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const TensorType ty = clamp_rule(types_of(in), attrs);
    const std::optional<double> lo = attrs.get_optional_float("min"),
                                hi = attrs.get_optional_float("max");
    if (clamp_is_all_nan(lo, hi)) {
      return Tensor::full(ty.dtype, ty.shape, std::numeric_limits<double>::quiet_NaN());
    }
    Tensor out = Tensor::empty(ty.dtype, ty.shape);
    dispatch_all(ty.dtype, "clamp", [&]<typename T>() {
      using C = compute_t<T>;
      const C l = clamp_bound<T>(clamp_lower(lo)), h = clamp_bound<T>(clamp_upper(hi));
      // A NaN x fails both comparisons and stays NaN.
      Elementwise<T>::template run<T>(out, {in[0]}, [l, h](C x) {
        C r = x < l ? l : x;
        return r > h ? h : r;
      });
    });
    return out;
  };
  return d;
}

// --- bool-valued tests: any dtype in, bool out.
TensorType bool_rule(std::span<const TensorType> in, const Attrs&) {
  return {DType::kBool, in[0].shape};
}

// out = test(x) over any dtype; `test` sees the compute type.
template <typename Test>
Tensor run_bool_unary(const Tensor& x, const char* name, const Test& test) {
  Tensor out = Tensor::empty(DType::kBool, x.shape());
  dispatch_all(x.dtype(), name, [&]<typename T>() {
    Elementwise<T>::template run<bool>(out, {x}, [&test](compute_t<T> v) { return test(v); });
  });
  return out;
}

// A bool-valued op without attributes: out = test(x).
template <typename Test>
OpDef bool_def(std::string name, Test test) {
  OpDef d;
  d.schema = {name, 1, 1, {}};
  d.infer = bool_rule;
  d.kernel = [name, test](std::span<const Tensor> in, const Attrs&) {
    return run_bool_unary(in[0], name.c_str(), test);
  };
  return d;
}

// ONNX's IsInf: detect_positive / detect_negative (both true by default) pick the infinities.
OpDef isinf_def() {
  OpDef d;
  d.schema = {
      "isinf",
      1,
      1,
      {{"detect_positive", AttrKind::kBool, false}, {"detect_negative", AttrKind::kBool, false}}};
  d.infer = bool_rule;
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const bool pos = attrs.get_bool_or("detect_positive", true),
               neg = attrs.get_bool_or("detect_negative", true);
    return run_bool_unary(in[0], "isinf", [pos, neg](auto v) {
      using C = decltype(v);
      if constexpr (std::is_floating_point_v<C>) {
        const C inf = std::numeric_limits<C>::infinity();
        return (pos && v == inf) || (neg && v == -inf);
      } else {
        return false;
      }
    });
  };
  return d;
}

}  // namespace

void register_unary_ops(OpRegistry& r) {
  r.add(same_dtype_def<Neg>("neg"));
  r.add(same_dtype_def<Abs>("abs"));
  r.add(same_dtype_def<Relu>("relu"));
  r.add(float_def<Exp>("exp"));
  r.add(float_def<Log>("log"));
  r.add(float_def<Sqrt>("sqrt"));
  r.add(float_def<Rsqrt>("rsqrt"));
  r.add(float_def<Sin>("sin"));
  r.add(float_def<Cos>("cos"));
  r.add(float_def<Tanh>("tanh"));
  r.add(float_def<Sigmoid>("sigmoid"));
  r.add(float_def<Erf>("erf"));
  r.add(float_def<Reciprocal>("reciprocal"));
  r.add(gelu_def());
  r.add(clamp_def());
  r.add(float_def<Silu>("silu"));
  r.add(float_def<Hardswish>("hardswish"));
  r.add(float_def<Hardsigmoid>("hardsigmoid"));
  r.add(same_dtype_def<Floor>("floor"));
  r.add(same_dtype_def<Ceil>("ceil"));
  r.add(same_dtype_def<Round>("round"));
  r.add(same_dtype_def<Sign>("sign"));
  r.add(float_def<Tan>("tan"));
  r.add(float_def<Asin>("asin"));
  r.add(float_def<Acos>("acos"));
  r.add(float_def<Atan>("atan"));
  r.add(float_def<Sinh>("sinh"));
  r.add(float_def<Cosh>("cosh"));
  r.add(float_def<Asinh>("asinh"));
  r.add(float_def<Acosh>("acosh"));
  r.add(float_def<Atanh>("atanh"));
  r.add(bool_def("isnan", [](auto v) { return v != v; }));
  r.add(isinf_def());
  // Any dtype: zero is false, everything else (NaN too) true, as torch.logical_not.
  r.add(bool_def("logical_not", [](auto v) { return v == decltype(v)(0); }));
}

}  // namespace crucible::ew
