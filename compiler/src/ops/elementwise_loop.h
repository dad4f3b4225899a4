// The elementwise kernel engine: runs out[i] = f(in0[i], in1[i], ...) over broadcast strided operands,
// with vectorizable inner loops for contiguous and broadcast-scalar rows and OpenMP over rows.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "crucible/core/strided_loop.h"
#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

namespace crucible::ew {

// Operand accessors for one row. Each turns storage type T into its compute type on load, so a bf16
// operand is widened to float once per element and the functor only ever sees compute types.
template <typename T>
struct ContigIn {
  const T* p;
  compute_t<T> operator[](int64_t i) const { return static_cast<compute_t<T>>(p[i]); }
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
  compute_t<T> operator[](int64_t i) const { return static_cast<compute_t<T>>(p[i * s]); }
};

template <typename... In>
struct Elementwise {
  static constexpr size_t N = sizeof...(In) + 1;  // operand 0 is the output
  using Ptrs = std::tuple<const In*...>;

  // out: a tensor of storage type Out (usually fresh from Tensor::empty); ins: views of storage types
  // In... already broadcast to out's shape (stride 0 where broadcast). f takes compute types and returns
  // something convertible to Out; it must be a pure function (it runs in parallel, in any order).
  template <typename Out, typename F>
  static void run(const Tensor& out, const std::array<Tensor, sizeof...(In)>& ins, const F& f) {
    if (out.numel() == 0) return;
    std::array<std::span<const int64_t>, N> strides;
    strides[0] = out.strides();
    for (size_t k = 0; k < sizeof...(In); ++k) strides[k + 1] = ins[k].strides();
    const StridedLayout<N> layout = coalesce<N>(out.shape(), strides);
    Out* const o = out.data<Out>();
    const Ptrs base = data_ptrs(ins, std::index_sequence_for<In...>{});
    for_each_row(layout, true,
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
  template <size_t... I>
  static Ptrs data_ptrs(const std::array<Tensor, sizeof...(In)>& ins, std::index_sequence<I...>) {
    return Ptrs{ins[I].template data<In>()...};
  }
  template <size_t... I>
  static Ptrs offset_ptrs(const Ptrs& base, const std::array<int64_t, N>& off, std::index_sequence<I...>) {
    return Ptrs{(std::get<I>(base) + off[I + 1])...};
  }

  // Chooses, operand by operand at run time, a contiguous or hoisted-scalar accessor; each of the 2^k
  // combinations is its own instantiation of the simd loop, so every one of them vectorizes.
  template <size_t K, typename Out, typename F, typename... A>
  static void pick_accessors(Out* o, int64_t n, const F& f, const Ptrs& row, const std::array<int64_t, N>& st,
                             std::tuple<A...> acc) {
    if constexpr (K == sizeof...(In)) {
      std::apply([&](const A&... a) { contig_row(o, n, f, a...); }, acc);
    } else {
      using T = std::tuple_element_t<K, std::tuple<In...>>;
      const T* p = std::get<K>(row);
      if (st[K + 1] == 0 && n > 1) {
        pick_accessors<K + 1>(o, n, f, row, st,
                              std::tuple_cat(acc, std::tuple{ScalarIn<T>{static_cast<compute_t<T>>(p[0])}}));
      } else {
        pick_accessors<K + 1>(o, n, f, row, st, std::tuple_cat(acc, std::tuple{ContigIn<T>{p}}));
      }
    }
  }

  template <typename Out, typename F, typename... A>
  static void contig_row(Out* __restrict o, int64_t n, const F& f, const A&... a) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(a[i]...));
  }

  // Any other layout (transposed or step-sliced operands): plain strided indexing, still one dispatch.
  template <typename Out, typename F, size_t... I>
  static void strided_row(Out* o, int64_t os, int64_t n, const F& f, const Ptrs& row,
                          const std::array<int64_t, N>& st, std::index_sequence<I...>) {
    const std::tuple<StridedIn<In>...> acc{StridedIn<In>{std::get<I>(row), st[I + 1]}...};
    for (int64_t i = 0; i < n; ++i) o[i * os] = static_cast<Out>(f(std::get<I>(acc)[i]...));
  }
};

// Converts an operand to the dtype the op computes in (a copy only when the dtype differs, and only of
// the operand's own, unbroadcast elements) and views it at the broadcast shape.
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
