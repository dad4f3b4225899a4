// The elementwise kernel engine: out[i] = f(in0[i], in1[i], ...) over broadcast strided operands,
// with vectorizable loops for contiguous and broadcast-scalar rows, OpenMP over rows.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "crucible/core/strided_loop.h"
#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

namespace crucible::ew {

// Storage <-> compute conversions used by the loops. bf16 gets branch-free versions that give the
// same bits as BFloat16's own (round to nearest even, NaN stays a quiet NaN); BFloat16's
// constructor branches on NaN, which keeps GCC from vectorizing bf16 loops.
template <typename T>
inline compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16);
  } else {
    return v;
  }
}

template <typename Out, typename V>
inline Out store(V v) {
  if constexpr (std::is_same_v<Out, BFloat16>) {
    const uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(v));
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    BFloat16 r;
    r.bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
    return r;
  } else {
    return static_cast<Out>(v);
  }
}

// Operand accessors for one row; each loads storage type T as its compute type, so the functor only
// ever sees compute types (float for bf16).
template <typename T>
struct ContigIn {
  const T* p;
  compute_t<T> operator[](int64_t i) const { return load(p[i]); }
};
// A broadcast (stride 0) operand: its one value is loaded before the loop, so the loop body stays a
// pure streaming computation the vectorizer can handle.
template <typename T>
struct ScalarIn {
  compute_t<T> v;
  compute_t<T> operator[](int64_t) const { return v; }
};
template <typename T>
struct StridedIn {
  const T* p;
  int64_t s;
  compute_t<T> operator[](int64_t i) const { return load(p[i * s]); }
};

template <typename... In>
struct Elementwise {
  static constexpr size_t N = sizeof...(In) + 1;  // operand 0 is the output
  using Ptrs = std::tuple<const In*...>;

  // out: a tensor of storage type Out, usually fresh from Tensor::empty (it may alias an input only
  // element for element). ins: views of storage types In... already broadcast to out's shape
  // (stride 0 where broadcast). f maps compute types to something convertible to Out and must be
  // pure: it runs in parallel, in any order. cost: f's element operations per element (see
  // parallel_grain.h), which decides whether the loop is worth the threads.
  template <typename Out, typename F>
  static void run(const Tensor& out, const std::array<Tensor, sizeof...(In)>& ins, const F& f,
                  int64_t cost = 1) {
    if (out.numel() == 0) return;
    std::array<std::span<const int64_t>, N> strides;
    strides[0] = out.strides();
    for (size_t k = 0; k < sizeof...(In); ++k) strides[k + 1] = ins[k].strides();
    const StridedLayout<N> layout = coalesce<N>(out.shape(), strides);
    if (run_short_rows<Out>(out, ins, layout, f, cost)) return;
    Out* const o = out.data<Out>();
    const Ptrs base = data_ptrs(ins, std::index_sequence_for<In...>{});
    for_each_row(
        layout, cost,
        [&](const std::array<int64_t, N>& off, int64_t n, const std::array<int64_t, N>& st) {
          const Ptrs row = offset_ptrs(base, off, std::index_sequence_for<In...>{});
          bool fast = st[0] == 1 || n == 1;
          for (size_t k = 1; k < N && fast; ++k) fast = st[k] == 0 || st[k] == 1 || n == 1;
          if (fast) {
            pick_accessors<0>(o + off[0], n, f, row, st, std::tuple<>{});
          } else {
            strided_row(o + off[0], st[0], n, f, row, st, std::index_sequence_for<In...>{});
          }
        });
  }

 private:
  // Rows shorter than this are regrouped (run_short_rows).
  static constexpr int64_t kShortRow = 256;

  // [R, n] with n short (a [8390,8] maximum against a [1,8] row): one row of n at a time costs
  // more in per-row overhead than in arithmetic. When the output is dense and every operand is
  // dense, a broadcast row ([0,1] strides) or a scalar, the rows are regrouped in blocks of
  // `reps` rows: dense operands are viewed as [R/reps, reps*n], a broadcast row is tiled `reps`
  // times into a small buffer, and the same vectorized row loop runs on rows of reps*n. The last
  // R % reps rows take the ordinary path. Returns false when the layout does not qualify.
  template <typename Out, typename F>
  static bool run_short_rows(const Tensor& out, const std::array<Tensor, sizeof...(In)>& ins,
                             const StridedLayout<N>& layout, const F& f, int64_t cost) {
    if (layout.shape.size() != 2) return false;
    const int64_t rows = layout.shape[0], n = layout.shape[1];
    if (n >= kShortRow || layout.strides[0][0] != n || layout.strides[0][1] != 1) return false;
    for (size_t k = 1; k < N; ++k) {
      const int64_t so = layout.strides[k][0], si = layout.strides[k][1];
      if (!((so == n && si == 1) || (so == 0 && si == 1) || (so == 0 && si == 0))) return false;
    }
    const int64_t reps = std::max<int64_t>(2, 1024 / n), blocks = rows / reps;
    if (blocks < 2) return false;
    const int64_t m = reps * n;
    std::array<Tensor, sizeof...(In)> grouped, rest;
    regroup(ins, layout, n, reps, blocks, grouped, rest, std::index_sequence_for<In...>{});
    run<Out>(out.as_strided({blocks, m}, {m, 1}, out.offset()), grouped, f, cost);
    const int64_t done = blocks * reps;
    if (done < rows)
      run<Out>(out.as_strided({rows - done, n}, {n, 1}, out.offset() + done * n), rest, f, cost);
    return true;
  }

  template <size_t... I>
  static void regroup(const std::array<Tensor, sizeof...(In)>& ins, const StridedLayout<N>& layout,
                      int64_t n, int64_t reps, int64_t blocks,
                      std::array<Tensor, sizeof...(In)>& grouped,
                      std::array<Tensor, sizeof...(In)>& rest, std::index_sequence<I...>) {
    (regroup_one<In>(ins[I], layout.strides[I + 1][0], layout.strides[I + 1][1], layout.shape[0], n,
                     reps, blocks, grouped[I], rest[I]),
     ...);
  }

  template <typename T>
  static void regroup_one(const Tensor& in, int64_t so, int64_t si, int64_t rows, int64_t n,
                          int64_t reps, int64_t blocks, Tensor& grouped, Tensor& rest) {
    const int64_t m = reps * n, rows_left_at = blocks * reps;
    rest = in.as_strided({rows - rows_left_at, n}, {so, si}, in.offset() + rows_left_at * so);
    if (so == n) {  // dense
      grouped = in.as_strided({blocks, m}, {m, 1}, in.offset());
    } else if (si == 0) {  // one value for everything
      grouped = in.as_strided({blocks, m}, {0, 0}, in.offset());
    } else {  // a broadcast row, tiled reps times
      Tensor tiled = Tensor::empty(in.dtype(), {m});
      const T* src = in.template data<T>();
      T* dst = tiled.template data<T>();
      for (int64_t r = 0; r < reps; ++r) std::copy(src, src + n, dst + r * n);
      grouped = tiled.as_strided({blocks, m}, {0, 1}, 0);
    }
  }

  template <size_t... I>
  static Ptrs data_ptrs(const std::array<Tensor, sizeof...(In)>& ins, std::index_sequence<I...>) {
    return Ptrs{ins[I].template data<In>()...};
  }
  template <size_t... I>
  static Ptrs offset_ptrs(const Ptrs& base, const std::array<int64_t, N>& off,
                          std::index_sequence<I...>) {
    return Ptrs{(std::get<I>(base) + off[I + 1])...};
  }

  // Chooses, operand by operand at run time, a contiguous or hoisted-scalar accessor; each of the
  // 2^k combinations is its own instantiation of the simd loop, so every one of them vectorizes.
  template <size_t K, typename Out, typename F, typename... A>
  static void pick_accessors(Out* o, int64_t n, const F& f, const Ptrs& row,
                             const std::array<int64_t, N>& st, std::tuple<A...> acc) {
    if constexpr (K == sizeof...(In)) {
      std::apply([&](const A&... a) { contig_row(o, n, f, a...); }, acc);
    } else {
      using T = std::tuple_element_t<K, std::tuple<In...>>;
      const T* p = std::get<K>(row);
      if (st[K + 1] == 0 && n > 1) {
        pick_accessors<K + 1>(o, n, f, row, st,
                              std::tuple_cat(acc, std::tuple{ScalarIn<T>{load(p[0])}}));
      } else {
        pick_accessors<K + 1>(o, n, f, row, st, std::tuple_cat(acc, std::tuple{ContigIn<T>{p}}));
      }
    }
  }

  template <typename Out, typename F, typename... A>
  static void contig_row(Out* __restrict o, int64_t n, const F& f, const A&... a) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = store<Out>(f(a[i]...));
  }

  // Any other layout (transposed or step-sliced operands): plain strided indexing.
  template <typename Out, typename F, size_t... I>
  static void strided_row(Out* o, int64_t os, int64_t n, const F& f, const Ptrs& row,
                          const std::array<int64_t, N>& st, std::index_sequence<I...>) {
    const std::tuple<StridedIn<In>...> acc{StridedIn<In>{std::get<I>(row), st[I + 1]}...};
    for (int64_t i = 0; i < n; ++i) o[i * os] = store<Out>(f(std::get<I>(acc)[i]...));
  }
};

// Converts an operand to the dtype the op computes in (a copy only when the dtype differs, and only
// of the operand's own, unbroadcast elements) and views it at the broadcast shape.
inline Tensor as_operand(const Tensor& t, DType dtype, const Shape& shape) {
  Tensor c = t.dtype() == dtype ? t : t.to(dtype);
  return c.shape() == shape ? c : c.expand(shape);
}

inline TensorType type_of(const Tensor& t) { return {t.dtype(), t.shape()}; }

inline std::vector<TensorType> types_of(std::span<const Tensor> ts) {
  std::vector<TensorType> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(type_of(t));
  return out;
}

}  // namespace crucible::ew
