// ATen entries of the index, scan, selection and padding ops added for ONNX import (gather ...
// pad, prod), each computing crucible's result: wrapped negative indices, stable tie order.
#include <fmt/format.h>

#include <algorithm>

#include "aten_bridge.h"
#include "aten_entry.h"
#include "crucible/core/tensor.h"

namespace crucible::libtorch::aten {

namespace {

using Tensors = std::vector<at::Tensor>;
using Names = std::vector<std::string>;

int64_t rank(const Ctx& c, size_t k = 0) { return static_cast<int64_t>(c.shape(k).size()); }
int64_t dim(const Ctx& c, const char* name = "dim", int64_t fallback = 0) {
  return wrap_dim(c.a().get_int_or(name, fallback), rank(c), name);
}
const Shape& out_shape(const Ctx& c) { return c.g.value(c.n.output).type.shape; }

// Index operand 1 as i64 with negative values wrapped by the size of x's dim d.
at::Tensor wrapped(const at::Tensor& i, int64_t n) {
  const at::Tensor l = i.to(at::kLong);
  return at::where(l < 0, l + n, l);
}
std::string swrapped(const std::string& i, int64_t n) {
  return fmt::format("torch.where({0} < 0, {0} + {1}, {0}).to({2})", i, n, sdtype(DType::kI64));
}

Entry gather() {
  return {[](const Ctx& c, const Tensors& x) {
            const int64_t d = dim(c);
            return at::index_select(x[0], d, wrapped(x[1], c.shape(0)[d]).flatten())
                .reshape(out_shape(c));
          },
          [](const Ctx& c, const Names& x) {
            const int64_t d = dim(c);
            return fmt::format("torch.index_select({}, {}, {}.flatten()).reshape({})", x[0], d,
                               swrapped(x[1], c.shape(0)[d]), sints(out_shape(c)));
          }};
}

Entry gather_elements() {
  return {[](const Ctx& c, const Tensors& x) {
            const int64_t d = dim(c);
            return at::gather(x[0], d, wrapped(x[1], c.shape(0)[d]));
          },
          [](const Ctx& c, const Names& x) {
            const int64_t d = dim(c);
            return fmt::format("torch.gather({}, {}, {})", x[0], d, swrapped(x[1], c.shape(0)[d]));
          }};
}

// torch's argmax/argmin take the first of equal extremes (a NaN first); select_last_index looks
// at the flipped line and counts back.
Entry arg(const char* name) {
  return {[name](const Ctx& c, const Tensors& x) {
            const int64_t d = dim(c);
            const bool keep = c.a().get_bool_or("keepdim", true),
                       max = std::string(name) == "argmax";
            const bool last = c.a().get_bool_or("select_last_index", false);
            const at::Tensor v = last ? at::flip(x[0], {d}) : x[0];
            const at::Tensor i = max ? at::argmax(v, d, keep) : at::argmin(v, d, keep);
            return last ? (c.shape(0)[d] - 1) - i : i;
          },
          [name](const Ctx& c, const Names& x) {
            const int64_t d = dim(c);
            const std::string keep = sbool(c.a().get_bool_or("keepdim", true));
            if (!c.a().get_bool_or("select_last_index", false))
              return fmt::format("torch.{}({}, {}, {})", name, x[0], d, keep);
            return fmt::format("({} - torch.{}(torch.flip({}, [{}]), {}, {}))", c.shape(0)[d] - 1,
                               name, x[0], d, d, keep);
          }};
}

// cumsum in x's dtype; reverse flips around it, exclusive shifts it by one with a leading 0.
Entry cumsum() {
  return {[](const Ctx& c, const Tensors& x) {
            const int64_t d = dim(c), n = c.shape(0)[d];
            const bool reverse = c.a().get_bool_or("reverse", false);
            at::Tensor y = at::cumsum(reverse ? at::flip(x[0], {d}) : x[0], d, to_aten(c.out));
            if (c.a().get_bool_or("exclusive", false) && n > 0)
              y = at::cat({at::zeros_like(y.narrow(d, 0, 1)), y.narrow(d, 0, n - 1)}, d);
            return reverse ? at::flip(y, {d}) : y;
          },
          [](const Ctx& c, const Names& x) {
            const int64_t d = dim(c), n = c.shape(0)[d];
            const bool reverse = c.a().get_bool_or("reverse", false);
            const std::string in = reverse ? fmt::format("torch.flip({}, [{}])", x[0], d) : x[0];
            std::string y = fmt::format("torch.cumsum({}, {}, dtype={})", in, d, sdtype(c.out));
            if (c.a().get_bool_or("exclusive", false) && n > 0)
              y = fmt::format(
                  "torch.cat([torch.zeros_like({0}.narrow({1}, 0, 1)), "
                  "{0}.narrow({1}, 0, {2})], {1})",
                  y, d, n - 1);
            return reverse ? fmt::format("torch.flip({}, [{}])", y, d) : y;
          }};
}

// A stable sort gives equal values in index order (ONNX's tie rule) with NaN above every number,
// as crucible orders them; topk's own order of ties is unspecified.
Entry topk(int which) {
  return {[which](const Ctx& c, const Tensors& x) {
            const int64_t d = dim(c, "dim", -1);
            const auto sorted =
                at::sort(x[0], /*stable=*/true, d, c.a().get_bool_or("largest", true));
            const at::Tensor& r = which == 0 ? std::get<0>(sorted) : std::get<1>(sorted);
            return r.narrow(d, 0, c.a().get_int("k"));
          },
          [which](const Ctx& c, const Names& x) {
            const int64_t d = dim(c, "dim", -1);
            return fmt::format(
                "torch.sort({}, stable=True, dim={}, descending={})[{}].narrow({}, 0, {})", x[0], d,
                sbool(c.a().get_bool_or("largest", true)), which, d, c.a().get_int("k"));
          }};
}

Entry trilu() {
  auto upper = [](const Ctx& c) { return c.a().get_bool_or("upper", true); };
  return {[upper](const Ctx& c, const Tensors& x) {
            const int64_t k = c.a().get_int_or("k", 0);
            return upper(c) ? at::triu(x[0], k) : at::tril(x[0], k);
          },
          [upper](const Ctx& c, const Names& x) {
            return fmt::format("torch.{}({}, {})", upper(c) ? "triu" : "tril", x[0],
                               c.a().get_int_or("k", 0));
          }};
}

// pad: constant as constant_pad_nd (negative pads crop there too); reflect and edge crop with
// narrow, then pick each padded dim's source indices (computed here, as crucible does).
struct PadPlan {
  std::vector<int64_t> torch_pads;                 // last dim first, as torch orders them
  std::vector<std::pair<int64_t, int64_t>> crops;  // (start, length) per dim
  std::vector<std::vector<int64_t>> sources;       // per dim; empty when nothing is added
};

PadPlan pad_plan(const Ctx& c) {
  const std::vector<int64_t>& pads = c.a().get_ints("pads");
  const bool edge = c.a().get_string_or("mode", "constant") == "edge";
  const int64_t r = rank(c);
  PadPlan p;
  for (int64_t d = r - 1; d >= 0; --d) {
    p.torch_pads.push_back(pads[d]);
    p.torch_pads.push_back(pads[d + r]);
  }
  for (int64_t d = 0; d < r; ++d) {
    const int64_t b = pads[d], e = pads[d + r];
    const int64_t lo = std::max<int64_t>(0, -b);
    const int64_t kept = c.shape(0)[d] - lo - std::max<int64_t>(0, -e);
    p.crops.emplace_back(lo, kept);
    std::vector<int64_t> src;
    if (b > 0 || e > 0) {
      for (int64_t s = -std::max<int64_t>(0, b); s < kept + std::max<int64_t>(0, e); ++s) {
        src.push_back(edge        ? std::clamp<int64_t>(s, 0, kept - 1)
                      : s < 0     ? -s
                      : s >= kept ? 2 * (kept - 1) - s
                                  : s);
      }
    }
    p.sources.push_back(std::move(src));
  }
  return p;
}

// The fill value as crucible converts it to the tensor's dtype.
double pad_value(const Ctx& c) {
  return Tensor::full(c.out, {}, c.a().get_float_or("value", 0.0)).get(0);
}

Entry pad() {
  auto constant = [](const Ctx& c) {
    return c.a().get_string_or("mode", "constant") == "constant";
  };
  return {[constant](const Ctx& c, const Tensors& x) {
            const PadPlan p = pad_plan(c);
            if (rank(c) == 0) return x[0].clone();
            if (constant(c)) return at::constant_pad_nd(x[0], p.torch_pads, pad_value(c));
            at::Tensor y = x[0];
            for (int64_t d = 0; d < rank(c); ++d) {
              y = y.narrow(d, p.crops[d].first, p.crops[d].second);
              if (!p.sources[d].empty())
                y = at::index_select(y, d, at::tensor(p.sources[d], at::kLong));
            }
            return y.contiguous();
          },
          [constant](const Ctx& c, const Names& x) {
            const PadPlan p = pad_plan(c);
            if (rank(c) == 0) return x[0] + ".clone()";
            if (constant(c))
              return fmt::format("torch.constant_pad_nd({}, {}, {})", x[0], sints(p.torch_pads),
                                 sfloat(pad_value(c)));
            std::string y = x[0];
            for (int64_t d = 0; d < rank(c); ++d) {
              y = fmt::format("{}.narrow({}, {}, {})", y, d, p.crops[d].first, p.crops[d].second);
              if (!p.sources[d].empty())
                y = fmt::format("torch.index_select({}, {}, torch.tensor({}, dtype={}))", y, d,
                                sints(p.sources[d]), sdtype(DType::kI64));
            }
            return y;
          }};
}

// torch.prod takes one dim: the dims one at a time (kept), then squeezed when keepdim is false.
Entry prod() {
  auto dims = [](const Ctx& c) {
    std::vector<int64_t> d = reduce_dims(c);
    for (int64_t& v : d) v = wrap_dim(v, rank(c), "dims");
    std::sort(d.rbegin(), d.rend());
    return d;
  };
  return {[dims](const Ctx& c, const Tensors& x) {
            if (rank(c) == 0) return as(x[0], c.out).clone();
            at::Tensor y = x[0];
            for (int64_t d : dims(c)) y = at::prod(y, d, true, to_aten(c.out));
            if (!c.a().get_bool_or("keepdim", false))
              for (int64_t d : dims(c)) y = y.squeeze(d);
            return y;
          },
          [dims](const Ctx& c, const Names& x) {
            if (rank(c) == 0) return sas(c, 0, x[0], c.out) + ".clone()";
            std::string y = x[0];
            for (int64_t d : dims(c))
              y = fmt::format("torch.prod({}, {}, True, dtype={})", y, d, sdtype(c.out));
            if (!c.a().get_bool_or("keepdim", false))
              for (int64_t d : dims(c)) y = fmt::format("{}.squeeze({})", y, d);
            return y;
          }};
}

}  // namespace

void add_index_entries(Table& m) {
  m["gather"] = gather();
  m["gather_elements"] = gather_elements();
  m["argmax"] = arg("argmax");
  m["argmin"] = arg("argmin");
  m["cumsum"] = cumsum();
  m["topk"] = topk(0);
  m["topk_indices"] = topk(1);
  m["trilu"] = trilu();
  m["pad"] = pad();
  m["prod"] = prod();
}

}  // namespace crucible::libtorch::aten
