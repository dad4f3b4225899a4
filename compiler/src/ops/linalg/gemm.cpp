// f32 GEMM through oneDNN's matmul primitive. Primitives are cached by problem description, since
// creating one costs tens of microseconds and eager runs repeat the same shapes call after call.
#include "crucible/ops/gemm.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <unordered_map>

#include "crucible/core/error.h"
#include "crucible/core/fnv1a.h"
#include "plan_cache.h"

namespace crucible {
namespace {

// Everything a primitive depends on. Operand and result addresses are bound at execution.
struct GemmKey {
  std::array<int64_t, 13> v{};  // trans_a, trans_b, batch, m, n, k, lda, ldb, ldc, strides a/b/c
  float alpha = 1.0f, beta = 0.0f;
  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& key) const {
    uint64_t h = kFnv1aOffset;
    for (int64_t x : key.v) h = fnv1a_u64(static_cast<uint64_t>(x), h);
    uint32_t a, b;
    std::memcpy(&a, &key.alpha, sizeof a);
    std::memcpy(&b, &key.beta, sizeof b);
    h = fnv1a_u64((static_cast<uint64_t>(a) << 32) | b, h);
    return static_cast<size_t>(h);
  }
};

struct GemmPlan {
  bool use_primitive = false;  // false: oneDNN offers only its slow reference kernel here
  dnnl::matmul primitive;
  dnnl::memory::desc a_md, b_md, c_md, scratch_md;
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One stream per thread: oneDNN does not promise that a stream may be used concurrently, and a CPU
// stream is only a handle (execution is synchronous under the OpenMP runtime).
dnnl::stream& cpu_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// Layout of one operand: `rows x cols` logical matrix, transposed or not, with a batch dim that
// is 1 (broadcast) when the batch stride is 0.
dnnl::memory::desc operand_desc(int64_t batch, int64_t stride, bool trans, int64_t rows,
                                int64_t cols, int64_t ld) {
  using dims = dnnl::memory::dims;
  const auto f32 = dnnl::memory::data_type::f32;
  const dims mat_strides = trans ? dims{1, ld} : dims{ld, 1};
  if (batch == 1) return {dims{rows, cols}, f32, mat_strides};
  const int64_t extent = (trans ? cols : rows) * ld;  // any valid value works for a size-1 dim
  if (stride == 0) return {dims{1, rows, cols}, f32, dims{extent, mat_strides[0], mat_strides[1]}};
  return {dims{batch, rows, cols}, f32, dims{stride, mat_strides[0], mat_strides[1]}};
}

std::shared_ptr<const GemmPlan> make_plan(const GemmKey& key) {
  const auto& v = key.v;
  const bool ta = v[0] != 0, tb = v[1] != 0;
  const int64_t batch = v[2], m = v[3], n = v[4], k = v[5];
  auto plan = std::make_shared<GemmPlan>();
  try {
    // Descriptors throw too, e.g. for overlapping batch windows.
    plan->a_md = operand_desc(batch, v[9], ta, m, k, v[6]);
    plan->b_md = operand_desc(batch, v[10], tb, k, n, v[7]);
    plan->c_md = operand_desc(batch, v[11], false, m, n, v[8]);
    dnnl::primitive_attr attr;
    // Scratchpad owned by the caller, so one primitive can run on several threads at once.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
    if (key.beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(key.beta);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(plan->a_md, plan->b_md, plan->c_md), attr,
                                    cpu_engine());
    // The reference implementation is orders of magnitude slower than sgemm: avoid it.
    if (std::string_view(pd.impl_info_str()).starts_with("ref")) return plan;
    plan->scratch_md = pd.scratchpad_desc();
    plan->primitive = dnnl::matmul(pd);
    plan->use_primitive = true;
  } catch (const dnnl::error&) {
    // Unsupported layout: the sgemm fallback handles every valid BLAS layout.
  }
  return plan;
}

std::shared_ptr<const GemmPlan> find_plan(const GemmKey& key) {
  static PlanCache<GemmKey, GemmPlan,
                   std::unordered_map<GemmKey, std::shared_ptr<const GemmPlan>, GemmKeyHash>>
      cache(4096);
  return cache.get(key, [&] { return make_plan(key); });
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

void* scratchpad(size_t bytes) {
  thread_local std::unique_ptr<void, FreeDeleter> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    capacity = (bytes + 4095) / 4096 * 4096;
    buffer.reset(std::aligned_alloc(64, capacity));
    if (!buffer) throw std::bad_alloc();
  }
  return buffer.get();
}

}  // namespace

void gemm_batched_f32(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                      const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                      int64_t stride_b, float* c, int64_t ldc, int64_t stride_c, float beta,
                      float alpha) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  // With k == 0 neither operand is read: an empty operand's leading dimension may be anything
  // (a [3,0] tensor's row stride is 0).
  const bool operands_ok = k == 0 || (lda >= std::max<int64_t>(1, trans_a ? m : k) &&
                                      ldb >= std::max<int64_t>(1, trans_b ? k : n));
  if (!operands_ok || ldc < std::max<int64_t>(1, n) || (batch > 1 && stride_c == 0)) {
    throw Error(
        fmt::format("gemm_f32: invalid leading dimensions lda={} ldb={} ldc={} for m={} n={} k={}",
                    lda, ldb, ldc, m, n, k));
  }
  if (k == 0) {
    for (int64_t i = 0; i < batch; ++i) {
      for (int64_t r = 0; r < m; ++r) {
        float* row = c + i * stride_c + r * ldc;
        for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
      }
    }
    return;
  }
  if (batch == 1) stride_a = stride_b = stride_c = 0;  // irrelevant: keep them out of the key
  GemmKey key;
  key.v = {trans_a, trans_b, batch, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, 0};
  key.alpha = alpha;
  key.beta = beta;
  std::shared_ptr<const GemmPlan> plan = find_plan(key);
  if (!plan->use_primitive) {
    for (int64_t i = 0; i < batch; ++i) {
      dnnl_status_t st =
          dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a + i * stride_a,
                     lda, b + i * stride_b, ldb, beta, c + i * stride_c, ldc);
      if (st != dnnl_success)
        throw Error(fmt::format("gemm_f32: dnnl_sgemm failed with status {}", int(st)));
    }
    return;
  }
  const dnnl::engine& engine = cpu_engine();
  dnnl::memory am(plan->a_md, engine, const_cast<float*>(a));
  dnnl::memory bm(plan->b_md, engine, const_cast<float*>(b));
  dnnl::memory cm(plan->c_md, engine, c);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (size_t bytes = plan->scratch_md.get_size(); bytes > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(plan->scratch_md, engine, scratchpad(bytes)));
  }
  dnnl::stream& stream = cpu_stream();
  plan->primitive.execute(stream, args);
  stream.wait();
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, float beta,
              float alpha) {
  gemm_batched_f32(trans_a, trans_b, 1, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, beta, alpha);
}

}  // namespace crucible
