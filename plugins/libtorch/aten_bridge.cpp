// Tensors between crucible and ATen (see aten_bridge.h). bf16 is bit-compatible (both store the
// top 16 bits of an f32) and bool is one byte of 0 or 1 in both, so every copy is a memcpy.
#include "aten_bridge.h"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "crucible/core/error.h"

namespace crucible::libtorch {

namespace {
constexpr std::pair<DType, at::ScalarType> kDTypes[] = {
    {DType::kBool, at::kBool}, {DType::kU8, at::kByte},       {DType::kI32, at::kInt},
    {DType::kI64, at::kLong},  {DType::kBF16, at::kBFloat16}, {DType::kF32, at::kFloat},
    {DType::kF64, at::kDouble}};
}  // namespace

at::ScalarType to_aten(DType t) {
  for (const auto& [ours, theirs] : kDTypes) {
    if (ours == t) return theirs;
  }
  throw Error("libtorch: unknown dtype");
}

DType from_aten(at::ScalarType t) {
  for (const auto& [ours, theirs] : kDTypes) {
    if (theirs == t) return ours;
  }
  throw Error(
      fmt::format("libtorch: ATen produced {}, which crucible has no dtype for", c10::toString(t)));
}

at::Tensor aten_view(const Tensor& t) {
  return at::from_blob(t.raw_data(), t.shape(), t.strides(),
                       at::TensorOptions().dtype(to_aten(t.dtype())));
}

at::Tensor aten_copy(const Tensor& t) { return aten_view(t).clone(at::MemoryFormat::Contiguous); }

Tensor from_aten(const at::Tensor& t) {
  Tensor out = Tensor::empty(from_aten(t.scalar_type()), Shape(t.sizes().begin(), t.sizes().end()));
  if (out.numel() == 0) return out;
  const at::Tensor c = t.contiguous();
  std::memcpy(out.raw_data(), c.data_ptr(), out.nbytes());
  return out;
}

}  // namespace crucible::libtorch
