// Dynamo-compatible CSV exports (see csv_export.h).
#include "crucible/reports/csv_export.h"

#include <fmt/format.h>

#include <fstream>
#include <map>

#include "crucible/core/error.h"
#include "crucible/reports/peer.h"
#include "crucible/reports/table.h"

namespace crucible::reports {

namespace {

std::string num(const std::optional<double>& v, int precision) {
  return v ? fmt::format("{:.{}f}", *v, precision) : "0";
}

}  // namespace

std::vector<std::filesystem::path> write_dynamo_csvs(const std::filesystem::path& dir,
                                                     const std::vector<ResultRecord>& results) {
  std::map<std::string, std::vector<const ResultRecord*>> perf, acc;
  std::map<std::string, double> eager_peak;  // by suite/model
  for (const auto& r : results) {
    (r.mode == "performance" ? perf : acc)[r.backend].push_back(&r);
    if (r.mode == "performance" && r.backend == "eager" && r.peak_rss_mb) {
      eager_peak[r.suite + "/" + r.model] = *r.peak_rss_mb;
    }
  }
  std::vector<std::filesystem::path> written;
  auto open = [&](const std::string& name) {
    std::filesystem::path p = dir / name;
    std::ofstream out(p, std::ios::trunc);
    if (!out) throw Error(fmt::format("{}: cannot write", p.string()));
    written.push_back(p);
    return out;
  };
  // Empty fields where a result has no roofline (failed, or an op without a cost rule).
  auto roofline_fields = [](const ResultRecord& r, double median_ms) {
    const auto f = r.roofline ? roofline_figures(*r.roofline, median_ms) : std::nullopt;
    if (!f || r.status != Status::kPass) return std::string(",,,,,,,,,,");
    const Roofline& rl = *r.roofline;
    return fmt::format(",{:.3f},{:.0f},{:.0f},{:.3f},{:.1f},{:.1f},{:.4f},{},{},{:.1f}", f->gflops,
                       rl.flops, rl.min_bytes, f->gbs, rl.peak_gflops, rl.triad_gbs, f->fraction,
                       f->memory_bound ? f->level.name : "compute", f->level.name, f->level.gbs);
  };
  for (const auto& [backend, rows] : perf) {
    auto out = open(backend + "_performance.csv");
    // PyTorch's dynamo columns first, in their order; the speed-up over the peer, the audit's
    // figures (audited 0: timed under --no-audit), the roofline's and the throughput (the batch
    // over the median: a training step's samples/s) after them.
    const bool peer = has_peer(results) && backend != kPeerBackend;
    out << "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_"
           "peak_mem,"
           "dynamo_peak_mem"
        << (peer ? std::string(",speedup_vs_") + kPeerBackend : "")
        << ",audited,audit_share,audit_coverage,gflops,flops_per_call,min_bytes_per_call,gbs,"
           "peak_gflops,triad_gbs,roofline_fraction,bound,memory_level,memory_level_gbs,samples_"
           "per_s\n";
    for (const ResultRecord* r : rows) {
      const SampleStats st = summarize(r->samples_ms);
      auto it = eager_peak.find(r->suite + "/" + r->model);
      std::optional<double> eager_gb, own_gb;
      if (it != eager_peak.end()) eager_gb = it->second / 1024.0;
      if (r->peak_rss_mb) own_gb = *r->peak_rss_mb / 1024.0;
      out << fmt::format("cpu,{},{},{},{},{},{},{},{}", csv_field(r->model), r->batch_size,
                         num(r->speedup, 6), st.n ? fmt::format("{:.6f}", st.median) : "0",
                         num(r->compile_s, 6), num(r->memory_ratio, 6), num(eager_gb, 6),
                         num(own_gb, 6))
          << (peer ? "," + num(speedup_over_peer(*r, results), 6) : "")
          << fmt::format(",{},{},{}", unaudited(*r) ? 0 : 1, num(r->audit_share, 4),
                         num(r->audit_coverage, 4))
          << roofline_fields(*r, st.median) << ","
          << (st.n && st.median > 0 ? fmt::format("{:.3f}", 1000.0 * r->batch_size / st.median)
                                    : "0")
          << "\n";
    }
  }
  for (const auto& [backend, rows] : acc) {
    auto out = open(backend + "_accuracy.csv");
    out << "dev,name,batch_size,accuracy\n";
    for (const ResultRecord* r : rows) {
      out << fmt::format("cpu,{},{},{}\n", csv_field(r->model), r->batch_size,
                         csv_field(std::string(status_name(r->status))));
    }
  }
  return written;
}

}  // namespace crucible::reports
