// The minifier's driver (see minify.h).
#include "minify.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "crucible/plugin_loader.h"
#include "reducer.h"

namespace crucible::minify {

using reports::Status;

namespace {

bool wanted(const std::string& want, const Signature& sig) {
  const Status s = sig.status;
  if (want == "suspicious") return sig.suspicious;
  if (want.empty() || want == "auto") return true;
  if (want == "accuracy") return s == Status::kFailAccuracy;
  if (want == "compile") return s == Status::kFailToCompile;
  if (want == "crash") return s == Status::kCrash;
  if (want == "timeout") return s == Status::kTimeout;
  return false;
}

const char* outcome_name(MinifyResult::Outcome o) {
  switch (o) {
    case MinifyResult::Outcome::kMinimized:
      return "minimized";
    case MinifyResult::Outcome::kNoFailure:
      return "no_failure";
    case MinifyResult::Outcome::kFlaky:
      return "flaky";
    case MinifyResult::Outcome::kOtherFailure:
      return "other_failure";
    case MinifyResult::Outcome::kNotReproduced:
      return "not_reproduced";
  }
  return "unknown";
}

}  // namespace

reports::ReproRecord repro_record(const MinifyResult& r, const MinifyOptions& opts,
                                  const std::string& suite, const std::string& model) {
  reports::ReproRecord rec;
  rec.suite = suite;
  rec.model = model;
  rec.backend = opts.oracle.backend;
  rec.backend_version = r.backend_version;
  for (const auto& [k, v] : opts.oracle.config) {
    rec.config += fmt::format("{}{}={}", rec.config.empty() ? "" : " ", k, v);
  }
  rec.outcome = outcome_name(r.outcome);
  rec.signature = r.signature.str();
  rec.message = r.message;
  rec.nodes_before = r.nodes_before;
  rec.nodes_after = r.nodes_after;
  rec.compute_nodes = r.compute_nodes_after;
  rec.oracle_calls = r.oracle_calls;
  rec.cache_hits = r.cache_hits;
  rec.flipped = r.flipped;
  rec.original_failures = r.original_failures;
  rec.replays_ok = r.replays_ok;
  rec.replays = opts.replays;
  rec.wall_s = r.wall_s;
  rec.culprit_kernel = r.culprit.kernel;
  for (const auto& p : r.culprit.passes) {
    rec.culprit_pass += (rec.culprit_pass.empty() ? "" : ",") + p;
  }
  const bool written = r.outcome == MinifyResult::Outcome::kMinimized ||
                       r.outcome == MinifyResult::Outcome::kNotReproduced;
  if (written) rec.path = std::filesystem::absolute(opts.out).string();
  return rec;
}

// The pipeline in order, as Halide's Lower.cpp reads: determinism, dead code, cosim cut, the
// passes to a fixpoint, data simplification, replays, kernel bisection, the repro. Read top to
// bottom it is the algorithm, so it stays one function.
MinifyResult minify(const Graph& g, const std::vector<Tensor>& inputs, Oracle& oracle,
                    const MinifyOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  MinifyResult res;
  auto finish = [&](MinifyResult::Outcome o, std::string message) {
    res.outcome = o;
    res.message = std::move(message);
    res.oracle_calls = oracle.calls() + res.culprit.oracle_calls;
    res.cache_hits = oracle.cache_hits();
    res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  };

  // Determinism first: the original must fail the same way in every one of `determinism` runs
  // before anything is cut. The first failure seen locks the signature.
  const Candidate original = whole(g, inputs);
  std::vector<Verdict> runs;
  std::optional<Verdict> first;
  for (int i = 0; i < opts.determinism; ++i) {
    runs.push_back(oracle.run(original));
    // A suspicious pass counts only when asked for: it fails no run.
    const Signature& sig = runs.back().signature;
    if (!first && sig.failing() && (!sig.suspicious || opts.want == "suspicious")) {
      first = runs.back();
    }
  }
  res.backend_version = runs.front().backend_version;
  if (!first) {
    const Verdict& v = runs.front();
    return finish(
        MinifyResult::Outcome::kNoFailure,
        fmt::format("{} does not fail on this graph ({} in {} runs){}{}", opts.oracle.backend,
                    v.signature.str(), runs.size(), v.error.empty() ? "" : ": " + v.error,
                    v.signature.suspicious ? " (--signature suspicious minifies it)" : ""));
  }
  res.signature = first->signature;
  if (!wanted(opts.want, first->signature)) {
    return finish(MinifyResult::Outcome::kOtherFailure,
                  fmt::format("the failure is {}, not the {} asked for with --signature",
                              first->signature.str(), opts.want));
  }
  for (const Verdict& v : runs) {
    res.original_failures += same_failure(first->signature, v.signature) ? 1 : 0;
  }
  if (res.original_failures < opts.determinism) {
    return finish(MinifyResult::Outcome::kFlaky,
                  fmt::format("flaky: {} in {} of {} runs of the original; not minified",
                              first->signature.str(), res.original_failures, opts.determinism));
  }

  const Recording rec = record_values(g, inputs);
  std::vector<int> all(g.nodes().size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  res.nodes_before = static_cast<int>(all.size());
  ReduceState state(g, rec, oracle, first->signature, all, opts.jobs);
  state.on_progress = opts.progress;
  // Dead code goes first, checked like any other cut.
  const std::vector<int> live = live_nodes(g, all);
  if (live.size() < all.size()) {
    run_confirmed(state, [&](ReduceState& s) { return s.try_keep(live); });
  }
  // Per-node localization: one worker compares every node's value; the first one off is tried
  // alone, then with everything before it. Fusion can hide or move a bug (a value kept for the
  // comparison may leave its group), so the blamed cut must still fail the same way to count.
  if (opts.cosim && first->signature.status == Status::kFailAccuracy) {
    res.cosim_node = oracle.localize(state.candidate());
    if (const auto id = g.find_value(res.cosim_node); id && g.value(*id).kind == ValueKind::kNode) {
      const int blamed = g.value(*id).node;
      std::vector<int> upto;
      for (int ni : state.keep()) {
        if (ni <= blamed) upto.push_back(ni);
      }
      res.cosim_cut = run_confirmed(
          state, [&](ReduceState& s) { return s.try_keep({blamed}) || s.try_keep(upto); });
    }
  }
  reduce_to_fixpoint(state);
  simplify_data(state);

  // What is replayed and written: every parameter bound to its data (write_repro keeps the
  // recipes beside it).
  const Candidate found = state.candidate();
  const Candidate result = bind_params(found);
  res.nodes_after = static_cast<int>(state.keep().size());
  res.compute_nodes_after = result.compute_nodes();
  res.flipped = state.flipped();
  if (opts.bisect && declares_bisection(opts.bisection)) {
    res.culprit = bisect_passes(result, first->signature, opts.oracle, opts.bisection);
    if (opts.progress) opts.progress("culprit: " + res.culprit.str());
  }
  for (int i = 0; i < opts.replays; ++i) {
    res.replays_ok += same_failure(first->signature, oracle.run(result).signature) ? 1 : 0;
  }
  ReproInfo info;
  info.backend = opts.oracle.backend;
  info.config = opts.oracle.config;
  info.tolerance = opts.oracle.tolerance;
  info.cosine = opts.oracle.cosine;
  info.scaled_tolerance = opts.oracle.scaled_tolerance;
  info.threads = opts.oracle.threads;
  info.signature = first->signature;
  info.original = opts.original;
  info.nodes_before = res.nodes_before;
  info.nodes_after = res.nodes_after;
  info.replays = opts.replays;
  info.replays_ok = res.replays_ok;
  // Nothing bisected (a backend that declares no bisection, or --no-kernel-bisect): no line.
  info.culprit = res.culprit.oracle_calls > 0 ? res.culprit.str() : "";
  info.kernel_code = res.culprit.kernel_code;
  info.code_hash = res.culprit.code_hash;
  info.seed = opts.seed;
  info.backend_version = res.backend_version;
  info.backend_env = opts.oracle.backend_env;
  // Where the backend was found, so `crucible repro` finds it again; an oracle that loads no
  // plugin file (a test's) records none.
  try {
    info.plugin_file = std::filesystem::absolute(
                           find_plugin(info.backend, plugin_search_path(opts.oracle.plugin_paths)))
                           .lexically_normal()
                           .string();
  } catch (const PluginError&) {
    info.plugin_file.clear();  // nothing to record; repro searches the usual path
  }
  write_repro(opts.out, found, info);
  if (res.replays_ok < opts.replays) {
    return finish(MinifyResult::Outcome::kNotReproduced,
                  fmt::format("the minimized graph failed the same way in only {} of {} replays",
                              res.replays_ok, opts.replays));
  }
  return finish(MinifyResult::Outcome::kMinimized,
                fmt::format("{}: {} nodes -> {} ({} compute), replayed {}/{}",
                            first->signature.str(), res.nodes_before, res.nodes_after,
                            res.compute_nodes_after, res.replays_ok, opts.replays));
}

}  // namespace crucible::minify
