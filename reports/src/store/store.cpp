// The SQLite store: opening and migrating, writing runs and results (one transaction per result),
// and the read queries the CLI's reports use.
#include "crucible/reports/store.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <limits>

#include "crucible/reports/json.h"
#include "schema.h"
#include "sqlite_db.h"

namespace crucible::reports {

namespace {

std::string now_utc() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, ms);
}

std::string this_host() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::optional<double> finite(double v) {
  if (std::isfinite(v)) return v;
  return std::nullopt;
}

}  // namespace

std::string sqlite_version() { return sqlite3_libversion(); }

Store::Store(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}

Store::~Store() { sqlite3_close_v2(db_); }

namespace {
// Why SQLite could not open `path`, in the user's terms where the file system tells: SQLite says
// only "unable to open database file" for a missing folder, a directory and a denied one alike.
std::string open_failure(const std::filesystem::path& path, const std::string& sqlite_says) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return "no file named (--db '')";
  if (fs::is_directory(path, ec)) return "it is a directory, not a database file";
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::exists(folder, ec)) return fmt::format("the folder {} does not exist", folder.string());
  if (!fs::is_directory(folder, ec)) return fmt::format("{} is not a folder", folder.string());
  if (!fs::exists(path, ec) && ::access(folder.c_str(), W_OK) != 0)
    return fmt::format("the folder {} is not writable", folder.string());
  if (fs::exists(path, ec) && ::access(path.c_str(), R_OK) != 0) return "the file is not readable";
  return sqlite_says;
}
}  // namespace

sqlite3* Store::open_connection(const std::filesystem::path& path, int flags) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    throw StoreError(
        fmt::format("{}: cannot open database: {}", path.string(), open_failure(path, msg)));
  }
  sqlite3_busy_timeout(db, 10000);
  return db;
}

bool is_network_filesystem(int64_t fs_type) {
  // statfs(2) f_type values (linux/magic.h and the file systems' own headers) of file systems
  // whose files other machines share: SQLite's WAL index is shared memory of one host, and their
  // byte-range locks are at best advisory across nodes. FUSE is counted with them: sshfs, s3fs and
  // gcsfuse are FUSE, and a local FUSE file system loses only WAL's concurrent readers.
  switch (static_cast<uint32_t>(fs_type)) {
    case 0x6969u:      // NFS
    case 0x517Bu:      // SMB (smbfs)
    case 0xFF534D42u:  // CIFS
    case 0xFE534D42u:  // SMB2 (cifs.ko)
    case 0x65735546u:  // FUSE
    case 0x0BD00BD0u:  // Lustre
    case 0x47504653u:  // GPFS / IBM Storage Scale
    case 0x00C36400u:  // CephFS
    case 0x01021997u:  // 9p (v9fs)
    case 0x5346414Fu:  // OpenAFS
    case 0x6B414653u:  // kAFS
    case 0x73757245u:  // Coda
    case 0x7461636Fu:  // OCFS2
    case 0x01161970u:  // GFS2
    case 0x19830326u:  // BeeGFS
    case 0xAAD7AAEAu:  // PanFS
    case 0x20030528u:  // OrangeFS / PVFS2
    case 0x564Cu:      // NCP
      return true;
    default:
      return false;
  }
}

std::string journal_mode_for(int64_t fs_type, const std::string& override_mode) {
  if (!override_mode.empty() && override_mode != "auto") {
    for (const char* m : {"wal", "delete", "truncate", "persist"}) {
      if (override_mode == m) return override_mode;
    }
    throw StoreError(fmt::format(
        "CRUCIBLE_JOURNAL_MODE={}: not a journal mode crucible uses (auto, wal, delete, truncate "
        "or persist)",
        override_mode));
  }
  return is_network_filesystem(fs_type) ? "delete" : "wal";
}

std::string journal_mode_for_path(const std::filesystem::path& path) {
  const char* env = std::getenv("CRUCIBLE_JOURNAL_MODE");
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  struct statfs fs {};
  // A directory statfs cannot see makes the open fail with its own message; assume local here.
  const int64_t type = ::statfs(dir.c_str(), &fs) == 0 ? static_cast<int64_t>(fs.f_type) : 0;
  return journal_mode_for(type, env ? env : "");
}

namespace {

// PRAGMA journal_mode, retried while another connection holds the lock it needs. On a new file
// opened by several processes at once, switching it to WAL can fail at once with SQLITE_BUSY
// without calling the busy handler (1 of 6 processes released together did, in most rounds).
// Waits as long as the busy timeout would.
void set_journal_mode(sqlite3* db, const std::string& mode) {
  const std::string sql = "PRAGMA journal_mode=" + mode;
  for (int waited_ms = 0;; waited_ms += 10) {
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xFF) != SQLITE_BUSY || waited_ms >= 10000) throw_sqlite(db, sql);
    ::usleep(10000);
  }
}

}  // namespace

std::unique_ptr<Store> Store::open(const std::filesystem::path& path) {
  const std::string journal = journal_mode_for_path(path);
  sqlite3* db = open_connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  std::unique_ptr<Store> store(new Store(db, path));
  try {
    // WAL keeps readers (dashboards) working while a run writes, but needs every process on one
    // host: on a network file system the store keeps a rollback journal (journal_mode_for, and
    // docs/scale_out.md). synchronous=FULL makes each committed result durable against power
    // loss, not only against a killed process.
    set_journal_mode(db, journal);
    exec(db, "PRAGMA synchronous=FULL");
    exec(db, "PRAGMA foreign_keys=ON");
    store->migrate();
    store->mark_abandoned_runs();
  } catch (const StoreError& e) {
    std::string msg = e.what();
    if (msg.find("file is not a database") != std::string::npos) {
      throw StoreError(
          fmt::format("{}: not a crucible database (file is not SQLite)", path.string()));
    }
    throw;
  }
  return store;
}

int Store::schema_version() {
  Statement has(db_,
                "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'");
  has.step();
  if (has.int64(0) == 0) return 0;
  Statement v(db_, "SELECT version FROM schema_version");
  if (!v.step()) return 0;
  // A damaged or hand-edited store must not index the migration steps out of range.
  const int64_t version = v.int64(0);
  if (version < 0 || version > std::numeric_limits<int>::max()) {
    throw StoreError(fmt::format("{}: database schema version {} is not a version (damaged store?)",
                                 path_.string(), version));
  }
  return static_cast<int>(version);
}

std::string Store::journal_mode() {
  Statement q(db_, "PRAGMA journal_mode");
  return q.step() ? q.text(0) : "";
}

void Store::migrate() {
  const auto& steps = migrations();
  const int latest = static_cast<int>(steps.size());
  auto check_not_newer = [&](int version) {
    if (version > latest) {
      throw StoreError(
          fmt::format("{}: database schema version {} is newer than this crucible's {}",
                      path_.string(), version, latest));
    }
  };
  int version = schema_version();  // the common case, up to date, takes no write lock
  check_not_newer(version);
  // Several processes may open a new (or old) store at the same moment: shards of one job, runs
  // started together. Each step reads the version again inside its write transaction (BEGIN
  // IMMEDIATE waits for the lock under the busy timeout), so a step another process applied while
  // this one waited is seen, never applied twice ("table runs already exists").
  while (version < latest) {
    Transaction tx(db_);
    version = schema_version();
    check_not_newer(version);
    if (version == latest) break;
    exec(db_, steps[version]);
    exec(db_, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
    exec(db_, "DELETE FROM schema_version");
    Statement(db_, "INSERT INTO schema_version (version) VALUES (?)")
        .bind(1, int64_t{version + 1})
        .run();
    tx.commit();
    ++version;
  }
}

void Store::mark_abandoned_runs() {
  Statement q(db_, "SELECT id, pid FROM runs WHERE status = 'running' AND hostname = ?");
  q.bind(1, this_host());
  std::vector<int64_t> dead;
  while (q.step()) {
    const auto pid = static_cast<pid_t>(q.int64(1));
    if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) dead.push_back(q.int64(0));
  }
  for (int64_t id : dead) {
    Statement(db_, "UPDATE runs SET status = 'incomplete' WHERE id = ?").bind(1, id).run();
  }
}

int64_t Store::begin_run(const RunInfo& run) {
  const RunEnvironment& e = run.env;
  Transaction tx(db_);
  Statement s(db_,
              "INSERT INTO runs (started_at, status, tag, suites, backends, mode, hostname, pid, "
              "os, cpu_model, cores,"
              " isa_flags, compiler, libraries, git_commit, threads, canary_ms, command, "
              "launcher_json, env_json, seed, uuid)"
              " VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
              " lower(hex(randomblob(16))))");
  std::map<std::string, std::string> env_map = {{"hostname", e.hostname},
                                                {"os", e.os},
                                                {"cpu_model", e.cpu_model},
                                                {"cores", std::to_string(e.cores)},
                                                {"isa_flags", e.isa_flags},
                                                {"compiler", e.compiler},
                                                {"libraries", e.libraries},
                                                {"git_commit", e.git_commit},
                                                {"threads", std::to_string(e.threads)},
                                                {"canary_ms", fmt::format("{}", e.canary_ms)}};
  for (const auto& [k, v] : e.launcher) env_map["launcher." + k] = v;
  s.bind(1, now_utc())
      .bind(2, run.tag)
      .bind(3, run.suites)
      .bind(4, run.backends)
      .bind(5, run.mode)
      .bind(6, e.hostname.empty() ? this_host() : e.hostname)
      .bind(7, static_cast<int64_t>(::getpid()))
      .bind(8, e.os)
      .bind(9, e.cpu_model)
      .bind(10, static_cast<int64_t>(e.cores))
      .bind(11, e.isa_flags)
      .bind(12, e.compiler)
      .bind(13, e.libraries)
      .bind(14, e.git_commit)
      .bind(15, static_cast<int64_t>(e.threads))
      .bind(16, e.canary_ms)
      .bind(17, e.command)
      .bind(18, json_object(e.launcher))
      .bind(19, json_object(env_map))
      .bind(20, static_cast<int64_t>(e.seed));  // the seed's bits; SQLite integers are signed
  s.run();
  int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

int64_t Store::add_result(int64_t run_id, const ResultRecord& r) {
  Transaction tx(db_);
  const int64_t id = insert_result(run_id, r);
  tx.commit();
  return id;
}

void Store::add_results(int64_t run_id, const std::vector<ResultRecord>& results) {
  Transaction tx(db_);
  for (const ResultRecord& r : results) insert_result(run_id, r);
  tx.commit();
}

namespace {

// A result's per-output accuracy rows, under its id.
void insert_accuracy(sqlite3* db, int64_t id, const std::vector<OutputAccuracy>& accuracy) {
  Statement acc(db,
                "INSERT INTO accuracy (result_id, output_index, dtype, shape, max_abs_err, "
                "max_rel_err, mismatches,"
                " first_mismatch, rmse_vs_fp64, rmse_eager_vs_fp64, cosine, passed)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const OutputAccuracy& a : accuracy) {
    acc.bind(1, id)
        .bind(2, static_cast<int64_t>(a.index))
        .bind(3, a.dtype)
        .bind(4, a.shape)
        .bind(5, finite(a.max_abs_err))
        .bind(6, finite(a.max_rel_err))
        .bind(7, a.mismatches)
        .bind(8, a.first_mismatch)
        .bind(9, finite(a.rmse_vs_fp64))
        .bind(10, finite(a.rmse_eager_vs_fp64))
        .bind(11, finite(a.cosine))
        .bind(12, static_cast<int64_t>(a.passed));
    acc.run();
    acc.reset();
  }
}

// A result's per-kernel rows, under its id.
void insert_kernels(sqlite3* db, int64_t id, const std::vector<KernelTiming>& kernels) {
  Statement k(db,
              "INSERT INTO kernels (result_id, name, calls, total_ns, instructions, flops, bytes)"
              " VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (const KernelTiming& kt : kernels) {
    k.bind(1, id)
        .bind(2, kt.name)
        .bind(3, kt.calls)
        .bind(4, kt.total_ns)
        .bind(5, kt.instructions)
        .bind(6, kt.flops)
        .bind(7, kt.bytes);
    k.run();
    k.reset();
  }
}

}  // namespace

// One bind per column of the results row, in the INSERT's order: split, a column would sit away
// from the value bound to it.
int64_t Store::insert_result(int64_t run_id, const ResultRecord& r) {
  const SampleStats st = summarize(r.samples_ms);
  Statement s(db_,
              "INSERT INTO results (run_id, suite, model, backend, mode, batch_size, status, "
              "error, n_samples, median_ms,"
              " mean_ms, stdev_ms, min_ms, max_ms, samples, speedup, compile_s, compile_warm_s, "
              "peak_rss_mb,"
              " memory_ratio, created_at, p10_ms, p90_ms, cv, calls_per_sample, timer_overhead_ns,"
              " audit, instructions, cycles, page_faults, instructions_median, instructions_cv,"
              " counters_unavailable, noisy, noise_reason, contention_json, attempts,"
              " pass_suspicious, backend_version, audit_share, audit_coverage, disturbed_by,"
              " sim_instructions, sim_d1_misses, sim_ll_misses, sim_instructions_median, cpu_ms,"
              " flops, min_bytes, peak_gflops, triad_gbs, roofline_fraction, l1_gbs, l1_bytes,"
              " l2_gbs, l2_bytes, l3_gbs, l3_bytes)"
              " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
              " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
              " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, run_id)
      .bind(2, r.suite)
      .bind(3, r.model)
      .bind(4, r.backend)
      .bind(5, r.mode)
      .bind(6, r.batch_size)
      .bind(7, std::string(status_name(r.status)))
      .bind(8, r.error)
      .bind(9, st.n)
      .bind(10, finite(st.median))
      .bind(11, finite(st.mean))
      .bind(12, finite(st.stdev))
      .bind(13, finite(st.min))
      .bind(14, finite(st.max));
  // Raw samples and counters as packed little-endian f64: compact, and exact for later statistics.
  auto bind_doubles = [&](int index, const std::vector<double>& v) {
    if (v.empty()) {
      s.bind_null(index);
    } else {
      s.bind_blob(index, v.data(), v.size() * sizeof(double));
    }
  };
  bind_doubles(15, r.samples_ms);
  s.bind(16, r.speedup)
      .bind(17, r.compile_s)
      .bind(18, r.compile_warm_s)
      .bind(19, r.peak_rss_mb)
      .bind(20, r.memory_ratio)
      .bind(21, now_utc())
      .bind(22, finite(st.p10))
      .bind(23, finite(st.p90))
      .bind(24, finite(st.cv))
      .bind(25, r.calls_per_sample > 0 ? std::optional<double>(r.calls_per_sample) : std::nullopt)
      .bind(26, r.timer_overhead_ns > 0 ? std::optional<double>(r.timer_overhead_ns) : std::nullopt)
      .bind(27, r.audit);
  bind_doubles(28, r.instructions);
  bind_doubles(29, r.cycles);
  bind_doubles(30, r.page_faults);
  const SampleStats ins = summarize(r.instructions);
  s.bind(31, finite(ins.median))
      .bind(32, finite(ins.cv))
      .bind(33, r.counters_unavailable)
      .bind(34, static_cast<int64_t>(r.noisy))
      .bind(35, r.noise_reason);
  if (r.contention) {
    const Contention& c = *r.contention;
    s.bind(36, json_numbers({{"run_delay", c.run_delay},
                             {"other_cpu", c.other_cpu},
                             {"steal", c.steal},
                             {"involuntary_switches", static_cast<double>(c.involuntary_switches)},
                             {"canary_before_ms", c.canary_before_ms},
                             {"canary_after_ms", c.canary_after_ms},
                             {"triad_before_gbs", c.triad_before_gbs},
                             {"triad_after_gbs", c.triad_after_gbs},
                             {"working_set_mb", c.working_set_mb}}));
  } else {
    s.bind_null(36);
  }
  s.bind(37, static_cast<int64_t>(r.attempts))
      .bind(38, static_cast<int64_t>(r.pass_suspicious))
      .bind(39, r.backend_version)
      .bind(40, r.audit_share)
      .bind(41, r.audit_coverage)
      .bind(42, r.disturbed_by);
  bind_doubles(43, r.sim_instructions);
  bind_doubles(44, r.sim_d1_misses);
  bind_doubles(45, r.sim_ll_misses);
  s.bind(46, finite(summarize(r.sim_instructions).median));
  bind_doubles(47, r.cpu_ms);
  if (r.roofline) {
    const Roofline& rl = *r.roofline;
    const auto figures = roofline_figures(rl, st.median);
    s.bind(48, rl.flops)
        .bind(49, rl.min_bytes)
        .bind(50, rl.peak_gflops)
        .bind(51, rl.triad_gbs)
        .bind(52, figures ? std::optional<double>(figures->fraction) : std::nullopt);
    auto positive = [](double v) { return v > 0 ? std::optional<double>(v) : std::nullopt; };
    int col = 53;
    for (const CacheCeiling& c : {rl.l1, rl.l2, rl.l3}) {
      s.bind(col, positive(c.gbs)).bind(col + 1, positive(c.bytes));
      col += 2;
    }
  } else {
    for (int i = 48; i <= 58; ++i) s.bind_null(i);
  }
  s.run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  insert_accuracy(db_, id, r.accuracy);
  insert_kernels(db_, id, r.kernels);
  return id;
}

void Store::finish_run(int64_t run_id, const std::string& status) {
  Statement(db_, "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?")
      .bind(1, status)
      .bind(2, now_utc())
      .bind(3, run_id)
      .run();
}

void Store::discard_run(int64_t run_id) {
  Statement(db_,
            "DELETE FROM runs WHERE id = ?1 AND NOT EXISTS"
            " (SELECT 1 FROM results WHERE run_id = ?1)")
      .bind(1, run_id)
      .run();
}

void Store::plan_run(int64_t run_id, int64_t planned_results) {
  Statement(db_, "UPDATE runs SET planned_results = ? WHERE id = ?")
      .bind(1, planned_results)
      .bind(2, run_id)
      .run();
}

std::vector<UnfinishedRun> Store::unfinished_runs() {
  Statement q(db_,
              "SELECT r.id, coalesce(r.uuid, ''), r.status, r.tag, r.hostname, r.started_at,"
              " (SELECT count(*) FROM results x WHERE x.run_id = r.id) AS n, r.planned_results"
              " FROM runs r WHERE r.status <> 'complete' OR n < coalesce(r.planned_results, 0)"
              " ORDER BY r.id");
  std::vector<UnfinishedRun> out;
  while (q.step()) {
    UnfinishedRun u;
    u.id = q.int64(0);
    u.uuid = q.text(1);
    u.status = q.text(2);
    u.tag = q.text(3);
    u.hostname = q.text(4);
    u.started_at = q.text(5);
    u.results = q.int64(6);
    if (auto p = q.optional_real(7)) u.planned = static_cast<int64_t>(*p);
    out.push_back(std::move(u));
  }
  return out;
}

std::string describe(const UnfinishedRun& r) {
  std::string where = r.tag.empty() ? "" : "tag " + r.tag + ", ";
  where += "host " + r.hostname + ", started " + r.started_at;
  const std::string count = r.planned
                                ? fmt::format("{} of {} planned results", r.results, *r.planned)
                                : fmt::format("{} result{}", r.results, r.results == 1 ? "" : "s");
  const char* why = r.status == "running"      ? " (its process was killed or is still running)"
                    : r.status == "incomplete" ? " (interrupted, or its process died)"
                                               : "";
  return fmt::format("run {} ({}) is '{}'{} with {}", r.id, where, r.status, why, count);
}

std::vector<RunRow> Store::runs(int limit) { return run_rows(0, limit); }

RunRow Store::run(int64_t run_id) {
  std::vector<RunRow> rows = run_rows(run_id, 1);
  if (rows.empty()) throw StoreError(fmt::format("{}: no run with id {}", path_.string(), run_id));
  return rows.front();
}

std::vector<RunRow> Store::run_rows(int64_t run_id, int limit) {
  Statement q(db_,
              "SELECT r.id, r.started_at, coalesce(r.finished_at, ''), r.status, r.tag, r.suites, "
              "r.backends, r.mode,"
              " r.hostname, coalesce(r.git_commit, ''), coalesce(r.cores, 0),"
              " (SELECT count(*) FROM results x WHERE x.run_id = r.id), coalesce(r.threads, 0),"
              " coalesce(r.command, '')"
              " FROM runs r WHERE ?1 = 0 OR r.id = ?1 ORDER BY r.id DESC LIMIT ?2");
  q.bind(1, run_id).bind(2, static_cast<int64_t>(limit));
  std::vector<RunRow> out;
  while (q.step()) {
    RunRow r;
    r.id = q.int64(0);
    r.started_at = q.text(1);
    r.finished_at = q.text(2);
    r.status = q.text(3);
    r.tag = q.text(4);
    r.suites = q.text(5);
    r.backends = q.text(6);
    r.mode = q.text(7);
    r.hostname = q.text(8);
    r.git_commit = q.text(9);
    r.cores = static_cast<int>(q.int64(10));
    r.results = q.int64(11);
    r.threads = static_cast<int>(q.int64(12));
    r.command = q.text(13);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<ResultRow> Store::results(int64_t run_id) {
  Statement q(db_,
              "SELECT id, run_id, suite, model, backend, mode, status, error, batch_size, samples, "
              "speedup, compile_s,"
              " compile_warm_s, peak_rss_mb, memory_ratio,"
              " (SELECT max(max_abs_err) FROM accuracy a WHERE a.result_id = results.id),"
              " noisy, pass_suspicious, audit, coalesce(calls_per_sample, 0), instructions_median,"
              " backend_version, audit_share, audit_coverage, disturbed_by, cpu_ms,"
              " flops, min_bytes, peak_gflops, triad_gbs, l1_gbs, l1_bytes, l2_gbs, l2_bytes,"
              " l3_gbs, l3_bytes"
              " FROM results WHERE run_id = ? ORDER BY id");
  q.bind(1, run_id);
  std::vector<ResultRow> out;
  while (q.step()) {
    ResultRow r;
    r.id = q.int64(0);
    r.run_id = q.int64(1);
    r.suite = q.text(2);
    r.model = q.text(3);
    r.backend = q.text(4);
    r.mode = q.text(5);
    r.status = stored_status(q.text(6), fmt::format("{}: result {}", path_.string(), r.id));
    r.error = q.text(7);
    r.batch_size = q.int64(8);
    r.samples_ms = q.doubles_blob(9);
    r.stats = summarize(r.samples_ms);
    r.speedup = q.optional_real(10);
    r.compile_s = q.optional_real(11);
    r.compile_warm_s = q.optional_real(12);
    r.peak_rss_mb = q.optional_real(13);
    r.memory_ratio = q.optional_real(14);
    r.max_abs_err = q.optional_real(15);
    r.noisy = q.int64(16) != 0;
    r.pass_suspicious = q.int64(17) != 0;
    r.audit = q.text(18);
    r.calls_per_sample = q.int64(19);
    r.instructions_median = q.optional_real(20);
    r.backend_version = q.text(21);
    r.audit_share = q.optional_real(22);
    r.audit_coverage = q.optional_real(23);
    r.disturbed_by = q.text(24);
    r.cpu_ms = q.doubles_blob(25);
    if (const auto flops = q.optional_real(26)) {
      auto real = [&](int col) { return q.optional_real(col).value_or(0); };
      r.roofline = Roofline{*flops,
                            real(27),
                            real(28),
                            real(29),
                            {real(30), real(31)},
                            {real(32), real(33)},
                            {real(34), real(35)}};
    }
    out.push_back(std::move(r));
  }
  return out;
}

void Store::add_calibration(const Calibration& c) {
  Transaction tx(db_);
  Statement s(
      db_,
      "INSERT INTO calibrations (created_at, hostname, suite, model, backend, runs, run_ids,"
      " median_ms, time_cv, within_run_cv, instructions_cv, speedup_median, speedup_min,"
      " speedup_max, noisy_runs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, now_utc())
      .bind(2, this_host())
      .bind(3, c.suite)
      .bind(4, c.model)
      .bind(5, c.backend)
      .bind(6, static_cast<int64_t>(c.runs))
      .bind(7, c.run_ids)
      .bind(8, finite(c.median_ms))
      .bind(9, finite(c.time_cv))
      .bind(10, finite(c.within_run_cv))
      .bind(11, c.instructions_cv)
      .bind(12, c.speedup_median)
      .bind(13, c.speedup_min)
      .bind(14, c.speedup_max)
      .bind(15, static_cast<int64_t>(c.noisy_runs));
  s.run();
  tx.commit();
}

std::vector<Calibration> Store::calibrations(const std::string& model) {
  Statement q(db_,
              "SELECT suite, model, backend, runs, run_ids, median_ms, time_cv, within_run_cv,"
              " instructions_cv,"
              " speedup_median, speedup_min, speedup_max, noisy_runs FROM calibrations"
              " WHERE ? = '' OR model = ? ORDER BY id DESC");
  q.bind(1, model).bind(2, model);
  std::vector<Calibration> out;
  while (q.step()) {
    Calibration c;
    c.suite = q.text(0);
    c.model = q.text(1);
    c.backend = q.text(2);
    c.runs = static_cast<int>(q.int64(3));
    c.run_ids = q.text(4);
    c.median_ms = q.optional_real(5).value_or(NAN);
    c.time_cv = q.optional_real(6).value_or(NAN);
    c.within_run_cv = q.optional_real(7).value_or(NAN);
    c.instructions_cv = q.optional_real(8);
    c.speedup_median = q.optional_real(9);
    c.speedup_min = q.optional_real(10);
    c.speedup_max = q.optional_real(11);
    c.noisy_runs = static_cast<int>(q.int64(12));
    out.push_back(c);
  }
  return out;
}

int64_t Store::add_repro(const ReproRecord& r) {
  Transaction tx(db_);
  Statement s(db_,
              "INSERT INTO repros (created_at, run_id, suite, model, backend, config, outcome,"
              " signature, message, nodes_before, nodes_after, compute_nodes, oracle_calls,"
              " cache_hits, flipped, original_failures, replays_ok, replays, wall_s, path,"
              " culprit_kernel, culprit_pass, backend_version)"
              " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, now_utc());
  if (r.run_id) {
    s.bind(2, *r.run_id);
  } else {
    s.bind_null(2);
  }
  s.bind(3, r.suite)
      .bind(4, r.model)
      .bind(5, r.backend)
      .bind(6, r.config)
      .bind(7, r.outcome)
      .bind(8, r.signature)
      .bind(9, r.message)
      .bind(10, static_cast<int64_t>(r.nodes_before))
      .bind(11, static_cast<int64_t>(r.nodes_after))
      .bind(12, static_cast<int64_t>(r.compute_nodes))
      .bind(13, static_cast<int64_t>(r.oracle_calls))
      .bind(14, static_cast<int64_t>(r.cache_hits))
      .bind(15, static_cast<int64_t>(r.flipped))
      .bind(16, static_cast<int64_t>(r.original_failures))
      .bind(17, static_cast<int64_t>(r.replays_ok))
      .bind(18, static_cast<int64_t>(r.replays))
      .bind(19, finite(r.wall_s).value_or(0.0))
      .bind(20, r.path)
      .bind(21, r.culprit_kernel)
      .bind(22, r.culprit_pass)
      .bind(23, r.backend_version);
  s.run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

std::vector<ReproRecord> Store::repros(const std::string& model) {
  Statement q(db_,
              "SELECT run_id, suite, model, backend, config, outcome, signature, message,"
              " nodes_before, nodes_after, compute_nodes, oracle_calls, cache_hits, flipped,"
              " original_failures, replays_ok, replays, wall_s, path, culprit_kernel,"
              " culprit_pass, backend_version FROM repros"
              " WHERE ? = '' OR model = ? ORDER BY id DESC");
  q.bind(1, model).bind(2, model);
  std::vector<ReproRecord> out;
  while (q.step()) {
    ReproRecord r;
    if (auto run = q.optional_real(0)) r.run_id = static_cast<int64_t>(*run);
    r.suite = q.text(1);
    r.model = q.text(2);
    r.backend = q.text(3);
    r.config = q.text(4);
    r.outcome = q.text(5);
    r.signature = q.text(6);
    r.message = q.text(7);
    r.nodes_before = static_cast<int>(q.int64(8));
    r.nodes_after = static_cast<int>(q.int64(9));
    r.compute_nodes = static_cast<int>(q.int64(10));
    r.oracle_calls = static_cast<int>(q.int64(11));
    r.cache_hits = static_cast<int>(q.int64(12));
    r.flipped = static_cast<int>(q.int64(13));
    r.original_failures = static_cast<int>(q.int64(14));
    r.replays_ok = static_cast<int>(q.int64(15));
    r.replays = static_cast<int>(q.int64(16));
    r.wall_s = q.optional_real(17).value_or(0.0);
    r.path = q.text(18);
    r.culprit_kernel = q.text(19);
    r.culprit_pass = q.text(20);
    r.backend_version = q.text(21);
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<std::string> Store::previous_status(const std::string& suite,
                                                  const std::string& model,
                                                  const std::string& backend,
                                                  const std::string& mode, int64_t run_id) {
  Statement q(db_,
              "SELECT status FROM results WHERE suite = ? AND model = ? AND backend = ? AND"
              " mode = ? AND run_id < ? ORDER BY run_id DESC, id DESC LIMIT 1");
  q.bind(1, suite).bind(2, model).bind(3, backend).bind(4, mode).bind(5, run_id);
  if (!q.step()) return std::nullopt;
  return q.text(0);
}

std::vector<OutputAccuracy> Store::accuracy(int64_t result_id) {
  Statement q(db_,
              "SELECT output_index, dtype, shape, max_abs_err, max_rel_err, mismatches, "
              "first_mismatch, rmse_vs_fp64,"
              " rmse_eager_vs_fp64, cosine, passed FROM accuracy WHERE result_id = ? ORDER BY "
              "output_index");
  q.bind(1, result_id);
  std::vector<OutputAccuracy> out;
  while (q.step()) {
    OutputAccuracy a;
    a.index = static_cast<int>(q.int64(0));
    a.dtype = q.text(1);
    a.shape = q.text(2);
    a.max_abs_err = q.optional_real(3).value_or(NAN);
    a.max_rel_err = q.optional_real(4).value_or(NAN);
    a.mismatches = q.int64(5);
    a.first_mismatch = q.int64(6);
    a.rmse_vs_fp64 = q.optional_real(7).value_or(NAN);
    a.rmse_eager_vs_fp64 = q.optional_real(8).value_or(NAN);
    a.cosine = q.optional_real(9).value_or(NAN);
    a.passed = q.int64(10) != 0;
    out.push_back(a);
  }
  return out;
}

std::vector<KernelTiming> Store::kernels(int64_t result_id, bool schedule_order) {
  Statement q(db_, fmt::format("SELECT name, calls, total_ns, flops, bytes FROM kernels WHERE"
                               " result_id = ? ORDER BY {}",
                               schedule_order ? "rowid" : "total_ns DESC"));
  q.bind(1, result_id);
  std::vector<KernelTiming> out;
  while (q.step()) {
    KernelTiming k(q.text(0), q.int64(1), q.int64(2));
    k.flops = q.optional_real(3);
    k.bytes = q.optional_real(4);
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace crucible::reports

namespace crucible::reports {

std::string Store::integrity_check() {
  Statement q(db_, "PRAGMA integrity_check");
  std::string out;
  while (q.step()) out += (out.empty() ? "" : "; ") + q.text(0);
  return out;
}

}  // namespace crucible::reports
