// Tensor: a dtype, a shape and element strides over shared 64-byte-aligned storage.
// Views (reshape, permute, slice, expand, squeeze/unsqueeze) share storage; copies are explicit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "crucible/core/dtype.h"

namespace crucible {

using Shape = std::vector<int64_t>;

// The element count; throws Error when the product overflows int64.
int64_t shape_numel(std::span<const int64_t> shape);
// Largest tensor crucible creates: 2^48 bytes (256 TiB), far above any machine's memory and far
// below where byte offsets, oneDNN's dims or a kernel's index arithmetic could overflow.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;
// Throws Error("shape [...] is too large ...") when shape's bytes exceed kMaxTensorBytes, or
// its sizes with zeros counted as one would (an empty [2^62,4,0] has strides past int64).
void check_shape_bytes(std::span<const int64_t> shape, size_t element_bytes);
Shape contiguous_strides(std::span<const int64_t> shape);
std::string shape_str(std::span<const int64_t> shape);  // "[2,3]"
// Wraps a possibly negative dimension index into [0, rank); throws Error naming `what` if out of
// range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* what);

// Owned, aligned, zero-initialisation-free memory block; or memory another object owns (a mapping
// the timing worker reads its calls' inputs from), kept alive by `keep` and never freed here.
class Storage {
 public:
  static constexpr size_t kAlignment = 64;
  explicit Storage(size_t bytes);
  Storage(void* data, size_t bytes, std::shared_ptr<const void> keep);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::shared_ptr<const void> keep_;  // set when the memory is borrowed
};

class Tensor {
 public:
  Tensor() = default;

  // A new contiguous tensor with uninitialised contents.
  static Tensor empty(DType dtype, Shape shape);
  static Tensor zeros(DType dtype, Shape shape);
  static Tensor full(DType dtype, Shape shape, double value);
  // A contiguous tensor holding `values` converted to `dtype` (for tests and small constants).
  static Tensor from_doubles(DType dtype, Shape shape, std::span<const double> values);
  // A contiguous tensor over `storage` from byte `at` (aligned to the dtype); throws Error when it
  // does not fit.
  static Tensor over(std::shared_ptr<Storage> storage, size_t at, DType dtype, Shape shape);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const { return shape_[wrap_dim(d, dim(), "size")]; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Pointer to the element at offset(); indexing by strides is the caller's job.
  void* raw_data() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  // Views: share storage, never copy.
  Tensor permute(std::span<const int64_t> dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor expand(std::span<const int64_t> shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor as_strided(Shape shape, Shape strides, int64_t offset) const;
  // A view when the strides allow it, a contiguous copy otherwise (like torch.reshape). -1 infers a
  // size.
  Tensor reshape(std::span<const int64_t> shape) const;
  // The view reshape would return, or nullopt when reshaping needs a copy (like torch.view).
  std::optional<Tensor> try_view(std::span<const int64_t> shape) const;

  // Copies.
  Tensor contiguous() const;     // returns *this when already contiguous
  Tensor clone() const;          // always a fresh contiguous copy
  Tensor to(DType dtype) const;  // fresh contiguous copy converted to dtype (same-dtype: clone)
  // Copies src's values into this tensor (same shape; converts dtype). Handles any strides on both
  // sides.
  void copy_from(const Tensor& src);

  // Element access by linear (row-major logical) index, converting through double; for tests and
  // printing.
  double get(int64_t linear_index) const;
  std::vector<double> to_doubles() const;

 private:
  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::kF32;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
};

// Resolves a single -1 in `shape` against numel; throws Error on a mismatch.
Shape infer_reshape(std::span<const int64_t> shape, int64_t numel);
// NumPy/PyTorch broadcasting of two shapes; throws Error naming both shapes when incompatible.
Shape broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b);

}  // namespace crucible
