// Linear algebra (matmul, linear, addmm, embedding): type rules and eager kernels that hand strided
// operands to the GEMMs of gemm.h, copying only layouts BLAS cannot express.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/parallel_grain.h"
#include "crucible/core/strided_loop.h"
#include "crucible/ops/gemm.h"
#include "register_ops.h"

namespace crucible {
namespace {

// ---- Mapping strided matrices onto BLAS layouts ----

// A [rows, cols] matrix with strides (rs, cs) as BLAS sees it: row-major with leading dimension
// ld, or the transpose of one. Size-1 dims may have any stride, so they never force a copy.
struct BlasLayout {
  bool trans;
  int64_t ld;
};

std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cols == 1 || cs == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    if (ld >= std::max<int64_t>(cols, 1)) return BlasLayout{false, ld};
  }
  if (rows == 1 || rs == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    if (ld >= std::max<int64_t>(rows, 1)) return BlasLayout{true, ld};
  }
  return std::nullopt;
}

BlasLayout matrix_layout(const Tensor& t) {
  const int64_t n = t.dim(), rows = t.shape()[n - 2], cols = t.shape()[n - 1];
  if (auto l = blas_layout(rows, cols, t.strides()[n - 2], t.strides()[n - 1])) return *l;
  // An empty matrix keeps whatever strides it had (contiguous() has nothing to copy): BLAS reads
  // none of it and needs only a valid leading dimension. Reading the empty optional instead was
  // undefined (caught by _GLIBCXX_ASSERTIONS in the sanitized build).
  if (rows == 0 || cols == 0) return {false, std::max<int64_t>(cols, 1)};
  throw Error(fmt::format("matmul: operand strides [{}, {}] fit no BLAS layout", t.strides()[n - 2],
                          t.strides()[n - 1]));
}

// The operand itself when its trailing two dims fit a BLAS layout (plain, transposed, or with a
// padded leading dimension); a contiguous copy otherwise (sliced with a step, broadcast rows...).
Tensor blas_ready(const Tensor& t) {
  const int64_t n = t.dim();
  if (blas_layout(t.shape()[n - 2], t.shape()[n - 1], t.strides()[n - 2], t.strides()[n - 1]))
    return t;
  return t.contiguous();
}

void gemm_batched(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, const float* a,
                  int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float* c,
                  int64_t ldc, int64_t sc, float beta, float alpha) {
  gemm_batched_f32(ta, tb, batch, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, beta, alpha);
}
void gemm_batched(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, const double* a,
                  int64_t lda, int64_t sa, const double* b, int64_t ldb, int64_t sb, double* c,
                  int64_t ldc, int64_t sc, double beta, double alpha) {
  gemm_batched_f64(ta, tb, batch, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, beta, alpha);
}

// c[batch..., M, N] (contiguous) = alpha * a @ b + beta * c, where a [..., M, K] and b [..., K, N]
// have storage type T and batch dims that broadcast to `batch`.
template <typename T>
void matmul_into(Tensor a, Tensor b, const Shape& batch, T* c, T beta, T alpha) {
  a = blas_ready(a);
  b = blas_ready(b);
  const int64_t m = a.shape()[a.dim() - 2], k = a.shape()[a.dim() - 1], n = b.shape()[b.dim() - 1];
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {m, k});
  eb.insert(eb.end(), {k, n});
  const Tensor av = a.expand(ea), bv = b.expand(eb);
  const BlasLayout la = matrix_layout(av), lb = matrix_layout(bv);
  const T* ap = av.data<T>();
  const T* bp = bv.data<T>();
  const size_t nb = batch.size();
  std::vector<int64_t> sa(av.strides().begin(), av.strides().begin() + nb);
  std::vector<int64_t> sb(bv.strides().begin(), bv.strides().begin() + nb);
  std::vector<int64_t> sc(nb);
  for (size_t d = nb, s = m * n; d-- > 0;) {
    sc[d] = static_cast<int64_t>(s);
    s *= batch[d];
  }

  // A shared B with row-major A whose batches continue its row stride (x[..., in] @ W): one GEMM
  // with the batch folded into M, as large and as fast as it gets.
  bool b_shared = true;
  for (size_t d = 0; d < nb; ++d) b_shared &= batch[d] == 1 || sb[d] == 0;
  if (nb > 0 && b_shared && !la.trans) {
    Shape rows_shape = batch, rows_strides = sa;
    rows_shape.push_back(m);
    rows_strides.push_back(av.strides()[nb]);
    StridedLayout<1> rows = coalesce<1>(rows_shape, {std::span<const int64_t>(rows_strides)});
    if (rows.shape.size() == 1) {
      const int64_t total = rows.shape[0];
      const int64_t ld = total == 1 ? la.ld : rows.strides[0][0];
      if (ld >= std::max<int64_t>(k, 1)) {
        gemm_batched(false, lb.trans, 1, total, n, k, ap, ld, 0, bp, lb.ld, 0, c, n, 0, beta,
                     alpha);
        return;
      }
    }
  }

  // Otherwise batched GEMMs over the innermost coalesced batch dim, looping over the others.
  StridedLayout<3> layout = coalesce<3>(
      batch,
      {std::span<const int64_t>(sa), std::span<const int64_t>(sb), std::span<const int64_t>(sc)});
  const size_t rank = layout.shape.size();
  const int64_t inner = layout.shape.back();
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < rank; ++d) outer *= layout.shape[d];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off_a = 0, off_b = 0, off_c = 0;
    for (size_t d = rank - 1, rem = o; d-- > 0;) {
      const int64_t i = static_cast<int64_t>(rem) % layout.shape[d];
      rem /= layout.shape[d];
      off_a += i * layout.strides[0][d];
      off_b += i * layout.strides[1][d];
      off_c += i * layout.strides[2][d];
    }
    gemm_batched(la.trans, lb.trans, inner, m, n, k, ap + off_a, la.ld, layout.strides[0].back(),
                 bp + off_b, lb.ld, layout.strides[1].back(), c + off_c, n,
                 layout.strides[2].back(), beta, alpha);
  }
}

// Calls body.operator()<C>(convert, acc): acc is the result in the GEMM's compute type C (out
// itself for f32/f64; an f32 buffer rounded into out afterwards for bf16, which oneDNN cannot
// multiply on AVX2), convert(t) turns an operand into storage type C.
template <typename Body>
void in_compute_type(const Tensor& out, Body&& body) {
  auto same = [](const Tensor& t) { return t; };
  switch (out.dtype()) {
    case DType::kF32:
      body.template operator()<float>(same, out);
      return;
    case DType::kF64:
      body.template operator()<double>(same, out);
      return;
    case DType::kBF16: {
      Tensor acc = Tensor::empty(DType::kF32, out.shape());
      body.template operator()<float>([](const Tensor& t) { return t.to(DType::kF32); }, acc);
      Tensor(out).copy_from(acc);
      return;
    }
    default:
      throw_unsupported_dtype(out.dtype(), "matmul");
  }
}

// ---- Type rules ----

void require_same_float(std::span<const TensorType> in) {
  for (const TensorType& t : in) {
    if (!is_floating(t.dtype)) {
      std::vector<std::string_view> names;
      for (const TensorType& u : in) names.push_back(dtype_name(u.dtype));
      throw Error(fmt::format("operands must be floating-point (bf16, f32, f64), got {}",
                              fmt::join(names, ", ")));
    }
  }
  for (const TensorType& t : in) {
    if (t.dtype != in[0].dtype) {
      throw Error(fmt::format(
          "operand dtypes differ ({} and {}); there is no implicit promotion, cast first",
          dtype_name(in[0].dtype), dtype_name(t.dtype)));
    }
  }
}

Shape batch_of(const Shape& s) { return s.size() > 2 ? Shape(s.begin(), s.end() - 2) : Shape{}; }

// torch.matmul's shape rule; also returns the broadcast batch shape.
Shape matmul_shape(const Shape& a, const Shape& b, Shape* batch_out = nullptr) {
  if (a.empty() || b.empty()) {
    throw Error(fmt::format("both operands must be at least 1-D, got shapes {} and {}",
                            shape_str(a), shape_str(b)));
  }
  const int64_t ka = a.back();
  const int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (ka != kb) {
    throw Error(fmt::format("inner dimensions do not match: {} @ {} ({} != {})", shape_str(a),
                            shape_str(b), ka, kb));
  }
  Shape batch;
  try {
    batch = broadcast_shapes(batch_of(a), batch_of(b));
  } catch (const Error&) {
    throw Error(
        fmt::format("batch dimensions of {} and {} do not broadcast", shape_str(a), shape_str(b)));
  }
  if (batch_out != nullptr) *batch_out = batch;
  Shape out = batch;
  if (a.size() >= 2) out.push_back(a[a.size() - 2]);
  if (b.size() >= 2) out.push_back(b.back());
  return out;
}

TensorType matmul_rule(std::span<const TensorType> in, const Attrs&) {
  require_same_float(in);
  return {in[0].dtype, matmul_shape(in[0].shape, in[1].shape)};
}

TensorType linear_rule(std::span<const TensorType> in, const Attrs&) {
  require_same_float(in);
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  if (w.size() != 2) throw Error(fmt::format("weight must be 2-D [out, in], got {}", shape_str(w)));
  if (x.empty() || x.back() != w[1]) {
    throw Error(fmt::format("input {} does not end in the weight's in_features {} (weight {})",
                            shape_str(x), w[1], shape_str(w)));
  }
  if (in.size() > 2 && in[2].shape != Shape{w[0]}) {
    throw Error(fmt::format("bias shape {} must be [{}] to match weight {}", shape_str(in[2].shape),
                            w[0], shape_str(w)));
  }
  Shape out(x.begin(), x.end() - 1);
  out.push_back(w[0]);
  return {in[0].dtype, out};
}

TensorType addmm_rule(std::span<const TensorType> in, const Attrs&) {
  require_same_float(in);
  const Shape &a = in[1].shape, &b = in[2].shape;
  if (a.size() != 2 || b.size() != 2) {
    throw Error(fmt::format("a and b must be 2-D, got {} and {}", shape_str(a), shape_str(b)));
  }
  if (a[1] != b[0]) {
    throw Error(fmt::format("inner dimensions do not match: {} @ {} ({} != {})", shape_str(a),
                            shape_str(b), a[1], b[0]));
  }
  const Shape out{a[0], b[1]};
  bool ok = in[0].shape.size() <= 2;
  for (size_t i = 0; ok && i < in[0].shape.size(); ++i) {
    const int64_t s = in[0].shape[in[0].shape.size() - 1 - i];
    ok = s == 1 || s == out[1 - i];
  }
  if (!ok) {
    throw Error(fmt::format("bias shape {} does not broadcast to the product's shape {}",
                            shape_str(in[0].shape), shape_str(out)));
  }
  return {in[0].dtype, out};
}

TensorType embedding_rule(std::span<const TensorType> in, const Attrs&) {
  const TensorType &w = in[0], &idx = in[1];
  if (!is_floating(w.dtype)) {
    throw Error(fmt::format("weight must be floating-point, got {}", dtype_name(w.dtype)));
  }
  if (w.shape.size() != 2)
    throw Error(fmt::format("weight must be 2-D [num, dim], got {}", shape_str(w.shape)));
  if (idx.dtype != DType::kI32 && idx.dtype != DType::kI64) {
    throw Error(fmt::format("indices must be i32 or i64, got {}", dtype_name(idx.dtype)));
  }
  Shape out = idx.shape;
  out.push_back(w.shape[1]);
  return {w.dtype, out};
}

// ---- Kernels ----

Tensor matmul_kernel(std::span<const Tensor> in, const Attrs&) {
  Shape batch;
  const Shape out_shape = matmul_shape(in[0].shape(), in[1].shape(), &batch);
  Tensor out = Tensor::empty(in[0].dtype(), out_shape);
  if (out.numel() == 0) return out;
  // torch.matmul: a 1-D a is a row [1, K], a 1-D b a column [K, 1]; the 1s are not in the result,
  // which leaves the contiguous layout of [batch..., M, N] unchanged.
  const Tensor a = in[0].dim() == 1 ? in[0].unsqueeze(0) : in[0];
  const Tensor b = in[1].dim() == 1 ? in[1].unsqueeze(1) : in[1];
  in_compute_type(out, [&]<typename C>(auto convert, const Tensor& acc) {
    matmul_into<C>(convert(a), convert(b), batch, acc.data<C>(), C(0), C(1));
  });
  return out;
}

Tensor linear_kernel(std::span<const Tensor> in, const Attrs&) {
  const Tensor &x = in[0], &w = in[1];
  const int64_t out_features = w.shape()[0], in_features = w.shape()[1];
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = shape_numel(out_shape);
  out_shape.push_back(out_features);
  Tensor out = Tensor::empty(x.dtype(), out_shape);
  if (out.numel() == 0) return out;
  const Tensor x2 = x.reshape(std::vector<int64_t>{rows, in_features});
  const Tensor wt = w.transpose(0, 1);  // [in, out] view: reaches the GEMM as trans_b, no copy
  in_compute_type(out, [&]<typename C>(auto convert, const Tensor& acc) {
    C beta = 0;
    if (in.size() > 2) {
      Tensor(acc).copy_from(in[2].expand(out_shape));
      beta = 1;
    }
    matmul_into<C>(convert(x2), convert(wt), {}, acc.data<C>(), beta, C(1));
  });
  return out;
}

Tensor addmm_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor &bias = in[0], &a = in[1], &b = in[2];
  const double beta = attrs.get_float_or("beta", 1.0), alpha = attrs.get_float_or("alpha", 1.0);
  const Shape out_shape{a.shape()[0], b.shape()[1]};
  Tensor out = Tensor::empty(a.dtype(), out_shape);
  if (out.numel() == 0) return out;
  in_compute_type(out, [&]<typename C>(auto convert, const Tensor& acc) {
    // beta == 0 ignores the bias entirely (NaN included), as torch.addmm does.
    if (beta != 0.0) Tensor(acc).copy_from(bias.expand(out_shape));
    matmul_into<C>(convert(a), convert(b), {}, acc.data<C>(), static_cast<C>(beta),
                   static_cast<C>(alpha));
  });
  return out;
}

Tensor embedding_kernel(std::span<const Tensor> in, const Attrs&) {
  Tensor w = in[0];
  if (w.strides()[1] != 1 && w.shape()[1] > 1) w = w.contiguous();  // rows must be memcpy-able
  const Tensor idx = in[1].contiguous();
  const int64_t num = w.shape()[0], dim = w.shape()[1], n = idx.numel();
  Shape out_shape = idx.shape();
  out_shape.push_back(dim);
  Tensor out = Tensor::empty(w.dtype(), out_shape);
  const size_t row_bytes = static_cast<size_t>(dim) * dtype_size(w.dtype());
  const int64_t row_stride_bytes = w.strides()[0] * static_cast<int64_t>(dtype_size(w.dtype()));
  auto gather = [&]<typename I>(const I* ip) {
    // Validate every index before writing anything, so an error leaves no half-made result.
    int64_t bad = 0;
#pragma omp simd reduction(+ : bad)
    for (int64_t i = 0; i < n; ++i) bad += (ip[i] < 0) | (ip[i] >= num);
    if (bad > 0) {
      for (int64_t i = 0; i < n; ++i) {
        if (ip[i] < 0 || ip[i] >= num) {
          throw Error(fmt::format("embedding: index {} is out of range for a table of {} rows",
                                  ip[i], num));
        }
      }
    }
    if (row_bytes == 0) return;
    const char* src = static_cast<const char*>(w.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
#pragma omp parallel for schedule(static) if (worth_parallel(n * dim))
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + i * row_bytes, src + static_cast<int64_t>(ip[i]) * row_stride_bytes,
                  row_bytes);
    }
  };
  if (idx.dtype() == DType::kI32) {
    gather(idx.data<int32_t>());
  } else {
    gather(idx.data<int64_t>());
  }
  return out;
}

// Each result element is a dot product over K, the last dim of the left operand (a 1-d left
// operand is its own K).
OpCost matmul_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  const double k = static_cast<double>(in[0].shape.back());
  return contraction_cost(in, out, static_cast<double>(out.numel()) * k, 0);
}

OpCost linear_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  const auto n = static_cast<double>(out.numel());
  return contraction_cost(in, out, n * static_cast<double>(in[1].shape.back()),
                          in.size() > 2 ? n : 0);
}

OpCost addmm_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  const auto n = static_cast<double>(out.numel());
  return contraction_cost(in, out, n * static_cast<double>(in[1].shape.back()), n);
}

// A lookup reads only the rows it returns, not the whole table.
OpCost embedding_cost(std::span<const TensorType> in, const TensorType& out, const Attrs& attrs) {
  OpCost c = movement_cost(in, out, attrs);
  c.reads[0] = c.writes;
  return c;
}

}  // namespace

void register_linalg_ops(OpRegistry& r) {
  r.add({{"matmul", 2, 2, {}}, matmul_rule, matmul_kernel, matmul_cost});
  r.add({{"linear", 2, 3, {}}, linear_rule, linear_kernel, linear_cost});
  r.add({{"addmm", 3, 3, {{"beta", AttrKind::kFloat, false}, {"alpha", AttrKind::kFloat, false}}},
         addmm_rule,
         addmm_kernel,
         addmm_cost});
  r.add({{"embedding", 2, 2, {}}, embedding_rule, embedding_kernel, embedding_cost});
}

}  // namespace crucible
