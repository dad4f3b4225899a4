// Per-output accuracy figures and the pass rule (see accuracy.h).
#include "accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

namespace crucible {

namespace {

// RMSE of the backend (r) and of eager (e) against fp64 (f), over the elements where all three are
// finite: a NaN or inf the backend shares with eager (checked apart) must not turn both figures
// into NaN and fail an output whose finite elements are fine.
std::pair<double, double> rmse_vs(const std::vector<double>& r, const std::vector<double>& e,
                                  const std::vector<double>& f) {
  double sr = 0, se = 0;
  size_t n = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (!std::isfinite(r[i]) || !std::isfinite(e[i]) || !std::isfinite(f[i])) continue;
    sr += (r[i] - f[i]) * (r[i] - f[i]);
    se += (e[i] - f[i]) * (e[i] - f[i]);
    ++n;
  }
  if (n == 0) return {0.0, 0.0};
  return {std::sqrt(sr / static_cast<double>(n)), std::sqrt(se / static_cast<double>(n))};
}

// Elements where the backend and eager are not both finite and do not agree (NaN with NaN when
// equal_nan, inf with the same inf): never excused by the RMSE rule.
int64_t nonfinite_disagreements(const std::vector<double>& r, const std::vector<double>& e,
                                bool equal_nan) {
  int64_t n = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isfinite(r[i]) && std::isfinite(e[i])) continue;
    if (!(equal_nan && std::isnan(r[i]) && std::isnan(e[i])) && r[i] != e[i]) ++n;
  }
  return n;
}

double cosine_similarity(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  if (na == 0 && nb == 0) return 1.0;
  if (na == 0 || nb == 0) return 0.0;
  return dot / std::sqrt(na * nb);
}

}  // namespace

double rmse_multiplier(const Tensor& res) {
  return res.dtype() == DType::kBF16 || res.numel() < 1000 ? 3.0 : 2.0;
}

bool pass_suspicious(const reports::OutputAccuracy& a, const Tensor& res,
                     const AccuracyOptions& opts) {
  if (!a.passed || !is_floating(res.dtype()) || opts.cosine) return false;
  return a.rmse_vs_fp64 > rmse_multiplier(res) * a.rmse_eager_vs_fp64 + opts.tol / 1000.0;
}

bool identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0) return false;
  }
  return true;
}

double output_scale(const std::vector<Tensor>& outputs) {
  double sum = 0, n = 0;
  for (const Tensor& t : outputs) {
    if (!t.defined() || !is_floating(t.dtype())) continue;
    for (double x : t.to_doubles()) {
      if (!std::isfinite(x)) continue;
      sum += x * x;
      n += 1;
    }
  }
  const double rms = n > 0 ? std::sqrt(sum / n) : 0;
  return rms > 0 ? rms : 1.0;
}

reports::OutputAccuracy compare_output(const Tensor& res, const Tensor& ref, const Tensor& fp64,
                                       const AccuracyOptions& opts,
                                       const std::vector<Tensor>& spread) {
  reports::OutputAccuracy out;
  out.dtype = std::string(dtype_name(res.dtype()));
  out.shape = shape_str(res.shape());
  if (res.shape() != ref.shape() || res.dtype() != ref.dtype()) {
    // A different type is a failure by itself; say what eager produced in the shape column.
    out.shape += " (eager: " + std::string(dtype_name(ref.dtype())) + shape_str(ref.shape()) + ")";
    out.passed = false;
    out.mismatches = std::max(res.numel(), ref.numel());
    out.first_mismatch = 0;
    out.max_abs_err = out.max_rel_err = INFINITY;
    return out;
  }
  const std::vector<double> r = res.to_doubles(), e = ref.to_doubles();
  const bool exact = !is_floating(res.dtype());
  const double atol = exact ? 0 : opts.tol * opts.scale, rtol = exact ? 0 : opts.tol;
  for (size_t i = 0; i < r.size(); ++i) {
    const bool rn = std::isnan(r[i]), en = std::isnan(e[i]);
    double abs_err, rel_err;
    bool ok;
    if (rn || en) {
      ok = rn && en && opts.equal_nan;
      abs_err = rel_err = ok ? 0.0 : INFINITY;
    } else if (std::isinf(r[i]) || std::isinf(e[i])) {
      ok = r[i] == e[i];
      abs_err = rel_err = ok ? 0.0 : INFINITY;
    } else {
      abs_err = std::abs(r[i] - e[i]);
      rel_err = e[i] != 0 ? abs_err / std::abs(e[i]) : (abs_err == 0 ? 0.0 : INFINITY);
      ok = abs_err <= atol + rtol * std::abs(e[i]);
    }
    out.max_abs_err = std::max(out.max_abs_err, abs_err);
    out.max_rel_err = std::max(out.max_rel_err, rel_err);
    if (!ok) {
      if (out.mismatches == 0) out.first_mismatch = static_cast<int64_t>(i);
      ++out.mismatches;
    }
  }
  if (fp64.defined() && is_floating(res.dtype())) {
    const std::vector<double> f = fp64.to_doubles();
    std::tie(out.rmse_vs_fp64, out.rmse_eager_vs_fp64) = rmse_vs(r, e, f);
    for (const Tensor& s : spread) {
      if (s.defined() && s.shape() == fp64.shape())
        out.rmse_eager_vs_fp64 =
            std::max(out.rmse_eager_vs_fp64, rmse_vs(s.to_doubles(), e, f).first);
    }
  }
  out.cosine = cosine_similarity(r, e);
  if (exact) {
    out.passed = out.mismatches == 0;
  } else if (opts.cosine) {
    out.passed = out.cosine >= 0.99;
  } else if (out.mismatches == 0) {
    out.passed = true;
  } else if (fp64.defined()) {
    // Farther from eager than tol, but judged against the fp64 truth: eager has rounding error too.
    const double multiplier = rmse_multiplier(res);
    out.passed =
        nonfinite_disagreements(r, e, opts.equal_nan) == 0 && std::isfinite(out.rmse_vs_fp64) &&
        out.rmse_vs_fp64 <= multiplier * out.rmse_eager_vs_fp64 + opts.tol * opts.scale / 10.0;
  }
  return out;
}

bool allclose_f32(const Tensor& res, const Tensor& ref, const AccuracyOptions& opts,
                  double* max_abs_err) {
  *max_abs_err = INFINITY;
  if (res.dtype() != DType::kF32 || ref.dtype() != DType::kF32 || res.shape() != ref.shape() ||
      !res.is_contiguous() || !ref.is_contiguous() || opts.cosine)
    return false;
  const auto* r = static_cast<const float*>(res.raw_data());
  const auto* e = static_cast<const float*>(ref.raw_data());
  const int64_t n = res.numel();
  double worst = 0;
  bool ok = true;
  // The same arithmetic as compare_output, in double per element.
  for (int64_t i = 0; i < n; ++i) {
    const double a = r[i], b = e[i];
    if (std::isfinite(a) && std::isfinite(b)) {
      const double err = std::abs(a - b);
      worst = std::max(worst, err);
      ok &= err <= opts.tol + opts.tol * std::abs(b);
    } else if (std::isnan(a) || std::isnan(b)) {
      const bool same = std::isnan(a) && std::isnan(b) && opts.equal_nan;
      ok &= same;
      if (!same) worst = INFINITY;
    } else {
      ok &= a == b;  // an infinity: the same one on both sides
      if (a != b) worst = INFINITY;
    }
  }
  *max_abs_err = worst;
  return ok;
}

}  // namespace crucible
