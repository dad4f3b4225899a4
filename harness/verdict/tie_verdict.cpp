// Moving the reference by the ties that explain a backend's outputs (see tie_verdict.h).
#include "tie_verdict.h"

#include <cmath>

namespace crucible {

namespace {

// One vector of doubles over every floating output of `ts` (the others contribute nothing).
std::vector<double> flat(const std::vector<Tensor>& ts, const std::vector<Tensor>& like) {
  std::vector<double> out;
  for (size_t k = 0; k < like.size() && k < ts.size(); ++k) {
    if (!like[k].defined() || !is_floating(like[k].dtype()) || !ts[k].defined() ||
        ts[k].numel() != like[k].numel())
      continue;
    const std::vector<double> v = ts[k].to_doubles();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// `ts` plus `delta` (flat over the floating outputs of `ts`, as `flat` lays them), each tensor
// kept in its dtype.
std::vector<Tensor> plus(const std::vector<Tensor>& ts, const std::vector<double>& delta) {
  std::vector<Tensor> out;
  size_t at = 0;
  for (const Tensor& t : ts) {
    if (!t.defined() || !is_floating(t.dtype())) {
      out.push_back(t);
      continue;
    }
    std::vector<double> v = t.to_doubles();
    for (double& x : v) x += delta[at++];
    out.push_back(Tensor::from_doubles(t.dtype(), t.shape(), v));
  }
  return out;
}

}  // namespace

AccuracyReference shifted_by_ties(const AccuracyReference& ref,
                                  const std::vector<std::vector<Tensor>>& flipped,
                                  const std::vector<Tensor>& res, std::vector<size_t>& chosen) {
  chosen.clear();
  const std::vector<double> f = flat(ref.fp64, ref.fp64);
  std::vector<double> residual = flat(res, ref.fp64);
  if (residual.size() != f.size()) return ref;  // not the reference's outputs: nothing to move
  for (size_t i = 0; i < f.size(); ++i) residual[i] -= f[i];
  std::vector<std::vector<double>> effects;
  for (const auto& outputs : flipped) {
    std::vector<double> e = flat(outputs, ref.fp64);
    if (e.size() != f.size()) e.assign(f.size(), 0.0);
    for (size_t i = 0; i < f.size(); ++i) e[i] = std::isfinite(e[i] - f[i]) ? e[i] - f[i] : 0.0;
    effects.push_back(std::move(e));
  }
  // Greedy: the tie whose effect lowers |residual|^2 most, 2<r, e> - |e|^2, while one does.
  std::vector<double> delta(f.size(), 0.0);
  std::vector<bool> used(effects.size(), false);
  for (;;) {
    double best = 0;
    size_t pick = effects.size();
    for (size_t t = 0; t < effects.size(); ++t) {
      if (used[t]) continue;
      double dot = 0, norm = 0;
      for (size_t i = 0; i < f.size(); ++i) {
        if (!std::isfinite(residual[i])) continue;
        dot += residual[i] * effects[t][i];
        norm += effects[t][i] * effects[t][i];
      }
      if (const double gain = 2 * dot - norm; gain > best) {
        best = gain;
        pick = t;
      }
    }
    if (pick == effects.size()) break;
    used[pick] = true;
    chosen.push_back(pick);
    for (size_t i = 0; i < f.size(); ++i) {
      residual[i] -= effects[pick][i];
      delta[i] += effects[pick][i];
    }
  }
  if (chosen.empty()) return ref;
  AccuracyReference moved = ref;
  moved.fp64 = plus(ref.fp64, delta);
  moved.eager = plus(ref.eager, delta);
  return moved;
}

}  // namespace crucible
