// Tensor storage, views and dtype-converting copies.
#include "crucible/core/tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>

#include "crucible/core/block_cache.h"
#include "crucible/core/error.h"
#include "crucible/core/strided_loop.h"

namespace crucible {

int64_t shape_numel(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s == 0) return 0;
  }
  for (int64_t s : shape) {
    if (__builtin_mul_overflow(n, s, &n)) {
      throw Error(fmt::format("shape {} is too large (over 2^63 elements)", shape_str(shape)));
    }
  }
  return n;
}

void check_shape_bytes(std::span<const int64_t> shape, size_t element_bytes) {
  const int64_t n = shape_numel(shape);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(element_bytes), &bytes) ||
      bytes > kMaxTensorBytes) {
    throw Error(fmt::format("shape {} is too large ({} elements of {} bytes; at most 2^48 bytes)",
                            shape_str(shape), n, element_bytes));
  }
  // An empty tensor's other dimensions multiply too: into its strides, and into every loop bound
  // and outer/inner size an op takes of a part of its shape. Zeros count as one here.
  int64_t span = static_cast<int64_t>(element_bytes);
  for (int64_t s : shape) {
    if (__builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span) || span > kMaxTensorBytes) {
      throw Error(fmt::format(
          "shape {} is too large (its sizes other than 0 span over 2^48 bytes of {}-byte elements)",
          shape_str(shape), element_bytes));
    }
  }
}

Shape contiguous_strides(std::span<const int64_t> shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string shape_str(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* what) {
  int64_t r = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts dim 0 and -1, as in PyTorch
  if (dim < -r || dim >= r) {
    throw Error(fmt::format("{}: dimension {} is out of range for rank {}", what, dim, rank));
  }
  return dim < 0 ? dim + r : dim;
}

namespace {
size_t rounded_bytes(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + Storage::kAlignment - 1) / Storage::kAlignment *
         Storage::kAlignment;
}
}  // namespace

Storage::Storage(size_t bytes) : data_(block_alloc(rounded_bytes(bytes))), bytes_(bytes) {}

Storage::Storage(void* data, size_t bytes, std::shared_ptr<const void> keep)
    : data_(data), bytes_(bytes), keep_(std::move(keep)) {
  if (!keep_) throw Error("borrowed storage needs an owner to keep its memory alive");
}

Storage::~Storage() {
  if (!keep_) block_free(data_, rounded_bytes(bytes_));
}

Tensor Tensor::over(std::shared_ptr<Storage> storage, size_t at, DType dtype, Shape shape) {
  for (int64_t s : shape) {
    if (s < 0) throw Error(fmt::format("tensor shape {} has a negative size", shape_str(shape)));
  }
  check_shape_bytes(shape, dtype_size(dtype));
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (!storage || at % dtype_size(dtype) != 0 || at > storage->bytes() ||
      bytes > storage->bytes() - at) {
    throw Error(fmt::format("a {} tensor {} at byte {} does not fit its storage of {} bytes",
                            dtype_name(dtype), shape_str(shape), at,
                            storage ? storage->bytes() : 0));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.offset_ = static_cast<int64_t>(at / dtype_size(dtype));
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  for (int64_t s : shape) {
    if (s < 0) throw Error(fmt::format("tensor shape {} has a negative size", shape_str(shape)));
  }
  check_shape_bytes(shape, dtype_size(dtype));
  Tensor t;
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.storage_ = std::make_shared<Storage>(t.nbytes());
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(DType dtype, Shape shape, double value) {
  Tensor t = empty(dtype, std::move(shape));
  dispatch_all(dtype, "full", [&]<typename T>() {
    const T v = from_double<T>(value);
    T* p = t.data<T>();
    const int64_t n = t.numel();
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
  return t;
}

Tensor Tensor::from_doubles(DType dtype, Shape shape, std::span<const double> values) {
  Tensor t = empty(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel()) {
    throw Error(
        fmt::format("from_doubles: {} values for shape {}", values.size(), shape_str(t.shape_)));
  }
  dispatch_all(dtype, "from_doubles", [&]<typename T>() {
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = from_double<T>(values[i]);
  });
  return t;
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to place, as in PyTorch
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

Tensor Tensor::as_strided(Shape shape, Shape strides, int64_t offset) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  return t;
}

Tensor Tensor::permute(std::span<const int64_t> dims) const {
  if (static_cast<int64_t>(dims.size()) != dim()) {
    throw Error(fmt::format("permute: {} dims given for rank {}", dims.size(), dim()));
  }
  Shape shape(dims.size()), strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    if (seen[d]) throw Error(fmt::format("permute: dimension {} repeated", d));
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  return as_strided(std::move(shape), std::move(strides), offset_);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  if (dim() == 0) return *this;
  std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
  return permute(dims);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  if (step <= 0) throw Error("slice: step must be positive");
  const int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape shape = shape_, strides = strides_;
  // Written so that no step (up to INT64_MAX) overflows: a one-element slice keeps its stride.
  shape[d] = end == start ? 0 : (end - start - 1) / step + 1;
  if (shape[d] > 1) strides[d] = strides_[d] * step;
  return as_strided(std::move(shape), std::move(strides), offset_ + start * strides_[d]);
}

Tensor Tensor::expand(std::span<const int64_t> shape) const {
  if (shape.size() < shape_.size()) {
    throw Error(fmt::format("expand: cannot expand {} to fewer dimensions {}", shape_str(shape_),
                            shape_str(shape)));
  }
  const size_t lead = shape.size() - shape_.size();
  Shape out(shape.begin(), shape.end()), strides(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (out[i] < 0) throw Error("expand: -1 is not allowed in a new leading dimension");
      continue;
    }
    int64_t have = shape_[i - lead];
    if (out[i] == -1) out[i] = have;
    if (have == out[i]) {
      strides[i] = strides_[i - lead];
    } else if (have != 1) {
      throw Error(
          fmt::format("expand: cannot expand {} to {}", shape_str(shape_), shape_str(shape)));
    }
  }
  return as_strided(std::move(out), std::move(strides), offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  d = wrap_dim(d, dim(), "squeeze");
  if (shape_[d] != 1) return *this;  // PyTorch leaves non-1 dimensions alone
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return as_strided(std::move(shape), std::move(strides), offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape shape = shape_, strides = strides_;
  int64_t stride = d < dim() ? strides_[d] * shape_[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return as_strided(std::move(shape), std::move(strides), offset_);
}

Shape infer_reshape(std::span<const int64_t> shape, int64_t numel) {
  Shape out(shape.begin(), shape.end());
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer_at >= 0) throw Error("reshape: only one dimension can be -1");
      infer_at = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      throw Error(fmt::format("reshape: invalid size {}", out[i]));
    } else {
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) {
      throw Error(
          fmt::format("reshape: shape {} is invalid for {} elements", shape_str(shape), numel));
    }
    out[infer_at] = numel / known;
  } else if (known != numel) {
    throw Error(
        fmt::format("reshape: shape {} is invalid for {} elements", shape_str(shape), numel));
  }
  return out;
}

namespace {
// Strides for viewing `t` as `shape` without a copy, or empty if the memory layout does not allow
// it. Walks both shapes in chunks of equal element count; each chunk of `t` must be internally
// contiguous.
std::optional<Shape> view_strides(const Tensor& t, const Shape& shape) {
  if (t.numel() == 0) return contiguous_strides(shape);
  Shape out(shape.size());
  const Shape& old = t.shape();
  const Shape& ost = t.strides();
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = ost.empty() ? 1 : ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old.size()) - 1; d >= 0; --d) {
    tensor_numel *= old[d];
    if (d == 0 || (old[d - 1] != 1 && ost[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = ost[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) {
    for (; view_d >= 0; --view_d) out[view_d] = 1;  // only size-1 dims can remain
  }
  return out;
}
}  // namespace

Tensor Tensor::reshape(std::span<const int64_t> shape) const {
  Shape target = infer_reshape(shape, numel());
  if (auto strides = view_strides(*this, target)) return as_strided(target, *strides, offset_);
  return contiguous().as_strided(target, contiguous_strides(target), 0);
}

std::optional<Tensor> Tensor::try_view(std::span<const int64_t> shape) const {
  Shape target = infer_reshape(shape, numel());
  if (auto strides = view_strides(*this, target)) return as_strided(target, *strides, offset_);
  return std::nullopt;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(dtype_, shape_);
  out.copy_from(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  Tensor out = empty(dtype, shape_);
  out.copy_from(*this);
  return out;
}

namespace {
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<compute_t<From>>(v) != 0;
  } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>) {
    return from_double<To>(static_cast<double>(static_cast<compute_t<From>>(v)));
  } else {
    return static_cast<To>(static_cast<compute_t<To>>(static_cast<compute_t<From>>(v)));
  }
}
}  // namespace

void Tensor::copy_from(const Tensor& src) {
  if (src.shape_ != shape_) {
    throw Error(
        fmt::format("copy: shape {} does not match {}", shape_str(src.shape_), shape_str(shape_)));
  }
  if (src.dtype_ == dtype_ && is_contiguous() && src.is_contiguous()) {
    if (nbytes() > 0 && raw_data() != src.raw_data())
      std::memcpy(raw_data(), src.raw_data(), nbytes());
    return;
  }
  auto layout = coalesce<2>(
      shape_, {std::span<const int64_t>(strides_), std::span<const int64_t>(src.strides_)});
  dispatch_all(dtype_, "copy", [&]<typename To>() {
    dispatch_all(src.dtype_, "copy", [&]<typename From>() {
      To* dst = data<To>();
      const From* s = src.data<From>();
      for_each_row(
          layout, 1,
          [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
            To* d = dst + off[0];
            const From* p = s + off[1];
            if (st[0] == 1 && st[1] == 1) {
              for (int64_t i = 0; i < n; ++i) d[i] = convert<To>(p[i]);
            } else {
              for (int64_t i = 0; i < n; ++i) d[i * st[0]] = convert<To>(p[i * st[1]]);
            }
          });
    });
  });
}

double Tensor::get(int64_t linear_index) const {
  // An empty tensor has no element 0 (and a zero dim would divide by zero below).
  if (linear_index < 0 || linear_index >= numel())
    throw Error(
        fmt::format("get: element {} of a tensor of shape {}", linear_index, shape_str(shape_)));
  int64_t off = 0, r = linear_index;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    off += (r % shape_[d]) * strides_[d];
    r /= shape_[d];
  }
  return dispatch_all(dtype_, "get", [&]<typename T>() -> double {
    return static_cast<double>(static_cast<compute_t<T>>(data<T>()[off]));
  });
}

std::vector<double> Tensor::to_doubles() const {
  Tensor d = to(DType::kF64);
  const double* p = d.data<double>();
  return std::vector<double>(p, p + d.numel());
}

Shape broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw Error(fmt::format("shapes {} and {} cannot be broadcast", shape_str(a), shape_str(b)));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace crucible
