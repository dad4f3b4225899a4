// PackedLinear: the weight is reordered once into oneDNN's blocked layout and every call runs a
// GEMM with the bias and activation fused in, so no pass over the output is spent on them.
#include "crucible/ops/packed_linear.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <numbers>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/parallel_grain.h"
#include "dnnl_runtime.h"
#include "reduction/reduction_internal.h"

// Which oneDNN primitive, and how the batch size M is handled (measured on this machine, AMD EPYC
// AVX2 without AVX-512, 2 threads, oneDNN 2.6.3, x@W^T + bias + relu, best of interleaved runs):
//
// - dnnl::matmul with weights format_tag::any resolves to the plain [K,N] layout here: its only
//   fast implementation on AVX2 is `gemm:jit`, which takes plain weights, whether M is fixed or
//   DNNL_RUNTIME_DIM_VAL (same speed: 169 vs 170 GFLOP/s at 16384x512x512). So matmul cannot
//   pack weights on this ISA at all.
// - A 1x1 convolution with the rows as its spatial dimension (src "nwc" = x row-major, dst "nwc" =
//   y row-major) does choose a blocked weight layout (OIw8i8o, `jit_1x1:avx2`), and it is the
//   faster kernel: 16384x512x512 186 vs 171 GFLOP/s; 333x512x512 201 vs 180; 8x512x512 174 vs 101;
//   2048x13x1000 119 vs 49. It loses at M=1 (gemv: 30 vs 37 GFLOP/s at 512x512, 26 vs 44 at
//   768x3072) and when N is tiny (N=1: 12 vs 32 GFLOP/s), and it accepts only dense rows (a row
//   stride other than K or N sends it to oneDNN's reference kernel). It has no runtime
//   dimensions, and f32 convolutions accept no output scales.
// - (MKL-style sgemm_pack/sgemm_compute exist inside libdnnl but are not public API: not used.)
//
// Hence: blocked weights + 1x1 convolution primitives created lazily per distinct M (one ~150 us
// JIT compile each, kept in a small bounded cache, and in oneDNN's own primitive cache), used for
// dense rows with M >= 2 when N >= 8; everything else (M = 1, padded rows, tiny N) runs one matmul
// primitive with runtime M and row strides on a plain copy of the weights, made on first use from
// the blocked copy. A product of fewer than kParallelGrain multiply-adds runs on one thread: its
// primitive is created serial (oneDNN fixes a primitive's threads at creation), and the matmul's
// runs in a serial scope too (its GEMM sizes its threads per call). Measured with
// `crucible_bench --benchmark_filter=SmallLinear`, 1 vs 2 threads: 10x10x10 1.4 vs 3.1 us,
// 1x256x256 3.8 vs 6.5, 16x64x64 2.4 vs 3.4; from 32x128x128 two threads win (7.9 vs 6.6 us).
// alpha is folded into the weights during the packing reorder (its output scale)
// rather than applied as an output scale at run time, because the convolution cannot take one.

namespace crucible {
namespace {

using dnnl::memory;
using DataType = memory::data_type;
using Tag = memory::format_tag;
using dnnl_rt::cpu_engine;
using dnnl_rt::execute;
using dnnl_rt::is_blocked;
using dnnl_rt::is_reference;
using dnnl_rt::layout_name;
using dnnl_rt::SerialThreads;
using dnnl_rt::thread_stream;

constexpr int64_t kBlockedMinRows = 2;     // M = 1 is a gemv: the plain matmul is faster
constexpr int64_t kBlockedMinOutputs = 8;  // one 8-wide output block; below it most lanes idle
constexpr int64_t kProbeRows = 256;        // M asked for the weight layout when none is hinted
constexpr size_t kMaxConvPlans = 64;       // distinct M values kept per PackedLinear
constexpr int64_t kMaxDnnlDim = (int64_t{1} << 31) - 1;

// dst = scale * src, converting layouts (memory objects are handles: copies share the data).
void reorder_into(memory src, memory dst, float scale) {
  dnnl::primitive_attr attr;
  if (scale != 1.0f) attr.set_output_scales(0, {scale});
  dnnl::stream& stream = thread_stream();
  dnnl::reorder(src, dst, attr).execute(stream, src, dst);
  stream.wait();
}

dnnl::algorithm eltwise_algorithm(Epilogue e) {
  switch (e) {
    case Epilogue::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case Epilogue::kGelu:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Epilogue::kGeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Epilogue::kSigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case Epilogue::kTanh:
      return dnnl::algorithm::eltwise_tanh;
    case Epilogue::kNone:
      break;
  }
  throw Error(fmt::format("PackedLinear: no eltwise algorithm for epilogue {}", int(e)));
}

// The epilogue on one value, for K = 0 where no GEMM runs and y is the activated bias.
float apply_epilogue(Epilogue e, float v) {
  const double x = v;
  switch (e) {
    case Epilogue::kNone:
      return v;
    case Epilogue::kRelu:
      return v < 0.0f ? 0.0f : v;
    case Epilogue::kGelu:
      return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
    case Epilogue::kGeluTanh:
      return static_cast<float>(
          0.5 * x *
          (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x))));
    case Epilogue::kSigmoid:
      return static_cast<float>(1.0 / (1.0 + std::exp(-x)));
    case Epilogue::kTanh:
      return static_cast<float>(std::tanh(x));
  }
  return v;
}

// A 1x1 convolution primitive for one M, over the blocked weights.
struct ConvPlan {
  bool usable = false;  // false: oneDNN offers only its reference kernel for this M
  bool serial = false;  // created (and run) on one thread
  dnnl::convolution_forward primitive;
  memory::desc src_md, dst_md, scratch_md;
};

// The matmul primitive with runtime M and row strides, and the weights in its layout; a second,
// serial primitive over the same weights serves the calls too small for threads.
struct PlainPath {
  dnnl::matmul primitive, serial;
  bool has_serial = false;
  memory weights;
  memory::desc scratch_md, serial_scratch_md;
  std::string impl;
};

}  // namespace

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::kNone:
      return "none";
    case Epilogue::kRelu:
      return "relu";
    case Epilogue::kGelu:
      return "gelu";
    case Epilogue::kGeluTanh:
      return "gelu_tanh";
    case Epilogue::kSigmoid:
      return "sigmoid";
    case Epilogue::kTanh:
      return "tanh";
  }
  return "unknown";
}

// relu over y's m rows of n (row stride ldy) as the relu op computes it: v <= 0 -> 0, NaN stays.
void relu_rows(float* y, int64_t m, int64_t n, int64_t ldy) {
#pragma omp parallel for schedule(static) if (m * n >= reduction::kParallelGrain && m > 1)
  for (int64_t i = 0; i < m; ++i) {
    float* row = y + i * ldy;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = row[j] <= 0.0f ? 0.0f : row[j];
  }
}

struct PackedLinear::Impl {
  int64_t k = 0, n = 0;
  Epilogue epilogue = Epilogue::kNone;
  float alpha = 1.0f, beta = 1.0f;
  bool has_bias = false;
  std::vector<float> bias_values;  // beta * bias, N floats; oneDNN reads it in place
  memory conv_bias, matmul_bias;   // views of bias_values as [N] and [1,N]
  dnnl::primitive_attr attr;       // post-op + user scratchpad, for every primitive made here

  bool blocked = false;
  memory blocked_weights;  // [N,K,1] in the convolution's layout, alpha already applied
  std::string blocked_impl;

  mutable std::mutex plans_mutex;
  mutable std::unordered_map<int64_t, std::shared_ptr<const ConvPlan>> conv_plans;

  // Made in the constructor when there is no blocked path, on first use otherwise.
  mutable std::once_flag plain_once;
  mutable std::shared_ptr<const PlainPath> plain;
  mutable std::atomic<size_t> plain_bytes{0};

  memory::desc conv_bias_md() const { return has_bias ? conv_bias.get_desc() : memory::desc(); }

  // beta * bias as N floats, after checking it is [N] or broadcasts to one row of N values.
  void take_bias(const Tensor& bias, const Tensor& weight, float beta_bias) {
    if (bias.dtype() != DType::kF32) {
      throw Error(fmt::format("PackedLinear: bias must be f32, got {}", dtype_name(bias.dtype())));
    }
    bool row = bias.dim() == 0 || bias.shape().back() == n || bias.shape().back() == 1;
    for (int64_t d = 0; row && d + 1 < bias.dim(); ++d) row = bias.shape()[d] == 1;
    if (!row) {
      throw Error(
          fmt::format("PackedLinear: bias shape {} must be [{}] (or broadcast to it) for weight {}",
                      shape_str(bias.shape()), n, shape_str(weight.shape())));
    }
    // torch.addmm with beta == 0 ignores the bias, NaN included.
    if (beta_bias == 0.0f) return;
    has_bias = true;
    const std::vector<double> v = bias.to_doubles();
    bias_values.resize(n);
    for (int64_t j = 0; j < n; ++j) {
      bias_values[j] = beta_bias * static_cast<float>(v[v.size() == 1 ? 0 : j]);
    }
  }

  // Whether m rows are too little work for oneDNN's threads.
  bool serial_rows(int64_t m) const { return !worth_parallel(m * k * n); }

  std::shared_ptr<const ConvPlan> make_conv_plan(int64_t m) const {
    auto plan = std::make_shared<ConvPlan>();
    plan->serial = serial_rows(m);
    const SerialThreads serial(plan->serial);
    // x as "nwc" with one image: channels K innermost, the M rows along w.
    plan->src_md = memory::desc({1, k, m}, DataType::f32, memory::dims{m * k, 1, k});
    plan->dst_md = memory::desc({1, n, m}, DataType::f32, memory::dims{m * n, 1, n});
    try {
      const auto kind = dnnl::prop_kind::forward_inference;
      const auto alg = dnnl::algorithm::convolution_direct;
      const memory::desc& w_md = blocked_weights.get_desc();
      auto desc = has_bias
                      ? dnnl::convolution_forward::desc(kind, alg, plan->src_md, w_md,
                                                        conv_bias_md(), plan->dst_md, {1}, {0}, {0})
                      : dnnl::convolution_forward::desc(kind, alg, plan->src_md, w_md, plan->dst_md,
                                                        {1}, {0}, {0});
      dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
      // The weights were packed for the probe M; another M must accept exactly that layout.
      if (is_reference(pd.impl_info_str()) || pd.weights_desc() != w_md) return plan;
      plan->scratch_md = pd.scratchpad_desc();
      plan->primitive = dnnl::convolution_forward(pd);
      plan->usable = true;
    } catch (const dnnl::error&) {
      // Unsupported for this M: the plain path serves it.
    }
    return plan;
  }

  std::shared_ptr<const ConvPlan> conv_plan(int64_t m) const {
    {
      std::lock_guard<std::mutex> lock(plans_mutex);
      auto it = conv_plans.find(m);
      if (it != conv_plans.end()) return it->second;
    }
    // Built outside the lock (a JIT compile): two threads may race to build the same plan, which
    // costs time but is harmless.
    std::shared_ptr<const ConvPlan> plan = make_conv_plan(m);
    std::lock_guard<std::mutex> lock(plans_mutex);
    // Shape-polymorphic callers must not grow the cache forever; oneDNN's own primitive cache
    // makes rebuilding a recently evicted plan cheap.
    if (conv_plans.size() >= kMaxConvPlans) conv_plans.clear();
    return conv_plans.emplace(m, plan).first->second;
  }

  // `source_kn` holds the weights as a plain [K,N] matrix (any strides); `scale` is applied while
  // copying it.
  std::shared_ptr<const PlainPath> make_plain(const memory& source_kn, float scale) const {
    auto path = std::make_shared<PlainPath>();
    const memory::dim rt = DNNL_RUNTIME_DIM_VAL;
    const memory::desc src_md({rt, k}, DataType::f32, memory::dims{rt, 1});
    const memory::desc w_md({k, n}, DataType::f32, Tag::any);
    const memory::desc dst_md({rt, n}, DataType::f32, memory::dims{rt, 1});
    try {
      auto desc = has_bias ? dnnl::matmul::desc(src_md, w_md, matmul_bias.get_desc(), dst_md)
                           : dnnl::matmul::desc(src_md, w_md, dst_md);
      dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
      path->impl = pd.impl_info_str();
      path->scratch_md = pd.scratchpad_desc();
      path->primitive = dnnl::matmul(pd);
      path->weights = memory(pd.weights_desc(), cpu_engine());
      reorder_into(source_kn, path->weights, scale);
      const SerialThreads serial(true);
      dnnl::matmul::primitive_desc serial_pd(desc, attr, cpu_engine());
      if (serial_pd.weights_desc() == pd.weights_desc()) {
        path->serial_scratch_md = serial_pd.scratchpad_desc();
        path->serial = dnnl::matmul(serial_pd);
        path->has_serial = true;
      }
    } catch (const dnnl::error& e) {
      throw Error(fmt::format("PackedLinear {}x{}: oneDNN matmul unavailable: {}", k, n, e.what()));
    }
    plain_bytes.store(path->weights.get_desc().get_size());
    return path;
  }

  void check_call(int64_t m, int64_t ldx, int64_t ldy) const {
    if (m < 0) throw Error(fmt::format("PackedLinear::run: negative row count {}", m));
    // oneDNN 2.6 computes some offsets in 32 bits (2^32 rows died with SIGFPE inside it).
    if (m > kMaxDnnlDim) {
      throw Error(fmt::format("PackedLinear::run: {} rows exceed oneDNN's limit of 2^31 - 1", m));
    }
    if (ldx < k || ldy < n) {  // K = 0 takes any ldx >= 0: no element of x is read
      throw Error(
          fmt::format("PackedLinear::run: row strides ldx={} ldy={} are smaller than K={} / N={}",
                      ldx, ldy, k, n));
    }
  }

  // The convolution's plan when it serves this call, null when the plain matmul does.
  std::shared_ptr<const ConvPlan> blocked_plan(int64_t m, int64_t ldx, int64_t ldy) const {
    if (!blocked || m < kBlockedMinRows || ldx != k || ldy != n) return nullptr;
    std::shared_ptr<const ConvPlan> plan = conv_plan(m);
    return plan->usable ? plan : nullptr;
  }

  const PlainPath& plain_path() const {
    std::call_once(plain_once, [this] {
      // Unpack the blocked copy (alpha already applied) into a temporary [N,K] matrix, then into
      // whatever layout the matmul chose.
      const memory::desc nk_md({n, k, 1}, DataType::f32, memory::dims{k, 1, 1});
      memory nk(nk_md, cpu_engine());
      reorder_into(blocked_weights, nk, 1.0f);
      const memory kn({{k, n}, DataType::f32, memory::dims{1, k}}, cpu_engine(),
                      nk.get_data_handle());
      plain = make_plain(kn, 1.0f);
    });
    return *plain;
  }
};

PackedLinear::PackedLinear(const Tensor& weight, bool weight_layout_nk, const Tensor& bias,
                           Epilogue epilogue, float alpha, float beta_bias, int64_t rows_hint) {
  if (!weight.defined()) throw Error("PackedLinear: weight is undefined");
  if (weight.dtype() != DType::kF32) {
    throw Error(
        fmt::format("PackedLinear: weight must be f32, got {}", dtype_name(weight.dtype())));
  }
  if (weight.dim() != 2) {
    throw Error(fmt::format("PackedLinear: weight must be 2-D ({}), got {}",
                            weight_layout_nk ? "[N,K]" : "[K,N]", shape_str(weight.shape())));
  }
  auto impl = std::make_shared<Impl>();
  Impl& im = *impl;
  im.n = weight.shape()[weight_layout_nk ? 0 : 1];
  im.k = weight.shape()[weight_layout_nk ? 1 : 0];
  if (im.n > kMaxDnnlDim || im.k > kMaxDnnlDim) {
    throw Error(fmt::format("PackedLinear: weight {} exceeds oneDNN's limit of 2^31 - 1 per dim",
                            shape_str(weight.shape())));
  }
  im.epilogue = epilogue;
  im.alpha = alpha;
  im.beta = beta_bias;
  const int64_t k = im.k, n = im.n;

  if (bias.defined()) im.take_bias(bias, weight, beta_bias);

  // relu is applied by our own pass after the GEMM: oneDNN's eltwise relu is vmaxps(x, 0), which
  // turns NaN into 0 where PyTorch and eager keep it. The other activations' post-ops keep NaN
  // (tested in PackedLinear.NanAndInfPassThroughEveryEpilogue).
  dnnl::post_ops ops;
  if (epilogue != Epilogue::kNone && epilogue != Epilogue::kRelu) {
    ops.append_eltwise(1.0f, eltwise_algorithm(epilogue), 0.0f, 0.0f);
  }
  im.attr.set_post_ops(ops);
  im.attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  if (k > 0 && n > 0) {
    if (im.has_bias) {
      im.conv_bias = memory({{n}, DataType::f32, Tag::a}, cpu_engine(), im.bias_values.data());
      im.matmul_bias =
          memory({{1, n}, DataType::f32, Tag::ab}, cpu_engine(), im.bias_values.data());
    }
    const Tensor w = weight.contiguous();  // the reorders below copy it
    void* data = w.raw_data();
    // W's strides as the convolution's [N,K,1] weights, whichever way the caller stores it.
    const memory::dims nk_strides =
        weight_layout_nk ? memory::dims{k, 1, 1} : memory::dims{1, n, 1};
    const int64_t probe = rows_hint > 0 && rows_hint <= kMaxDnnlDim ? rows_hint : kProbeRows;
    if (n >= kBlockedMinOutputs && probe >= kBlockedMinRows) {
      try {
        const memory::desc src_md({1, k, probe}, DataType::f32, memory::dims{probe * k, 1, k});
        const memory::desc dst_md({1, n, probe}, DataType::f32, memory::dims{probe * n, 1, n});
        const memory::desc w_any({n, k, 1}, DataType::f32, Tag::any);
        const auto kind = dnnl::prop_kind::forward_inference;
        const auto alg = dnnl::algorithm::convolution_direct;
        auto desc =
            im.has_bias
                ? dnnl::convolution_forward::desc(kind, alg, src_md, w_any, im.conv_bias_md(),
                                                  dst_md, {1}, {0}, {0})
                : dnnl::convolution_forward::desc(kind, alg, src_md, w_any, dst_md, {1}, {0}, {0});
        dnnl::convolution_forward::primitive_desc pd(desc, im.attr, cpu_engine());
        if (!is_reference(pd.impl_info_str()) && is_blocked(pd.weights_desc())) {
          im.blocked_weights = memory(pd.weights_desc(), cpu_engine());
          const memory user({{n, k, 1}, DataType::f32, nk_strides}, cpu_engine(), data);
          reorder_into(user, im.blocked_weights, alpha);
          im.blocked_impl = pd.impl_info_str();
          im.blocked = true;
        }
      } catch (const dnnl::error&) {
        // No convolution for this shape: the plain matmul path below serves every call.
      }
    }
    if (!im.blocked) {
      const memory user({{k, n}, DataType::f32, memory::dims{nk_strides[1], nk_strides[0]}},
                        cpu_engine(), data);
      auto path = im.make_plain(user, alpha);
      std::call_once(im.plain_once, [&] { im.plain = std::move(path); });
    }
  }
  impl_ = std::move(impl);
}

int64_t PackedLinear::in_features() const { return impl_->k; }
int64_t PackedLinear::out_features() const { return impl_->n; }
Epilogue PackedLinear::epilogue() const { return impl_->epilogue; }

void PackedLinear::run(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy) const {
  const Impl& im = *impl_;
  const int64_t k = im.k, n = im.n;
  im.check_call(m, ldx, ldy);
  if (m == 0 || n == 0) return;
  if (y == nullptr || (k > 0 && x == nullptr)) throw Error("PackedLinear::run: null x or y");

  if (k == 0) {  // an empty sum: y is the activated bias
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        y[i * ldy + j] = apply_epilogue(im.epilogue, im.has_bias ? im.bias_values[j] : 0.0f);
      }
    }
    return;
  }

  const dnnl::engine& engine = cpu_engine();
  if (std::shared_ptr<const ConvPlan> plan = im.blocked_plan(m, ldx, ldy)) {
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(plan->src_md, engine, const_cast<float*>(x))},
        {DNNL_ARG_WEIGHTS, im.blocked_weights},
        {DNNL_ARG_DST, memory(plan->dst_md, engine, y)}};
    if (im.has_bias) args.emplace(DNNL_ARG_BIAS, im.conv_bias);
    const SerialThreads serial(plan->serial);
    execute(plan->primitive, args, plan->scratch_md);
    if (im.epilogue == Epilogue::kRelu) relu_rows(y, m, n, ldy);
    return;
  }

  const PlainPath& path = im.plain_path();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC,
       memory({{m, k}, DataType::f32, memory::dims{ldx, 1}}, engine, const_cast<float*>(x))},
      {DNNL_ARG_WEIGHTS, path.weights},
      {DNNL_ARG_DST, memory({{m, n}, DataType::f32, memory::dims{ldy, 1}}, engine, y)}};
  if (im.has_bias) args.emplace(DNNL_ARG_BIAS, im.matmul_bias);
  if (path.has_serial && im.serial_rows(m)) {
    const SerialThreads serial(true);
    execute(path.serial, args, path.serial_scratch_md);
  } else {
    execute(path.primitive, args, path.scratch_md);
  }
  if (im.epilogue == Epilogue::kRelu) relu_rows(y, m, n, ldy);
}

void PackedLinear::prepare(int64_t m, int64_t ldx, int64_t ldy) const {
  const Impl& im = *impl_;
  im.check_call(m, ldx, ldy);
  if (m == 0 || im.n == 0 || im.k == 0) return;
  if (!im.blocked_plan(m, ldx, ldy)) im.plain_path();
}

size_t PackedLinear::packed_bytes() const {
  const Impl& im = *impl_;
  size_t bytes = im.bias_values.size() * sizeof(float) + im.plain_bytes.load();
  if (im.blocked) bytes += im.blocked_weights.get_desc().get_size();
  return bytes;
}

std::string PackedLinear::describe() const {
  const Impl& im = *impl_;
  std::string kernel;
  if (im.blocked) {
    kernel = fmt::format("oneDNN blocked weights {}, {}; 1-row or padded calls on a plain copy",
                         layout_name(im.blocked_weights.get_desc(), "oiw"), im.blocked_impl);
  } else if (im.plain) {  // set in the constructor when there is no blocked path
    kernel = fmt::format("oneDNN matmul {}, plain weights", im.plain->impl);
  } else {
    kernel = "empty product";
  }
  std::string epilogue;
  if (im.has_bias && im.epilogue != Epilogue::kNone) {
    epilogue = fmt::format("bias+{} epilogue", epilogue_name(im.epilogue));
  } else if (im.has_bias) {
    epilogue = "bias epilogue";
  } else if (im.epilogue != Epilogue::kNone) {
    epilogue = fmt::format("{} epilogue", epilogue_name(im.epilogue));
  } else {
    epilogue = "no epilogue";
  }
  std::string text = fmt::format("packed linear {}x{} ({}), {}", im.k, im.n, kernel, epilogue);
  if (im.alpha != 1.0f) text += fmt::format(", alpha={}", im.alpha);
  if (im.has_bias && im.beta != 1.0f) text += fmt::format(", beta={}", im.beta);
  return text;
}

}  // namespace crucible
