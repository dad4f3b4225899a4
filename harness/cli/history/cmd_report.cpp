// `crucible report --html DIR`: the static dashboard of the store (reports/html_report.h).
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "cli.h"
#include "crucible/reports/html_report.h"
#include "crucible/reports/store.h"

namespace crucible::cli {

int report_command(const std::vector<std::string>& args) {
  po::options_description opts("report options");
  std::string dir, db, since;
  opts.add_options()("html", po::value(&dir)->required(), "directory to write the site into")(
      "db", po::value(&db)->default_value("crucible.db"), "the SQLite store to read")(
      "since", po::value(&since)->default_value("365d"),
      "runs since: 365d, 12w, or a UTC date; 'all' for every run");
  po::variables_map vm;
  if (!parse("report", "--html DIR [--db F] [--since 365d]", opts, {}, args, vm)) return kExitOk;
  reports::HtmlReportOptions o;
  o.dir = dir;
  o.since = since == "all" ? "" : reports::since_utc(since);
  o.db_name = db;
  auto store = reports::Store::open_readonly(db);
  const auto t0 = std::chrono::steady_clock::now();
  const reports::HtmlReportStats st = reports::write_html_report(*store, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("wrote {} pages, {:.1f} MB, to {} ({} runs, {} models) in {:.2f} s\n",
                           st.pages, static_cast<double>(st.bytes) / 1e6, dir, st.runs, st.models,
                           s);
  return kExitOk;
}

}  // namespace crucible::cli
