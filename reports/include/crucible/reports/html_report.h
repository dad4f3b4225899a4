// `crucible report --html DIR`: a static, self-contained dashboard of the store (no network: the
// charting library and every page's data are inline). index.html: per-backend summary over time;
// model-*.html: a model's latency and speed-up history, kernels per run, launcher settings;
// regressions.html: the detector's verdicts with the commands that reproduce them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "crucible/reports/store.h"

namespace crucible::reports {

struct HtmlReportOptions {
  std::filesystem::path dir;
  std::string since;    // UTC lower bound of runs shown ("" for all), see since_utc()
  std::string db_name;  // how the pages' commands name the store (the --db given)
};

struct HtmlReportStats {
  int pages = 0;
  uintmax_t bytes = 0;
  int runs = 0, models = 0;
};

// Writes the site into `dir` (created; its earlier pages replaced). Throws Error on a write
// failure; a store without runs gives a site that says so.
HtmlReportStats write_html_report(Store& store, const HtmlReportOptions& opts);

// `s` with &, <, >, " and ' as entities: for text and attribute values.
std::string html_escape(const std::string& s);

}  // namespace crucible::reports
