// The store's read side for the history commands: a read-only connection, one-statement SQL
// queries that are refused when they would write, and the runs, history and kernels tables.
#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <ctime>
#include <regex>

#include "crucible/core/quote.h"
#include "crucible/reports/error_summary.h"
#include "crucible/reports/store.h"
#include "sqlite_db.h"

namespace crucible::reports {

namespace {

std::string utc_text(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

Cell column_cell(sqlite3_stmt* s, int col) {
  switch (sqlite3_column_type(s, col)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_column_int64(s, col));
    case SQLITE_FLOAT:
      return sqlite3_column_double(s, col);
    case SQLITE_TEXT:
      return std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, col)),
                         static_cast<size_t>(sqlite3_column_bytes(s, col)));
    case SQLITE_BLOB:
      return fmt::format("<blob {} bytes>", sqlite3_column_bytes(s, col));
    default:
      return std::monostate{};
  }
}

// Runs `sql` (already checked) with `binds` as text or integer parameters, into a table.
Table select(sqlite3* db, const std::string& sql, const std::vector<Cell>& binds = {}) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
    throw_sqlite(db, "query");
  }
  struct Finalize {
    sqlite3_stmt* s;
    ~Finalize() { sqlite3_finalize(s); }
  } fin{s};
  for (size_t i = 0; i < binds.size(); ++i) {
    const int at = static_cast<int>(i) + 1;
    if (std::holds_alternative<int64_t>(binds[i])) {
      sqlite3_bind_int64(s, at, std::get<int64_t>(binds[i]));
    } else if (std::holds_alternative<std::string>(binds[i])) {
      const std::string& v = std::get<std::string>(binds[i]);
      sqlite3_bind_text(s, at, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
  }
  Table t;
  for (int c = 0; c < sqlite3_column_count(s); ++c) t.columns.push_back(sqlite3_column_name(s, c));
  for (int rc; (rc = sqlite3_step(s)) != SQLITE_DONE;) {
    if (rc != SQLITE_ROW) throw_sqlite(db, "query");
    std::vector<Cell> row;
    for (int c = 0; c < sqlite3_column_count(s); ++c) row.push_back(column_cell(s, c));
    t.rows.push_back(std::move(row));
  }
  return t;
}

// Denies what stmt_readonly lets through but a query has no business doing: ATTACH/DETACH
// (they change the connection, and could open another file).
int deny_attach(void*, int action, const char*, const char*, const char*, const char*) {
  return action == SQLITE_ATTACH || action == SQLITE_DETACH ? SQLITE_DENY : SQLITE_OK;
}

}  // namespace

std::string since_utc(const std::string& spec) {
  static const std::regex relative(R"((\d{1,5})([hdw]))");
  static const std::regex absolute(R"(\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?)");
  std::smatch m;
  if (std::regex_match(spec, m, relative)) {
    const int n = std::stoi(m[1]);
    const int hours = m[2] == "h" ? n : m[2] == "d" ? 24 * n : 24 * 7 * n;
    return utc_text(std::chrono::system_clock::now() - std::chrono::hours(hours));
  }
  if (std::regex_match(spec, absolute)) return spec;
  throw Error(fmt::format(
      "--since '{}': want a span before now (30d, 12h, 2w) or a UTC date (2026-10-01[T06:00])",
      escape_controls(spec)));
}

std::unique_ptr<Store> Store::open_readonly(const std::filesystem::path& path) {
  if (std::filesystem::is_directory(path)) {
    throw StoreError(fmt::format("{}: a directory, not a database file", path.string()));
  }
  if (!std::filesystem::is_regular_file(path)) {
    throw StoreError(fmt::format("{}: no such database", path.string()));
  }
  sqlite3* db = open_connection(path, SQLITE_OPEN_READONLY);
  std::unique_ptr<Store> store(new Store(db, path));
  int version = 0;
  try {
    exec(db, "PRAGMA query_only=1");
    version = store->schema_version();
  } catch (const StoreError& e) {
    throw StoreError(fmt::format("{}: not a crucible database ({})", path.string(), e.what()));
  }
  if (version == 0) {
    throw StoreError(fmt::format("{}: not a crucible database (no schema version)", path.string()));
  }
  if (version > kSchemaVersion) {
    throw StoreError(fmt::format("{}: database schema version {} is newer than this crucible's {}",
                                 path.string(), version, kSchemaVersion));
  }
  if (version < kSchemaVersion) {
    throw StoreError(
        fmt::format("{}: database schema version {} is older than this crucible's {}; "
                    "`crucible db migrate {}` upgrades it",
                    path.string(), version, kSchemaVersion, path.string()));
  }
  return store;
}

Table Store::query(const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  const char* tail = nullptr;
  sqlite3_set_authorizer(db_, deny_attach, nullptr);
  const int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, &tail);
  sqlite3_set_authorizer(db_, nullptr, nullptr);
  if (rc == SQLITE_AUTH) throw StoreError("query: refused, ATTACH and DETACH are not queries");
  if (rc != SQLITE_OK) throw StoreError(fmt::format("query: {}", sqlite3_errmsg(db_)));
  const bool reads = s == nullptr || sqlite3_stmt_readonly(s) != 0;
  sqlite3_finalize(s);
  if (s == nullptr) throw StoreError("query: the SQL holds no statement");
  if (tail != nullptr && std::string_view(tail).find_first_not_of(" \t\r\n;") != std::string::npos)
    throw StoreError("query: one statement only");
  if (!reads) throw StoreError("query: refused, the statement would write (queries only read)");
  return select(db_, sql);
}

Table Store::runs_table(int limit) {
  // "failed" counts what fails a run (is_success), not skipped or expected failures.
  return select(db_,
                fmt::format("SELECT r.id AS run, r.started_at, r.status, r.tag, r.suites,"
                            " r.backends, r.mode, r.hostname, r.cores,"
                            " coalesce(r.git_commit, '') AS git_commit, r.seed,"
                            " (SELECT count(*) FROM results x WHERE x.run_id = r.id) AS results,"
                            " (SELECT count(*) FROM results x WHERE x.run_id = r.id AND"
                            " x.status NOT IN ({})) AS failed FROM runs r ORDER BY r.id DESC"
                            " LIMIT ?",
                            sql_success_names()),
                {static_cast<int64_t>(limit)});
}

Table Store::history(const HistoryQuery& q) {
  std::string mode = "performance", value;
  if (q.metric == "speedup") {
    value = "x.speedup AS speedup, x.median_ms, 100 * x.cv AS cv_pct";
  } else if (q.metric == "latency") {
    value =
        "x.median_ms, x.p10_ms, x.p90_ms, 100 * x.cv AS cv_pct,"
        " x.instructions_median AS instructions";
  } else if (q.metric == "compile") {
    value = "x.compile_s, x.compile_warm_s";
  } else if (q.metric == "memory") {
    value = "x.peak_rss_mb, x.memory_ratio";
  } else if (q.metric == "accuracy") {
    mode = "accuracy";
    value =
        "(SELECT max(a.max_abs_err) FROM accuracy a WHERE a.result_id = x.id) AS max_abs_err,"
        " x.pass_suspicious";
  } else {
    throw StoreError(
        fmt::format("--metric must be speedup, latency, compile, memory or accuracy, got '{}'",
                    escape_controls(q.metric)));
  }
  const std::string sql = fmt::format(
      "SELECT r.id AS run, r.started_at, coalesce(r.git_commit, '') AS git_commit, x.suite,"
      " x.status, {}, x.noisy, x.backend_version, x.id AS result FROM results x"
      " JOIN runs r ON r.id = x.run_id WHERE x.model = ?1 AND x.backend = ?2 AND x.mode = ?3"
      " AND (?4 = '' OR x.suite = ?4) AND r.started_at >= ?5 ORDER BY r.started_at, r.id",
      value);
  Table t = select(db_, sql, {q.model, q.backend, mode, q.suite, q.since});
  if (t.rows.empty()) {
    const Table any = select(db_,
                             "SELECT count(*) FROM results WHERE model = ?1 AND backend = ?2 AND"
                             " (?3 = '' OR suite = ?3)",
                             {q.model, q.backend, q.suite});
    if (std::get<int64_t>(any.rows.at(0).at(0)) == 0) {
      throw StoreError(fmt::format("{}: no result for model '{}' on backend '{}'", path_.string(),
                                   escape_controls(q.model), escape_controls(q.backend)));
    }
  }
  return t;
}

Table Store::results_table(int64_t run_id, bool failed_only) {
  run(run_id);  // an unknown run is an error, not an empty table
  Table t = select(
      db_,
      "SELECT x.id AS result, x.suite || '/' || x.model AS model, x.backend, x.mode, x.status,"
      " trim(CASE WHEN x.noisy THEN 'noisy ' ELSE '' END ||"
      " CASE WHEN x.pass_suspicious THEN 'suspicious' ELSE '' END) AS flags,"
      " x.median_ms, 100 * x.cv AS cv_pct, x.speedup, x.compile_s, x.peak_rss_mb,"
      " (SELECT max(a.max_abs_err) FROM accuracy a WHERE a.result_id = x.id) AS max_abs_err,"
      " x.error FROM results x WHERE x.run_id = ?1 AND (?2 = 0 OR x.status != 'pass')"
      " ORDER BY x.id",
      {run_id, static_cast<int64_t>(failed_only)});
  // The console shows each error's one-line summary; CSV and JSON carry the error whole.
  t.columns.push_back("reason");
  const size_t error = t.column("error");
  for (auto& row : t.rows) {
    const auto* text = std::get_if<std::string>(&row[error]);
    // Built in place: a Cell temporary here tripped GCC 12's -Wmaybe-uninitialized on
    // std::variant (a false positive) once the unity batch inlined more around it.
    row.emplace_back(std::in_place_type<std::string>,
                     error_summary(text ? *text : "", kConsoleWidth - 10));
  }
  t.brief = {"result", "model",     "backend", "mode",       "status",
             "flags",  "median_ms", "speedup", "max_abs_err"};
  t.under = {"reason"};
  if (failed_only && t.rows.empty()) {
    const Table all = select(db_, "SELECT count(*) FROM results WHERE run_id = ?", {run_id});
    const std::string n = cell_text(all.rows.at(0).at(0), true);
    t.empty_note = n == "0" ? fmt::format("run {} has no results", run_id)
                            : fmt::format("run {}: none of its {} results failed", run_id, n);
  }
  return t;
}

Table Store::kernels_table(int64_t result_id) {
  const Table found = select(db_, "SELECT count(*) FROM results WHERE id = ?", {result_id});
  if (std::get<int64_t>(found.rows.at(0).at(0)) == 0) {
    throw StoreError(fmt::format("{}: no result with id {}", path_.string(), result_id));
  }
  // Each kernel beside its roofline, with the ceilings the run's timing workers measured (a
  // profile result is not timed by them): FLOPs and bytes per nanosecond are GFLOP/s and GB/s. A
  // kernel's bytes per call are held to the bandwidth of the smallest cache level that holds them
  // for the threads together (L1, L2, L3), else DRAM's, or of a larger level when that one read
  // faster; `bound` names that level when its bytes bound it rather than its FLOPs (the rule of
  // memory_ceiling() in the roofline report, in SQL).
  return select(db_,
                "WITH peaks AS (SELECT max(p.peak_gflops) AS flops_peak, max(p.triad_gbs) AS"
                " dram, max(p.l1_gbs) AS l1, max(p.l1_bytes) AS l1_bytes, max(p.l2_gbs) AS l2,"
                " max(p.l2_bytes) AS l2_bytes, max(p.l3_gbs) AS l3, max(p.l3_bytes) AS l3_bytes"
                " FROM results p WHERE p.run_id = (SELECT run_id FROM results WHERE id = ?1)),"
                " per_call AS (SELECT k.*, peaks.*, k.bytes / max(k.calls, 1) AS call_bytes"
                " FROM kernels k, peaks WHERE k.result_id = ?1),"
                " ks AS (SELECT per_call.*, CASE"
                " WHEN l1 > 0 AND call_bytes <= l1_bytes THEN 'L1'"
                " WHEN l2 > 0 AND call_bytes <= l2_bytes THEN 'L2'"
                " WHEN l3 > 0 AND call_bytes <= l3_bytes THEN 'L3' ELSE 'DRAM' END AS level"
                " FROM per_call),"
                " kl AS (SELECT ks.*, max(coalesce(dram, 0), CASE level"
                " WHEN 'L1' THEN max(l1, coalesce(l2, 0), coalesce(l3, 0))"
                " WHEN 'L2' THEN max(l2, coalesce(l3, 0)) WHEN 'L3' THEN l3 ELSE 0 END)"
                " AS bandwidth FROM ks)"
                " SELECT k.name AS kernel, k.calls, k.total_ns / 1e6 AS total_ms,"
                " k.total_ns / 1e3 / max(k.calls, 1) AS per_call_us,"
                " 100.0 * k.total_ns / (SELECT sum(total_ns) FROM kernels WHERE result_id = ?1)"
                " AS share_pct, k.instructions AS sim_instructions_per_call,"
                " k.flops / nullif(k.total_ns, 0) AS gflops,"
                " k.bytes / nullif(k.total_ns, 0) AS gbs,"
                " 100.0 * max(k.flops / nullif(k.flops_peak, 0),"
                " k.bytes / nullif(k.bandwidth, 0)) / nullif(k.total_ns, 0) AS roofline_pct,"
                " CASE WHEN k.flops IS NULL THEN NULL"
                " WHEN k.bytes / k.bandwidth > k.flops / k.flops_peak THEN k.level"
                " ELSE 'compute' END AS bound"
                " FROM kl k ORDER BY k.total_ns DESC",
                {result_id});
}

std::optional<int64_t> Store::latest_profiled_result(const std::string& model,
                                                     const std::string& backend) {
  const Table t = select(db_,
                         "SELECT x.id FROM results x WHERE (x.model = ?1 OR"
                         " x.suite || '/' || x.model = ?1) AND x.backend = ?2 AND"
                         " EXISTS (SELECT 1 FROM kernels k WHERE k.result_id = x.id)"
                         " ORDER BY x.run_id DESC, x.id DESC LIMIT 1",
                         {model, backend});
  if (t.rows.empty()) return std::nullopt;
  return std::get<int64_t>(t.rows[0][0]);
}

std::vector<Status> Store::status_history(const std::string& suite, const std::string& model,
                                          const std::string& backend, const std::string& mode,
                                          int64_t run_id, int limit) {
  const Table t = select(db_,
                         "SELECT status FROM (SELECT x.status, x.run_id FROM results x WHERE"
                         " x.suite = ?1 AND x.model = ?2 AND x.backend = ?3 AND x.mode = ?4 AND"
                         " x.run_id <= ?5 ORDER BY x.run_id DESC LIMIT ?6) ORDER BY run_id",
                         {suite, model, backend, mode, run_id, static_cast<int64_t>(limit)});
  std::vector<Status> out;
  for (const auto& row : t.rows)
    out.push_back(stored_status(cell_text(row[0], false), path_.string()));
  return out;
}

Table Store::report_rows(const std::string& since) {
  return select(db_,
                "SELECT r.id AS run, r.started_at, coalesce(r.git_commit, '') AS git_commit,"
                " x.suite, x.model, x.backend, x.mode, x.status, x.median_ms, x.cv, x.speedup,"
                " x.compile_s, x.memory_ratio, x.noisy, x.id AS result,"
                " x.mode = 'performance' AND x.audit = ?2 AS unaudited, x.audit_share,"
                " x.audit_coverage, x.roofline_fraction, x.flops / x.median_ms / 1e6 AS gflops"
                " FROM results x"
                " JOIN runs r ON r.id = x.run_id WHERE r.started_at >= ?1"
                " ORDER BY r.started_at, r.id, x.id",
                {since, std::string(kAuditOff)});
}

std::string Store::latest_launcher_json() {
  const Table t = select(db_, "SELECT launcher_json FROM runs ORDER BY id DESC LIMIT 1");
  return t.rows.empty() ? "{}" : cell_text(t.rows[0][0], false);
}

}  // namespace crucible::reports
