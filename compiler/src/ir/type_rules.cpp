// PyTorch-compatible result types, broadcasting and reduction shapes.
#include "crucible/ir/type_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "crucible/core/error.h"

namespace crucible {

DType result_type(std::span<const TensorType> operands) {
  std::optional<DType> dimensioned, zero_dim;
  for (const TensorType& t : operands) {
    auto& slot = t.shape.empty() ? zero_dim : dimensioned;
    slot = slot ? promote_types(*slot, t.dtype) : t.dtype;
  }
  if (!dimensioned) return *zero_dim;
  if (!zero_dim || is_floating(*dimensioned)) return *dimensioned;
  // A 0-d operand matters only when it is of a higher category (a float scalar with an integer
  // tensor, or anything with a bool tensor): then the two promote as usual.
  if (*dimensioned == DType::kBool || is_floating(*zero_dim))
    return promote_types(*dimensioned, *zero_dim);
  return *dimensioned;
}

Shape broadcast_all(std::span<const TensorType> operands) {
  Shape out;
  for (const TensorType& t : operands) out = broadcast_shapes(out, t.shape);
  return out;
}

std::vector<int64_t> reduction_dims(const Shape& shape, const std::vector<int64_t>& dims) {
  const auto rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, rank, "reduction");
    if (std::find(out.begin(), out.end(), w) != out.end()) {
      throw Error(fmt::format("dimension {} appears twice in dims", d));
    }
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<int64_t> rd = reduction_dims(shape, dims);
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool reduced = std::binary_search(rd.begin(), rd.end(), d);
    if (!reduced) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

}  // namespace crucible
