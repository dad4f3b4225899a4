// The static dashboard (see html_report.h). Pages are built from one pass over the store's rows:
// per (run, backend) summaries for the index, per (suite, model) series for model pages, and
// the detector's alerts for the regressions page. Every name is escaped for HTML, and data goes
// into <script type="application/json"> blocks with "</" broken so no name can end the block.
#include "crucible/reports/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "crucible/core/error.h"
#include "crucible/core/quote.h"
#include "crucible/reports/json.h"
#include "crucible/reports/run_options.h"
#include "sqlite_db.h"

namespace crucible::reports {

extern const char* const kUplotJs;
extern const char* const kUplotCss;

namespace fs = std::filesystem;

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// JSON made safe inside <script>: "</" could end the block, and JSON cannot hold it outside a
// string, where "<\/" means the same.
std::string script_safe(const std::string& json) {
  std::string out;
  for (size_t i = 0; i < json.size(); ++i) {
    out += json[i];
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') out += '\\';
  }
  return out;
}

std::string text(const Cell& c) { return cell_text(c, false); }

double number(const Cell& c) {
  if (std::holds_alternative<double>(c)) return std::get<double>(c);
  if (std::holds_alternative<int64_t>(c)) return static_cast<double>(std::get<int64_t>(c));
  return std::nan("");
}

// "2026-11-25T04:51:08.123Z" -> seconds since the epoch (UTC).
double epoch_of(const std::string& utc) {
  std::tm tm{};
  if (sscanf(utc.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec) < 3) {
    return 0;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm));
}

std::string json_array(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json_number(v[i]);
  return out + "]";
}

// A file name for a model page: its characters that are not [A-Za-z0-9_-] replaced, and a hash
// of the exact name so that two names that clean up alike stay apart.
std::string page_name(const std::string& suite, const std::string& model) {
  std::string clean;
  for (char c : suite + "." + model)
    clean += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return fmt::format("model-{}-{:08x}.html", clean.substr(0, 60),
                     static_cast<uint32_t>(std::hash<std::string>{}(suite + "\n" + model)));
}

constexpr const char* kStyle = R"css(
body{font:14px/1.4 system-ui,sans-serif;margin:0 24px 40px;color:#1d2330;max-width:1200px}
nav{margin:16px 0;padding-bottom:8px;border-bottom:1px solid #d8dce4}nav a{margin-right:16px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:8px 0}th,td{padding:3px 10px;border-bottom:1px solid #e6e8ee;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f4f7}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #e6e8ee;padding:4px}
.point{font-size:12px;padding:2px 6px;min-height:16px}
.fail{color:#b3261e;font-weight:600}.pass{color:#1e7b34}.muted{color:#6b7280}.warn{color:#9a5b00}
.banner{padding:8px 12px;border-radius:4px;margin:8px 0}.banner ul{margin:4px 0}
.banner.bad{background:#fde8e8;border:1px solid #b3261e}.banner.ok{background:#e8f5ec}
code{background:#f3f4f7;padding:1px 4px;border-radius:3px;word-break:break-all}
code.cmd{word-break:normal;overflow-wrap:anywhere}
tr.alert td{border-bottom:none}tr.commands td{padding:0 10px 6px 24px;font-size:13px}
)css";

// Draws one line chart: el, title, x (epoch s), [{label, values}], y label, and an optional
// fixed y range [min, max] (a percentage reads wrong on an axis that goes to 200).
constexpr const char* kChartJs = R"js(
// `info`, when given, holds a line per point (its run, commit, noise) shown under the chart for
// the point under the cursor.
// `marks`, when given, are [{t, k, l}]: a dashed line at time t for each alert (k its kind: red for
// a regression or status change, green for an improvement, grey for the machine), labelled l.
// Tick labels with the fewest decimals that keep every label distinct: uPlot's default keeps at
// most 3, so a latency axis from 0.0031 to 0.0034 ms read 0.003 at every tick.
function crTicks(splits) {
  for (let d = 0; d <= 15; d++) {
    const t = splits.map(v => v.toFixed(d));
    if (new Set(t).size === t.length) return t;
  }
  return splits.map(String);
}
function crChart(el, title, xs, series, ylabel, yrange, info, marks) {
  const colors = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];
  const y = yrange ? {auto: false, range: yrange} : {};
  const div = document.createElement('div'); div.className = 'chart'; el.appendChild(div);
  const line = document.createElement('div'); line.className = 'point muted';
  const opts = {title: title, width: 540, height: 220, scales: {x: {time: true}, y: y},
    series: [{}].concat(series.map((s, i) => ({label: s.label, stroke: colors[i % colors.length],
      width: 1.5, points: {size: 4}, spanGaps: true}))),
    // The labels drawn also go into the chart's data-yticks, for a reader of the DOM.
    axes: [{}, {label: ylabel, values: (u, splits) => { const t = crTicks(splits);
        div.dataset.yticks = t.join(' '); return t; },
      size: (u, vals) => Math.max(50, 14 + 7 * Math.max(0, ...(vals || []).map(v => v.length)))}],
    hooks: {setCursor: [u => { const i = u.cursor.idx;
      line.textContent = info && i != null ? info[i] : '\u00a0'; }],
      draw: [u => { (marks || []).forEach(m => {
        const x = u.valToPos(m.t, 'x', true), c = u.ctx;
        c.save(); c.setLineDash([4, 3]); c.lineWidth = 1;
        c.strokeStyle = c.fillStyle = m.k == 'improvement' ? '#16a34a'
          : (m.k == 'regression' || m.k == 'status') ? '#dc2626' : '#9ca3af';
        c.beginPath(); c.moveTo(x, u.bbox.top); c.lineTo(x, u.bbox.top + u.bbox.height); c.stroke();
        c.font = '10px sans-serif'; c.fillText(m.l, x + 3, u.bbox.top + 10); c.restore(); }); }]}};
  const chart = new uPlot(opts, [xs].concat(series.map(s => s.values)), div);
  line.textContent = '\u00a0'; div.appendChild(line);
  return chart;
}
)js";

std::string page(const std::string& title, const std::string& body, const std::string& data,
                 const std::string& script) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width\">\n<title>{0}</title>\n"
      "<style>{1}{2}</style>\n<script>{3}</script>\n<script>{4}</script>\n</head><body>\n"
      "<nav><a href=\"index.html\">Summary</a><a href=\"regressions.html\">Regressions</a></nav>\n"
      "<h1>{0}</h1>\n{5}\n<script type=\"application/json\" id=\"data\">{6}</script>\n"
      "<script>const DATA = JSON.parse(document.getElementById('data').textContent);\n{7}"
      // When the page was drawn, for the test that loads it in a browser.
      "document.body.dataset.renderMs = performance.now().toFixed(0);</script>\n"
      "</body></html>\n",
      html_escape(title), kUplotCss, kStyle, kUplotJs, kChartJs, body, script_safe(data), script);
}

void write_file(const fs::path& path, const std::string& text, HtmlReportStats& st) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << text) || !out.flush()) {
    throw Error(fmt::format("{}: cannot write", path.string()));
  }
  ++st.pages;
  st.bytes += text.size();
}

// A file the pages load (not a page of its own).
void write_asset(const fs::path& path, const std::string& text, HtmlReportStats& st) {
  write_file(path, text, st);
  --st.pages;
}

std::string fmt_opt(double v, const char* spec) {
  return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : "–";
}

// One row of Store::report_rows(), read by column name: a new column cannot shift what is read.
struct Point {
  int64_t run = 0;
  double t = 0;  // the run's start, seconds since the epoch
  std::string started, commit, suite, model, backend, mode;
  Status status = Status::kFailToRun;
  double median_ms = NAN, cv = NAN, speedup = NAN, compile_s = NAN, memory_ratio = NAN;
  bool noisy = false;
  int64_t result = 0;
  bool unaudited = false;  // timed under --no-audit
  double audit_share = NAN, audit_coverage = NAN;
  double roofline_fraction = NAN, gflops = NAN;  // against the worker's measured ceilings

  // A timing skipped because its accuracy check failed: that check's status, which the page
  // shows as the cause rather than a bare "skipped".
  std::optional<Status> skipped_for;

  bool pass() const { return status == Status::kPass; }
  std::string status_text() const {
    if (status == Status::kSkipped && skipped_for)
      return fmt::format("{} (timing skipped)", status_name(*skipped_for));
    return std::string(status_name(status));
  }
};

std::vector<Point> read_points(const Table& rows, const std::string& where) {
  const auto col = [&](std::string_view name) {
    const size_t c = rows.column(name);
    if (c == rows.columns.size())
      throw StoreError(fmt::format("{}: the report's rows have no column '{}'", where, name));
    return c;
  };
  const size_t run = col("run"), started = col("started_at"), commit = col("git_commit"),
               suite = col("suite"), model = col("model"), backend = col("backend"),
               mode = col("mode"), status = col("status"), median = col("median_ms"),
               cv = col("cv"), speedup = col("speedup"), compile = col("compile_s"),
               memory = col("memory_ratio"), noisy = col("noisy"), result = col("result"),
               unaudited = col("unaudited"), share = col("audit_share"),
               coverage = col("audit_coverage"), roofline = col("roofline_fraction"),
               gflops = col("gflops");
  std::vector<Point> out;
  for (const auto& r : rows.rows) {
    Point p;
    p.run = std::get<int64_t>(r[run]);
    p.started = text(r[started]);
    p.t = epoch_of(p.started);
    p.commit = text(r[commit]);
    p.suite = text(r[suite]);
    p.model = text(r[model]);
    p.backend = text(r[backend]);
    p.mode = text(r[mode]);
    p.status = stored_status(text(r[status]), where);
    p.median_ms = number(r[median]);
    p.cv = number(r[cv]);
    p.speedup = number(r[speedup]);
    p.compile_s = number(r[compile]);
    p.memory_ratio = number(r[memory]);
    p.noisy = number(r[noisy]) > 0;
    p.result = std::get<int64_t>(r[result]);
    p.unaudited = number(r[unaudited]) > 0;
    p.audit_share = number(r[share]);
    p.audit_coverage = number(r[coverage]);
    p.roofline_fraction = number(r[roofline]);
    p.gflops = number(r[gflops]);
    out.push_back(std::move(p));
  }
  return out;
}

// What the audit did for one performance result, for the model pages.
std::string audit_cell(const Point& p) {
  if (p.unaudited) return "unaudited";
  if (!std::isfinite(p.audit_share)) return "–";
  return fmt::format("{:.0f}% of time, {:.0f}% of calls", 100 * p.audit_share,
                     100 * p.audit_coverage);
}

// regressions.html's body: the detector's verdicts over the whole history, newest first, each with
// the commands that reproduce it and find its commit, the machine-wide shifts it set aside, and
// how much was not judged.
// Why a series was not judged, as the regressions page counts it.
const char* not_judged_kind(const std::string& why) {
  return why.find("noisy)") != std::string::npos         ? "their newest run flagged noisy"
         : why.find("too noisy") != std::string::npos    ? "too much run-to-run noise"
         : why.find("machine-wide") != std::string::npos ? "a new level after a machine-wide shift"
         : why.find("a new level") != std::string::npos  ? "too few runs since a change of level"
                                                         : "too few runs of their environment";
}

// A command as copyable text, wrapped at its spaces, never a character a line.
std::string command_text(const std::string& command) {
  return "<code class=\"cmd\">" + html_escape(command) + "</code>";
}

// The -c options of run `run_id`'s command that reach `backend` (unscoped ones every backend but
// eager, "BACKEND:key=value" that one), each as " -c WORD": what a command that reproduces one of
// its results must be given again (a planted bug, a kernel choice).
std::string options_reaching(Store& store, int64_t run_id, const std::string& backend) {
  std::string command;
  try {
    command = store.run(run_id).command;
  } catch (const StoreError&) {
    return "";
  }
  std::string out;
  for (const std::string& value : reports::options_reaching(command, backend))
    out += " -c " + shell_command({value});
  return out;
}

// The "find the commit" cell: from the last commit at the old level to the first at the new, git
// bisect over those, judged by the run's status or, for a timing change, by the time over eager's,
// with the run's options; or why there is none (a listed-only row has neither).
struct FindCommit {
  std::string command, why_not;
};
FindCommit find_commit(const std::string& kind, const std::string& commits,
                       const std::string& suite, const std::string& model,
                       const std::string& backend, const std::string& options, bool listed_only) {
  if (listed_only) return {};
  if (kind != "status" && backend == "eager")
    return {"", "eager's own time is the reference's: bisect the backend's ratio instead"};
  const size_t dots = commits.find("..");
  const std::string good = dots == std::string::npos ? "" : commits.substr(0, dots),
                    bad = dots == std::string::npos ? "" : commits.substr(dots + 2);
  if (commits.find("dirty") != std::string::npos)
    return {"", "a run was built from a tree with uncommitted changes: no commit to go back to"};
  if (good.empty() || bad.empty() || good == "?" || bad == "?")
    return {"", "the runs recorded no commit (not built from a git checkout)"};
  if (good == bad)
    return {"", fmt::format("both runs are at commit {}: the change is not in the code (the "
                            "machine, the options or the inputs)",
                            good)};
  return {fmt::format("crucible bisect --good {} --bad {}{} -- --suite {} --only {} "
                      "--backends {} --mode {}{}",
                      good, bad, kind == "status" ? "" : " --judge ratio", suite, model, backend,
                      kind == "status" ? "accuracy" : "performance", options),
          ""};
}

// The row under an alert with its commands across the table's width (in a column of their own
// they were squeezed to a character a line): what reproduces it, and what finds its commit or
// why nothing can. Empty for a listed-only row.
std::string commands_row(const std::string& repro, const FindCommit& bisect) {
  if (repro.empty() && bisect.command.empty() && bisect.why_not.empty()) return "";
  std::string cell;
  if (!repro.empty()) cell += "<div>reproduce: " + command_text(repro) + "</div>";
  if (!bisect.command.empty()) {
    cell += "<div>find the commit: " + command_text(bisect.command) + "</div>";
  } else if (!bisect.why_not.empty()) {
    cell += "<div>find the commit: <span class=\"muted\">" + html_escape(bisect.why_not) +
            "</span></div>";
  }
  return "<tr class=\"commands\"><td colspan=\"10\">" + cell + "</td></tr>\n";
}

// The regressions page's table of detection floors, around its rows.
std::string floors_section(const std::string& rows) {
  if (rows.empty()) return "";
  return "<h2>Detection floors</h2>\n<p>The smallest step each series can show now: on a full "
         "baseline a change over 3 runs past max(1%, 4 x its run-to-run noise / sqrt 3); on a "
         "ratio's short baseline what the short-baseline rule reports (from 2%, from 4.5% on fewer "
         "than 3 runs).</p>\n"
         "<table class=\"floors\"><tr><th>suite</th><th>model</th><th>backend</th><th>measure</th>"
         "<th>floor</th><th>noise</th><th>on</th></tr>\n" +
         rows + "</table>\n";
}

std::string regressions_body(Store& store, const HtmlReportOptions& opts, const Table& alerts) {
  const auto column = [&](const char* name) { return alerts.column(name); };
  const size_t kKind = column("kind"), kSuite = column("suite"), kModel = column("model"),
               kBackend = column("backend"), kMeasure = column("measure"),
               kChange = column("change_pct"), kRunCol = column("run"),
               kConfirmed = column("confirmed_by"), kCommits = column("commits"),
               kKernels = column("kernels"), kNote = column("note"),
               kThreshold = column("threshold_pct"), kNoise = column("noise_pct");
  std::string rb =
      "<p>What the change detector found in the history. Each backend is judged by its time over "
      "eager's in the same run (a machine-wide shift cancels there); a regression holds on 2 or 3 "
      "runs past 4 x the series' noise; suspicious is one run alone; environment starts a new "
      "baseline; an environment event is many series moving together at one run; absorbed is a "
      "step a short baseline took in without an alert (the note says why), with_event a ratio "
      "the machine bent at a shift.</p>\n"
      "<table><tr><th>kind</th><th>suite</th><th>model</th><th>backend</th>"
      "<th>measure</th>"
      "<th>change</th><th>runs</th><th>commits</th><th>kernels moved</th><th>note</th>"
      "</tr>\n";
  int listed = 0;
  std::map<std::string, int> not_judged;  // why -> series
  std::string floors;                     // each judged series' detection floor
  for (auto a = alerts.rows.rbegin(); a != alerts.rows.rend(); ++a) {
    const auto& r = *a;  // newest first
    const std::string kind = text(r[kKind]), suite = text(r[kSuite]), model = text(r[kModel]),
                      backend = text(r[kBackend]);
    if (kind == "not_judged") ++not_judged[not_judged_kind(text(r[kNote]))];
    if (kind == "floor") {
      floors += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=n>{:.1f}%</td>"
          "<td class=n>{:.2f}%</td><td>{}</td></tr>\n",
          html_escape(suite), html_escape(model), html_escape(backend),
          html_escape(text(r[kMeasure])), std::get<double>(r[kThreshold]),
          std::get<double>(r[kNoise]),
          text(r[kNote]).find("short baseline") != std::string::npos ? "short baseline"
                                                                     : "full baseline");
    }
    if (kind == "environment" || kind == "suspicious" || kind == "not_judged" || kind == "floor")
      continue;
    const int64_t run = std::get<int64_t>(r[kRunCol]);
    std::string repro =
        fmt::format("crucible compare {} {} --db {}", run - 1, text(r[kConfirmed]), opts.db_name);
    // Listed, not alerted: what a short baseline took in, or a ratio the machine bent.
    const bool listed_only =
        kind == "environment_event" || kind == "absorbed" || kind == "with_event";
    if (listed_only) repro.clear();
    const std::string options =
        kind == "environment_event"
            ? ""
            : options_reaching(store, std::get<int64_t>(r[kConfirmed]), backend);
    if (kind == "status") {
      repro = fmt::format("crucible minify --suite {} --only {} --backend {}{}", suite, model,
                          backend, options);
      for (const ReproRecord& rr : store.repros(model)) {
        if (rr.backend == backend && !rr.path.empty()) {
          repro = "crucible repro " + rr.path;
          break;
        }
      }
    }
    const std::string commits = text(r[kCommits]);
    const FindCommit bisect =
        find_commit(kind, commits, suite, model, backend, options, listed_only);
    rb += fmt::format(
        "<tr class=\"alert\"><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td class=n>{}</td><td>{}..{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n{}",
        kind == "improvement" ? "pass"
        : listed_only         ? "muted"
                              : "fail",
        html_escape(kind), html_escape(suite),
        suite == "*"
            ? "*"
            : fmt::format("<a href=\"{}\">{}</a>", page_name(suite, model), html_escape(model)),
        html_escape(backend), html_escape(text(r[kMeasure])),
        std::holds_alternative<double>(r[kChange])
            ? fmt::format("{:+.1f}%", std::get<double>(r[kChange]))
            : "",
        run, text(r[kConfirmed]), html_escape(commits), html_escape(text(r[kKernels])),
        html_escape(text(r[kNote])), commands_row(repro, bisect));
    ++listed;
  }
  rb += "</table>\n";
  if (listed == 0) rb += "<p class=\"muted\">No regression, improvement or status change.</p>\n";
  // Silence where nothing was judged is no verdict: say how much of it there is.
  for (const auto& [why, n] : not_judged) {
    rb += fmt::format("<p class=\"notjudged\">{} series not judged at their newest run: {}.</p>\n",
                      n, why);
  }
  return rb + floors_section(floors);
}

// The detector's verdicts as the index and the charts show them: each series' alerts and the
// machine-wide events at their runs, and what the newest run confirmed.
struct Mark {
  int64_t run;
  std::string kind, label;
};
struct AlertMarks {
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<Mark>> series;
  std::vector<Mark> machine;               // environment events: every chart's
  std::vector<std::string> confirmed_now;  // regressions and status changes of the newest run
  int events_now = 0, not_judged_now = 0;
};

AlertMarks mark_alerts(const Table& alerts, int64_t newest) {
  const size_t aKind = alerts.column("kind"), aSuite = alerts.column("suite"),
               aModel = alerts.column("model"), aBackend = alerts.column("backend"),
               aChange = alerts.column("change_pct"), aRun = alerts.column("run"),
               aConfirmed = alerts.column("confirmed_by");
  AlertMarks m;
  for (const auto& r : alerts.rows) {
    const std::string kind = text(r[aKind]);
    const int64_t run = std::get<int64_t>(r[aRun]);
    const bool now = std::get<int64_t>(r[aConfirmed]) == newest;
    const std::string change = std::holds_alternative<double>(r[aChange])
                                   ? fmt::format(" {:+.1f}%", std::get<double>(r[aChange]))
                                   : "";
    if (kind == "environment_event") {
      m.machine.push_back({run, kind, "machine" + change});
      m.events_now += now ? 1 : 0;
    } else if (kind == "regression" || kind == "improvement" || kind == "status") {
      m.series[{text(r[aSuite]), text(r[aModel]), text(r[aBackend])}].push_back(
          {run, kind, kind + change});
      if (now && kind != "improvement") {
        m.confirmed_now.push_back(fmt::format("{}/{} on {}: {}{}", text(r[aSuite]), text(r[aModel]),
                                              text(r[aBackend]), kind, change));
      }
    } else if (kind == "not_judged" && run == newest) {
      ++m.not_judged_now;
    }
  }
  return m;
}

// The index's banner: what the newest run confirmed, before anything else.
std::string index_banner(const AlertMarks& m, int64_t newest) {
  std::string items;
  for (const std::string& c : m.confirmed_now) items += "<li>" + html_escape(c) + "</li>";
  std::string b =
      m.confirmed_now.empty()
          ? fmt::format("<div class=\"banner ok\">No regression confirmed by run {}.", newest)
          : fmt::format(
                "<div class=\"banner bad\"><b>{} regression{} confirmed by run {}</b> "
                "(<a href=\"regressions.html\">details and bisect commands</a>):<ul>{}</ul>",
                m.confirmed_now.size(), m.confirmed_now.size() == 1 ? "" : "s", newest, items);
  if (m.events_now > 0) {
    b += fmt::format(" {} machine-wide shift{} (no alert).", m.events_now,
                     m.events_now == 1 ? "" : "s");
  }
  if (m.not_judged_now > 0)
    b += fmt::format(" {} series not judged at this run.", m.not_judged_now);
  return b + "</div>\n";
}

// Per (run, backend): accuracy statuses, speed-ups of models whose accuracy passed, compile
// times and memory ratios.
struct RunSummary {
  double t = 0;
  int checked = 0, passed = 0, skipped = 0;
  int timed = 0, noisy = 0;  // performance results, and the passing ones the machine disturbed
  std::vector<double> log_speedup, compile, log_memory;
};

// What the pages are built from, in one pass over the rows.
struct Dashboard {
  std::map<std::string, std::map<int64_t, RunSummary>> summary;  // backend -> run -> summary
  // (suite, model) -> backend -> its performance results, oldest first
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::vector<Point>>> models;
  std::set<int64_t> runs;
};

Dashboard gather(const std::vector<Point>& points) {
  Dashboard d;
  // (run, suite/model/backend) -> the accuracy status beside a timing
  std::map<std::pair<int64_t, std::string>, Status> accuracy;
  for (const Point& p : points) {
    if (p.mode == "accuracy")
      accuracy[{p.run, p.suite + "/" + p.model + "/" + p.backend}] = p.status;
  }
  for (const Point& p : points) {
    d.runs.insert(p.run);
    auto& model = d.models[{p.suite, p.model}];
    if (p.mode == "performance") {
      Point timing = p;
      const auto acc = accuracy.find({p.run, p.suite + "/" + p.model + "/" + p.backend});
      if (p.status == Status::kSkipped && acc != accuracy.end() && acc->second != Status::kPass &&
          acc->second != Status::kSkipped)
        timing.skipped_for = acc->second;
      model[p.backend].push_back(std::move(timing));
    }
    // Eager is every speed-up's baseline, but its accuracy is a pass rate of its own (a
    // conformance suite judges it against expected outputs).
    if (p.backend == "eager" && p.mode != "accuracy") continue;
    // Speed-ups timed under --no-audit are summarised apart, never averaged with audited ones.
    RunSummary& s = d.summary[p.unaudited ? p.backend + " (unaudited)" : p.backend][p.run];
    s.t = p.t;
    if (p.mode == "accuracy") {
      ++s.checked;
      s.passed += p.pass() ? 1 : 0;
      s.skipped += p.status == Status::kSkipped ? 1 : 0;
      continue;
    }
    const auto acc = accuracy.find({p.run, p.suite + "/" + p.model + "/" + p.backend});
    const bool accurate = acc == accuracy.end() ? p.pass() : acc->second == Status::kPass;
    ++s.timed;
    // A noisy timing is no speed-up to average: the machine, not the backend, moved it.
    if (p.noisy && p.pass()) ++s.noisy;
    if (accurate && !p.noisy && p.speedup > 0) s.log_speedup.push_back(std::log(p.speedup));
    if (std::isfinite(p.compile_s)) s.compile.push_back(p.compile_s);
    if (p.memory_ratio > 0) s.log_memory.push_back(std::log(p.memory_ratio));
  }
  return d;
}

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// The geomean speed-up with what it covers: how many of the backend's timed models, and how many
// noisy ones were left out.
std::string geomean_cell(const RunSummary& s) {
  if (s.timed == 0) return "–";
  return fmt::format(
      "{} over {} of {} models{}", fmt_opt(std::exp(mean_of(s.log_speedup)), "{:.3f}x"),
      s.log_speedup.size(), s.timed,
      s.noisy ? fmt::format(" <span class=\"warn\">({} noisy left out)</span>", s.noisy) : "");
}

// A result's marks in the models table: the ones that say its figure is not a clean speed-up.
std::string marks(const Point& p) {
  std::string out;
  if (p.noisy) out += " <span class=\"warn\">noisy</span>";
  if (p.unaudited) out += " <span class=\"warn\">unaudited</span>";
  return out;
}

// index.html: the banner, the latest run per backend with its charts over time, the models.
std::string index_page(const Dashboard& d, const AlertMarks& marked, int64_t newest) {
  std::string body, data = "{", script;
  if (d.runs.empty()) body += "<p class=\"muted\">The store holds no runs in this window.</p>\n";
  if (!d.runs.empty()) body += index_banner(marked, newest);
  body +=
      "<h2>Latest run per backend</h2>\n<table><tr><th>backend</th><th>run</th>"
      "<th>accuracy pass rate</th><th>geomean speed-up (passing models)</th>"
      "<th>mean compile s</th><th>geomean memory ratio</th></tr>\n";
  int chart = 0;
  for (const auto& [backend, by_run] : d.summary) {
    const auto& [last_run, last] = *by_run.rbegin();
    body += fmt::format(
        "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>"
        "<td class=n>{}</td><td class=n>{}</td></tr>\n",
        html_escape(backend), last_run,
        last.checked ? fmt::format("{}/{} ({:.0f}%){}", last.passed, last.checked,
                                   100.0 * last.passed / last.checked,
                                   last.skipped ? fmt::format(", {} skipped", last.skipped) : "")
                     : "–",
        geomean_cell(last), fmt_opt(mean_of(last.compile), "{:.2f}"),
        fmt_opt(std::exp(mean_of(last.log_memory)), "{:.2f}"));
    std::vector<double> t, pass, speed, compile, memory, run_ids;
    for (const auto& [run, s] : by_run) {
      t.push_back(s.t);
      run_ids.push_back(static_cast<double>(run));
      pass.push_back(s.checked ? 100.0 * s.passed / s.checked : std::nan(""));
      speed.push_back(std::exp(mean_of(s.log_speedup)));
      compile.push_back(mean_of(s.compile));
      memory.push_back(std::exp(mean_of(s.log_memory)));
    }
    data += fmt::format(
        "{}\"c{}\": {{\"t\": {}, \"run\": {}, \"pass\": {}, \"speedup\": {}, "
        "\"compile\": {}, \"memory\": {}}}",
        chart ? "," : "", chart, json_array(t), json_array(run_ids), json_array(pass),
        json_array(speed), json_array(compile), json_array(memory));
    // Eager, the baseline, has a pass rate but no speed-up, compile time or memory ratio.
    script += fmt::format(
        "{{const d = DATA.c{0}, el = document.getElementById('charts{0}'),\n"
        "  info = d.run.map(r => 'run ' + r);\n"
        "crChart(el, 'accuracy pass rate', d.t, [{{label: '%', values: d.pass}}], '%', [0, 100], "
        "info);\n{1}}}\n",
        chart,
        backend == "eager"
            ? ""
            : "crChart(el, 'geomean speed-up, accuracy-passing models', d.t, "
              "[{label: 'x', values: d.speedup}], 'x', null, info);\n"
              "crChart(el, 'mean compile time', d.t, [{label: 's', values: d.compile}], 's', "
              "null, info);\n"
              "crChart(el, 'geomean memory ratio (eager / backend)', d.t, "
              "[{label: 'ratio', values: d.memory}], 'ratio', null, info);\n");
    ++chart;
  }
  body += "</table>\n";
  chart = 0;
  for (const auto& [backend, by_run] : d.summary) {
    body += fmt::format("<h2>{} over time</h2>\n<div class=\"charts\" id=\"charts{}\"></div>\n",
                        html_escape(backend), chart++);
  }
  data += "}";
  body +=
      "<h2>Models</h2>\n<table><tr><th>suite</th><th>model</th><th>latest (backend: median, "
      "speed-up)</th></tr>\n";
  for (const auto& [key, by_backend] : d.models) {
    std::string latest;
    for (const auto& [backend, pts] : by_backend) {
      if (pts.empty()) continue;
      const Point& p = pts.back();
      latest +=
          fmt::format("{}{}: <span class=\"{}\">{}</span>{} {} ms{}", latest.empty() ? "" : "; ",
                      html_escape(backend), p.pass() ? "pass" : "fail",
                      html_escape(p.status_text()), marks(p), fmt_opt(p.median_ms, "{:.4g}"),
                      std::isfinite(p.speedup) ? fmt::format(", {:.2f}x", p.speedup) : "");
    }
    body += fmt::format("<tr><td>{}</td><td><a href=\"{}\">{}</a></td><td>{}</td></tr>\n",
                        html_escape(key.first), page_name(key.first, key.second),
                        html_escape(key.second), latest);
  }
  body += "</table>\n";
  return page("crucible: summary", body, data, script);
}

// The model pages' script: kernel tables (older runs' from the model's kernel file) and the
// launcher settings.
constexpr const char* kModelPageJs = R"js(
function crCell(tr, text, cls) { const td = document.createElement('td'); td.textContent = text;
  if (cls) td.className = cls; tr.appendChild(td); }
// Kernel timings of older runs live in the model's kernel file (a script, which a page opened
// from disk may load where it may not fetch), loaded once, when such a run is chosen.
const crKernelData = {};
let crKernelLoad = null;
function crKernelsLoaded(m) { Object.assign(crKernelData, m); }
function crLoadKernels() {
  if (!crKernelLoad) crKernelLoad = new Promise((ok, fail) => {
    const s = document.createElement('script'); s.src = DATA.kernel_file; s.onload = ok;
    s.onerror = fail; document.head.appendChild(s); });
  return crKernelLoad;
}
function crKernels(list, selId, tabId) {
  const sel = document.getElementById(selId), tab = document.getElementById(tabId);
  if (!list.length) { sel.style.display = 'none';
    tab.innerHTML = '<tr><td class="muted">no kernel timings (a performance run records them)</td></tr>'; return; }
  list.forEach((r, k) => { const o = document.createElement('option'); o.value = k;
    o.textContent = 'run ' + r.run + ' (' + r.started + ')'; sel.appendChild(o); });
  const draw = ks => { tab.replaceChildren();
    const h = document.createElement('tr');
    ['kernel', 'calls', 'total ms', 'share %', 'GFLOP/s', 'GB/s', '% of roofline', 'bound by']
      .forEach(x => { const th = document.createElement('th'); th.textContent = x;
        h.appendChild(th); });
    tab.appendChild(h); const total = ks.reduce((a, k) => a + k[2], 0);
    const rate = v => v === null || v === undefined ? '–' : v.toFixed(1);
    ks.forEach(k => { const tr = document.createElement('tr'); crCell(tr, k[0]);
      crCell(tr, k[1], 'n'); crCell(tr, k[2].toFixed(3), 'n');
      crCell(tr, (100 * k[2] / total).toFixed(1), 'n'); crCell(tr, rate(k[3]), 'n');
      crCell(tr, rate(k[4]), 'n'); crCell(tr, rate(k[5]), 'n'); crCell(tr, k[6] || '–');
      tab.appendChild(tr); }); };
  // A link may name the run: model-....html#run=123.
  const want = (location.hash.match(/^#run=(\d+)$/) || [])[1];
  const at = want ? list.findIndex(r => String(r.run) === want) : -1;
  if (at >= 0) sel.value = at;
  const show = () => { const r = list[sel.value];
    if (r.kernels) return draw(r.kernels);
    crLoadKernels().then(() => draw(crKernelData[r.result] || []),
      () => { tab.innerHTML = '<tr><td class="fail">the kernel file is missing</td></tr>'; }); };
  sel.onchange = show; show();
}
{const t = document.getElementById('launcher');
 Object.entries(DATA.launcher).forEach(([k, v]) => { const tr = document.createElement('tr');
   crCell(tr, k); crCell(tr, String(v)); t.appendChild(tr); });}
)js";

// One backend's section of a model page: its charts' data (`data`, "b<i>": ...), its HTML and
// its script; its kernels of older runs go into `kernel_file`.
struct BackendSection {
  std::string data, html, script;
};

// Every profiled result of a backend's points, newest first, chosen in a list: the newest one's
// kernels inline, the others appended to the model's kernel file, loaded when one is chosen.
std::string kernels_json(Store& store, const std::vector<Point>& pts, std::string& kernel_file) {
  std::string kernels = "[";
  for (auto p = pts.rbegin(); p != pts.rend(); ++p) {
    // The rows `crucible kernels` prints, each beside its roofline (null where the backend gave
    // no cost): [kernel, calls, total ms, GFLOP/s, GB/s, % of the roofline, what bounds it].
    const Table ks = store.kernels_table(p->result);
    if (ks.rows.empty()) continue;
    const size_t cols[] = {ks.column("kernel"), ks.column("calls"), ks.column("total_ms"),
                           ks.column("gflops"), ks.column("gbs"),   ks.column("roofline_pct"),
                           ks.column("bound")};
    std::string list;
    for (const std::vector<Cell>& row : ks.rows) {
      std::string fields;
      for (size_t c : cols) fields += (fields.empty() ? "" : ",") + cell_json(row.at(c));
      list += fmt::format("{}[{}]", list.empty() ? "" : ",", fields);
    }
    const bool first = kernels.size() == 1;
    kernels += fmt::format("{}{{\"run\": {}, \"started\": {}, \"result\": {}{}}}", first ? "" : ",",
                           p->run, json_string(p->started), p->result,
                           first ? ", \"kernels\": [" + list + "]" : "");
    kernel_file +=
        fmt::format("{}\"{}\": [{}]", kernel_file.size() > 1 ? "," : "", p->result, list);
  }
  kernels += "]";
  return kernels;
}

BackendSection backend_section(Store& store, const std::pair<std::string, std::string>& key,
                               const std::string& backend, const std::vector<Point>& pts, int i,
                               const AlertMarks& marked, std::string& kernel_file) {
  std::vector<double> t, med, speed;
  std::string info = "[";
  for (const Point& p : pts) {
    t.push_back(p.t);
    med.push_back(p.median_ms);
    speed.push_back(p.speedup);
    info +=
        fmt::format("{}{}", info.size() > 1 ? "," : "",
                    json_string(fmt::format(
                        "run {} · {} · commit {} · {} · cv {} %{}{}", p.run,
                        p.started.substr(0, 10), p.commit.empty() ? "–" : p.commit.substr(0, 12),
                        p.status_text(), fmt_opt(100 * p.cv, "{:.1f}"), p.noisy ? " · noisy" : "",
                        p.unaudited ? " · unaudited" : "")));
  }
  info += "]";
  const std::string kernels = kernels_json(store, pts, kernel_file);
  // The detector's alerts on this series and the machine-wide events, at their runs' times.
  std::string mark_json = "[", said;
  std::vector<Mark> here = marked.machine;
  if (const auto m = marked.series.find({key.first, key.second, backend});
      m != marked.series.end()) {
    here.insert(here.end(), m->second.begin(), m->second.end());
  }
  for (const Mark& m : here) {
    const auto at =
        std::find_if(pts.begin(), pts.end(), [&](const Point& p) { return p.run == m.run; });
    if (at == pts.end()) continue;
    mark_json +=
        fmt::format("{}{{\"t\": {}, \"k\": {}, \"l\": {}}}", mark_json.size() > 1 ? "," : "",
                    json_number(at->t), json_string(m.kind), json_string(m.label));
    said += fmt::format("{}{} at run {}", said.empty() ? "" : "; ", m.label, m.run);
  }
  mark_json += "]";
  BackendSection out;
  out.data = fmt::format(
      "\"b{}\": {{\"t\": {}, \"median\": {}, \"speedup\": {}, \"info\": {}, \"kernels\": "
      "{}, \"marks\": {}}}",
      i, json_array(t), json_array(med), json_array(speed), info, kernels, mark_json);
  out.html = fmt::format(
      "<h2>{}</h2>\n{}<div class=\"charts\" id=\"charts{}\"></div>\n", html_escape(backend),
      said.empty() ? ""
                   : "<p class=\"alerts\">Marked on the charts: " + html_escape(said) + "</p>\n",
      i);
  out.html +=
      "<h3>Recent runs</h3>\n<table><tr><th>run</th><th>started</th><th>commit</th>"
      "<th>status</th><th>median ms</th><th>cv %</th><th>speed-up</th><th>GFLOP/s</th>"
      "<th>of roofline</th><th>noisy</th><th>audit</th></tr>\n";
  for (size_t k = pts.size() > 15 ? pts.size() - 15 : 0; k < pts.size(); ++k) {
    const Point& p = pts[k];
    out.html += fmt::format(
        "<tr><td class=n>{}</td><td>{}</td><td><code>{}</code></td><td class=\"{}\">{}</td>"
        "<td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td "
        "class=n>{}</td><td>{}</td><td>{}</td></tr>\n",
        p.run, html_escape(p.started), html_escape(p.commit.substr(0, 12)),
        p.pass() ? "pass" : "fail", html_escape(p.status_text()), fmt_opt(p.median_ms, "{:.4g}"),
        fmt_opt(100 * p.cv, "{:.1f}"), fmt_opt(p.speedup, "{:.3f}"),
        p.pass() ? fmt_opt(p.gflops, "{:.1f}") : "–",
        p.pass() ? fmt_opt(100 * p.roofline_fraction, "{:.0f}%") : "–", p.noisy ? "noisy" : "",
        audit_cell(p));
  }
  out.html += fmt::format(
      "</table>\n<h3>Kernels</h3>\n<select id=\"ksel{0}\"></select>\n"
      "<table id=\"ktab{0}\"></table>\n",
      i);
  out.script = fmt::format(
      "{{const d = DATA.b{0}, el = document.getElementById('charts{0}');\n"
      "crChart(el, 'median latency', d.t, [{{label: 'ms', values: d.median}}], 'ms', null, "
      "d.info, d.marks);\n"
      "{1}crKernels(d.kernels, 'ksel{0}', 'ktab{0}');}}\n",
      i,
      // Eager is the denominator: its speed-up over itself is no chart.
      backend == "eager" ? ""
                         : "crChart(el, 'speed-up over eager', d.t, [{label: 'x', values: "
                           "d.speedup}], 'x', null, "
                           "d.info, d.marks);\n");
  return out;
}

// A model page and its kernel file.
void write_model_page(Store& store, const fs::path& dir,
                      const std::pair<std::string, std::string>& key,
                      const std::map<std::string, std::vector<Point>>& by_backend,
                      const AlertMarks& marked, const std::string& launcher, HtmlReportStats& st) {
  std::string b = fmt::format("<p>suite <b>{}</b></p>\n", html_escape(key.first)), d = "{", s,
              kernel_file = "{";
  const std::string page_file = page_name(key.first, key.second);
  const std::string kernels_js = page_file.substr(0, page_file.size() - 5) + ".kernels.js";
  int i = 0;
  for (const auto& [backend, pts] : by_backend) {
    const BackendSection sec = backend_section(store, key, backend, pts, i, marked, kernel_file);
    d += (i ? "," : "") + sec.data;
    b += sec.html;
    s += sec.script;
    ++i;
  }
  d += fmt::format("{}\"launcher\": {}, \"kernel_file\": {}", i ? "," : "",
                   launcher.empty() ? "{}" : launcher, json_string(kernels_js));
  write_asset(dir / kernels_js, "crKernelsLoaded(" + script_safe(kernel_file) + "});\n", st);
  b += "<h2>Launcher settings (newest run)</h2>\n<table id=\"launcher\"></table>\n";
  write_file(dir / page_file,
             page(key.second + " (" + key.first + ")", b, d + "}", kModelPageJs + s), st);
}

}  // namespace

HtmlReportStats write_html_report(Store& store, const HtmlReportOptions& opts) {
  HtmlReportStats st;
  // Read before any file is made: a bad store leaves none.
  const Dashboard d = gather(read_points(store.report_rows(opts.since), "the store"));
  fs::create_directories(opts.dir);
  st.runs = static_cast<int>(d.runs.size());
  st.models = static_cast<int>(d.models.size());
  // The detector's verdicts over the whole history: the regressions page, the index's banner for
  // the newest run, and the marks on each model's charts.
  RegressionQuery everything;
  everything.all = true;
  const Table alerts = store.regressions(everything);
  const int64_t newest = d.runs.empty() ? 0 : *d.runs.rbegin();
  const AlertMarks marked = mark_alerts(alerts, newest);
  write_file(opts.dir / "index.html", index_page(d, marked, newest), st);
  const std::string launcher = store.latest_launcher_json();
  for (const auto& [key, by_backend] : d.models) {
    write_model_page(store, opts.dir, key, by_backend, marked, launcher, st);
  }
  write_file(opts.dir / "regressions.html",
             page("crucible: regressions", regressions_body(store, opts, alerts), "{}", ""), st);
  return st;
}

}  // namespace crucible::reports
