// Tensors between crucible and ATen: dtype mapping, zero-copy views of crucible tensors for
// inputs, owned copies for parameters, and outputs copied back into crucible tensors.
#pragma once

#include <ATen/ATen.h>

#include "crucible/core/tensor.h"

namespace crucible::libtorch {

at::ScalarType to_aten(DType t);
// Throws Error for an ATen dtype crucible has no equivalent of.
DType from_aten(at::ScalarType t);

// A view of `t`'s memory (its strides and offset kept): `t` must outlive it.
at::Tensor aten_view(const Tensor& t);
// An ATen tensor that owns a contiguous copy of `t`.
at::Tensor aten_copy(const Tensor& t);
// A fresh contiguous crucible tensor with `t`'s values.
Tensor from_aten(const at::Tensor& t);

}  // namespace crucible::libtorch
