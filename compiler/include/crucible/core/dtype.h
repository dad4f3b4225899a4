// Element types of tensors, their names in the .graph format, PyTorch's type-promotion lattice,
// and the dispatch macro that turns a runtime DType into a C++ type for templated kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "crucible/core/bfloat16.h"

namespace crucible {

enum class DType : uint8_t { kBool, kU8, kI32, kI64, kBF16, kF32, kF64 };

inline constexpr DType kAllDTypes[] = {DType::kBool, DType::kU8,  DType::kI32, DType::kI64,
                                       DType::kBF16, DType::kF32, DType::kF64};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "u8", "bool", ...
std::optional<DType> parse_dtype(std::string_view name);

inline bool is_floating(DType t) {
  return t == DType::kBF16 || t == DType::kF32 || t == DType::kF64;
}
inline bool is_integral(DType t) { return t == DType::kU8 || t == DType::kI32 || t == DType::kI64; }

// PyTorch's promote_types restricted to our dtypes: bool < integers < floats by category; within a
// category the wider type wins (u8 with i32 gives i32; bf16 with f32 gives f32; i64 with bf16 gives
// bf16).
DType promote_types(DType a, DType b);

// The type a float-valued op (exp, sigmoid, div, mean...) computes in: floats keep theirs,
// bool and integers go to f32 as PyTorch's default dtype does.
inline DType to_floating(DType t) { return is_floating(t) ? t : DType::kF32; }

// A float cast to an integer dtype as PyTorch's CPU casts do (eager's cast, and the constants
// codegen writes): NaN gives 0, a value past int64 INT64_MIN, anything else truncates through
// int64 (the caller wraps it to the narrower type). Never an undefined conversion.
inline int64_t float_to_int64(double d) {
  if (d != d) return 0;
  if (d >= 9.2e18 || d <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(d);
}

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kU8;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBF16;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};

// The type arithmetic happens in for storage type T: bf16 computes in float, everything else in
// itself.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeType<T>::type;

// A double stored as T the way a cast to T's dtype does it: integers go through float_to_int64
// (a value past the type, from a file or an attribute, must not reach an undefined conversion).
template <typename T>
inline T from_double(double d) {
  if constexpr (std::is_same_v<T, bool>) {
    return d != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(float_to_int64(d));
  } else {
    return static_cast<T>(static_cast<compute_t<T>>(d));
  }
}

[[noreturn]] void throw_unsupported_dtype(DType t, const char* what);

// dispatch_all(dtype, "op", [&]<typename T>() { ... }) calls the lambda with T bound to the storage
// type of `dtype`. dispatch_float accepts only floating types and names `what` otherwise.
// (Functions, not macros, so that OpenMP pragmas work inside the lambda.)
template <typename F>
decltype(auto) dispatch_all(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::kBool:
      return f.template operator()<bool>();
    case DType::kU8:
      return f.template operator()<uint8_t>();
    case DType::kI32:
      return f.template operator()<int32_t>();
    case DType::kI64:
      return f.template operator()<int64_t>();
    case DType::kBF16:
      return f.template operator()<BFloat16>();
    case DType::kF32:
      return f.template operator()<float>();
    case DType::kF64:
      return f.template operator()<double>();
  }
  throw_unsupported_dtype(t, what);
}

template <typename F>
decltype(auto) dispatch_float(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::kBF16:
      return f.template operator()<BFloat16>();
    case DType::kF32:
      return f.template operator()<float>();
    case DType::kF64:
      return f.template operator()<double>();
    default:
      throw_unsupported_dtype(t, what);
  }
}

}  // namespace crucible
