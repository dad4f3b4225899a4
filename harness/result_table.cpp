// Console result table (see result_table.h).
#include "result_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace crucible {

namespace {
std::string opt(const std::optional<double>& v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : "-";
}
}  // namespace

std::string format_result_table(const std::vector<reports::ResultRecord>& results) {
  std::string out = fmt::format("{:<36} {:<10} {:<11} {:<22} {:>10} {:>8} {:>9} {:>8} {:>10}\n",
                                "model", "backend", "mode", "status", "median ms", "speedup",
                                "compile s", "peak MB", "max error");
  for (const auto& r : results) {
    const auto stats = reports::summarize(r.samples_ms);
    double max_err = -1;
    for (const auto& a : r.accuracy) max_err = std::max(max_err, a.max_abs_err);
    out += fmt::format(
        "{:<36} {:<10} {:<11} {:<22} {:>10} {:>8} {:>9} {:>8} {:>10}\n", r.suite + "/" + r.model,
        r.backend, r.mode, r.status, stats.n ? fmt::format("{:.3f}", stats.median) : "-",
        opt(r.speedup, "{:.2f}x"), opt(r.compile_s, "{:.3f}"), opt(r.peak_rss_mb, "{:.0f}"),
        max_err >= 0 ? fmt::format("{:.2g}", max_err) : "-");
  }
  return out;
}

}  // namespace crucible
