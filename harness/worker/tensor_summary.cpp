// Tensor summaries (see tensor_summary.h).
#include "tensor_summary.h"

#include <fmt/format.h>

#include "crucible/core/fnv1a.h"

namespace crucible {

uint64_t tensor_fnv1a(const Tensor& t) {
  Tensor c = t.contiguous();
  return fnv1a(std::string_view(static_cast<const char*>(c.raw_data()), c.nbytes()));
}

double tensor_sum(const Tensor& t) {
  Tensor d = t.to(DType::kF64);
  const double* p = d.data<double>();
  double s = 0;
  for (int64_t i = 0; i < d.numel(); ++i) s += p[i];
  return s;
}

std::string summarize_tensor(const Tensor& t, int max_values) {
  std::string values;
  const int64_t n = std::min<int64_t>(t.numel(), max_values);
  for (int64_t i = 0; i < n; ++i) values += fmt::format("{}{:.6g}", i ? ", " : "", t.get(i));
  if (t.numel() > n) values += ", ...";
  return fmt::format("{}{} sum={:.6g} fnv={:016x} [{}]", dtype_name(t.dtype()),
                     shape_str(t.shape()), tensor_sum(t), tensor_fnv1a(t), values);
}

}  // namespace crucible
