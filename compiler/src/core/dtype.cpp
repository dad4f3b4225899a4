// DType names, sizes and PyTorch-compatible promotion.
#include "crucible/core/dtype.h"

#include <string>

#include "crucible/core/error.h"

namespace crucible {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kU8:
      return 1;
    case DType::kBF16:
      return 2;
    case DType::kI32:
    case DType::kF32:
      return 4;
    case DType::kI64:
    case DType::kF64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kU8:
      return "u8";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kBF16:
      return "bf16";
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

namespace {
int category(DType t) {
  if (t == DType::kBool) return 0;
  if (is_integral(t)) return 1;
  return 2;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  // Same category: the enum is ordered by width within each category.
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

void throw_unsupported_dtype(DType t, const char* what) {
  throw Error(std::string(what) + ": dtype " + std::string(dtype_name(t)) + " is not supported");
}

}  // namespace crucible
