// Console result table (see result_table.h).
#include "result_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "crucible/core/quote.h"
#include "crucible/reports/error_summary.h"
#include "crucible/reports/peer.h"

namespace crucible {

using reports::Status;

namespace {
std::string opt(const std::optional<double>& v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : "-";
}

// Achieved GFLOP/s, GB/s and the fraction of the roofline bound, the bound's side marked: "c"
// compute (FMA peak), else the memory level the compulsory bytes fit (L1, L2, L3 or DRAM).
struct RooflineCells {
  std::string gflops = "-", gbs = "-", fraction = "-";
};
RooflineCells roofline_cells(const reports::ResultRecord& r, double median_ms) {
  RooflineCells cells;
  if (!r.roofline || r.status != Status::kPass) return cells;
  const auto f = reports::roofline_figures(*r.roofline, median_ms);
  if (!f) return cells;
  cells.gflops = fmt::format("{:.1f}", f->gflops);
  cells.gbs = fmt::format("{:.1f}", f->gbs);
  cells.fraction =
      fmt::format("{:.0f}% {}", 100 * f->fraction, f->memory_bound ? f->level.name : "c");
  return cells;
}

// The ceilings the roofline column was measured against, as the timing workers saw them (one
// range over the run's workers: a loaded machine measures a lower peak).
std::string ceilings_line(const std::vector<reports::ResultRecord>& results) {
  struct Range {
    double lo = INFINITY, hi = 0;
    void add(double v) {
      if (v <= 0) return;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    std::string str() const {
      return lo >= 0.95 * hi ? fmt::format("{:.0f}", hi) : fmt::format("{:.0f}-{:.0f}", lo, hi);
    }
  };
  Range peak, l1, l2, l3, dram;
  for (const auto& r : results) {
    if (!r.roofline) continue;
    peak.add(r.roofline->peak_gflops);
    l1.add(r.roofline->l1.gbs);
    l2.add(r.roofline->l2.gbs);
    l3.add(r.roofline->l3.gbs);
    dram.add(r.roofline->triad_gbs);
  }
  if (peak.hi <= 0) return "";
  std::string triads;
  for (const auto& [name, range] : {std::pair{"L1", l1}, {"L2", l2}, {"L3", l3}, {"DRAM", dram}}) {
    if (range.hi > 0)
      triads += fmt::format("{}{} {}", triads.empty() ? "" : ", ", name, range.str());
  }
  return fmt::format(
      "roofline: against the FMA peak ({} GFLOP/s) and the STREAM triad of the smallest level "
      "the compulsory bytes fit ({} GB/s), each timing worker measured on its threads\n",
      peak.str(), triads);
}

}  // namespace

std::string format_reason(const reports::ResultRecord& r, bool verbose) {
  // A pass says nothing under its row, but one the ties explain says so (accuracy_check.cpp).
  const bool tie_note = r.status == Status::kPass && r.error.rfind("pass at ties: ", 0) == 0;
  if ((r.status == Status::kPass && !tie_note) || r.error.empty()) return "";
  constexpr size_t kWidth = 120;
  constexpr std::string_view kIndent = "    ";
  if (verbose) {
    std::string out;
    std::string_view rest = r.error;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      out += fmt::format("{}{}\n", kIndent, escape_controls(std::string(rest.substr(0, nl))));
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    }
    return out;
  }
  return fmt::format("{}{}\n", kIndent, reports::error_summary(r.error, kWidth - kIndent.size()));
}

std::string format_result_table(const std::vector<reports::ResultRecord>& results, bool verbose) {
  // With the peer in the run, each speed-up over our eager gets its speed-up over the peer beside.
  const bool peer = reports::has_peer(results);
  const std::string peer_head =
      peer ? fmt::format(" {:>11}", std::string("vs ") + reports::kPeerBackend) : "";
  std::string out = fmt::format(
      "{:<36} {:<12} {:<11} {:<22} {:<10} {:>10} {:>6} {:>8}{} {:>8} {:>7} {:>8} {:>9} {:>8} "
      "{:>10}\n",
      "model", "backend", "mode", "status", "flags", "median ms", "cv %", "speedup", peer_head,
      "GFLOP/s", "GB/s", "roofline", "compile s", "peak MB", "max error");
  for (const auto& r : results) {
    const auto stats = reports::summarize(r.samples_ms);
    double max_err = -1;
    for (const auto& a : r.accuracy) max_err = std::max(max_err, a.max_abs_err);
    // noisy: the machine disturbed the timing; suspicious: passed, but far from fp64.
    // unaudited: timed under --no-audit, never beside audited results in a geomean.
    std::string flags = r.noisy ? "noisy" : "";
    if (r.pass_suspicious) flags += flags.empty() ? "suspicious" : ",suspicious";
    if (reports::unaudited(r)) flags += flags.empty() ? "unaudited" : ",unaudited";
    const std::string vs_peer =
        peer ? fmt::format(" {:>11}", opt(reports::speedup_over_peer(r, results), "{:.2f}x")) : "";
    const RooflineCells roof = roofline_cells(r, stats.median);
    out += fmt::format(
        "{:<36} {:<12} {:<11} {:<22} {:<10} {:>10} {:>6} {:>8}{} {:>8} {:>7} {:>8} {:>9} {:>8} "
        "{:>10}\n",
        r.suite + "/" + r.model, r.backend, r.mode, reports::status_name(r.status),
        flags.empty() ? "-" : flags, stats.n ? fmt::format("{:.3f}", stats.median) : "-",
        stats.n > 1 ? fmt::format("{:.1f}", 100 * stats.cv) : "-", opt(r.speedup, "{:.2f}x"),
        vs_peer, roof.gflops, roof.gbs, roof.fraction, opt(r.compile_s, "{:.3f}"),
        opt(r.peak_rss_mb, "{:.0f}"), max_err >= 0 ? fmt::format("{:.2g}", max_err) : "-");
    out += format_reason(r, verbose);
  }
  return out + ceilings_line(results);
}

namespace {

// What a geomean line covers: every performance result of its (backend, suite) counts towards the
// pass rate, as PyTorch's dashboard reports it beside the geomean; only passing, undisturbed
// results with a ratio enter the mean, and the line says how many of the models that is.
struct GeomeanTally {
  double log_sum = 0;
  int in_mean = 0, passed = 0, total = 0, noisy = 0;

  void add(const reports::ResultRecord& r, const std::optional<double>& ratio) {
    ++total;
    if (r.status != Status::kPass) return;
    ++passed;
    // A noisy timing is no speed-up to average: the machine, not the backend, moved it.
    if (r.noisy) {
      ++noisy;
      return;
    }
    if (!ratio || !(*ratio > 0)) return;
    log_sum += std::log(*ratio);
    ++in_mean;
  }

  std::string line(const std::string& backend, const std::string& baseline,
                   const std::string& where) const {
    const std::string mean =
        in_mean > 0 ? fmt::format("{:.2f}x", std::exp(log_sum / in_mean)) : std::string("-");
    return fmt::format(
        "geomean speedup of {} over {}, {}: {} over {} of {} models, pass rate {}/{} ({:.0f}%){}\n",
        backend, baseline, where, mean, in_mean, total, passed, total, 100.0 * passed / total,
        noisy > 0 ? fmt::format(", {} noisy left out", noisy) : "");
  }
};

// Geomean lines of `ratio` (a result's speed-up over `baseline`) per (backend, suite), then over
// all suites for a backend timed on several.
std::string geomean_lines(
    const std::vector<reports::ResultRecord>& results, const std::string& baseline,
    const std::string& skip,
    const std::function<std::optional<double>(const reports::ResultRecord&)>& ratio) {
  std::map<std::pair<std::string, std::string>, GeomeanTally> by_suite;  // (backend, suite)
  std::map<std::string, GeomeanTally> overall;
  std::map<std::string, std::set<std::string>> suites_of;
  for (const auto& r : results) {
    if (r.mode != "performance" || r.backend == "eager" || r.backend == skip) continue;
    // Unaudited results get lines of their own, never averaged with audited ones.
    const std::string backend = reports::unaudited(r) ? r.backend + " (unaudited)" : r.backend;
    const std::optional<double> x = r.status == Status::kPass ? ratio(r) : std::nullopt;
    by_suite[{backend, r.suite}].add(r, x);
    overall[backend].add(r, x);
    suites_of[backend].insert(r.suite);
  }
  std::string out;
  for (const auto& [key, tally] : by_suite) {
    out += tally.line(key.first, baseline, "suite " + key.second);
  }
  for (const auto& [backend, tally] : overall) {
    if (suites_of[backend].size() < 2) continue;
    out += tally.line(backend, baseline, "all suites");
  }
  return out;
}

}  // namespace

std::string format_speedup_summary(const std::vector<reports::ResultRecord>& results) {
  std::string out = geomean_lines(results, "crucible eager", "",
                                  [](const reports::ResultRecord& r) { return r.speedup; });
  if (reports::has_peer(results)) {
    out += geomean_lines(
        results, std::string(reports::kPeerBackend) + " (PyTorch eager)", reports::kPeerBackend,
        [&](const reports::ResultRecord& r) { return reports::speedup_over_peer(r, results); });
  }
  return out;
}

}  // namespace crucible
