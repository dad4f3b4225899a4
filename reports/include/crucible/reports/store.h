// The results store: SQLite in WAL mode with a schema-version table and migrations. It is the only
// code that speaks SQL; the harness and the report commands use this interface.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/reports/records.h"
#include "crucible/reports/table.h"

struct sqlite3;

namespace crucible::reports {

class StoreError : public Error {
 public:
  using Error::Error;
};

struct RunRow {
  int64_t id = 0;
  std::string started_at, finished_at, status, tag, suites, backends, mode, hostname, git_commit;
  int cores = 0;
  int threads = 0;  // OpenMP threads per worker as the run recorded them (0: unknown)
  int64_t results = 0;
  std::string command;  // the command line that made it (shell words since 0.1.0's quoting)
};

struct ResultRow {
  int64_t id = 0;
  int64_t run_id = 0;
  std::string suite, model, backend, mode, error;
  Status status = Status::kFailToRun;
  std::string backend_version;
  int64_t batch_size = 0;
  SampleStats stats;
  std::vector<double> samples_ms;
  std::optional<double> speedup, compile_s, compile_warm_s, peak_rss_mb, memory_ratio;
  std::optional<double> max_abs_err;  // worst over outputs
  bool noisy = false;
  bool pass_suspicious = false;
  std::string audit;
  std::optional<double> audit_share, audit_coverage;  // see ResultRecord
  std::string disturbed_by;
  int64_t calls_per_sample = 0;
  std::optional<double> instructions_median;
  std::vector<double> cpu_ms;  // per call, parallel to samples_ms (empty before schema 10)
  std::optional<Roofline> roofline;
};

// `crucible history`: one series (model, backend) over runs, oldest first.
struct HistoryQuery {
  std::string model, backend;
  std::string suite;   // "" for any
  std::string metric;  // speedup | latency | compile | memory | accuracy
  std::string since;   // runs started at or after this UTC time ("" for all), see since_utc()
};

// "30d", "12h", "2w" (before now) or an ISO date or date-time, as the UTC timestamp the store's
// started_at compares with; throws Error naming a malformed one.
std::string since_utc(const std::string& spec);

// `crucible regressions`: which alerts of the history to list.
struct RegressionQuery {
  int64_t run = 0;                    // alerts confirmed by this run (0: the newest run)
  bool all = false;                   // every alert of the whole history instead
  std::string suite, model, backend;  // "" for any
  std::string reference = "eager";    // timed beside every backend: its ratios are judged
};

// What merging one shard database added.
struct MergeStats {
  int64_t runs = 0, runs_present = 0;  // copied, and already here (same uuid)
  int64_t results = 0, accuracy = 0, kernels = 0, repros = 0, calibrations = 0;
};

// The SQLite library version in use.
std::string sqlite_version();

// Whether statfs(2)'s f_type `fs_type` is a network or cluster file system (NFS, SMB/CIFS, FUSE,
// Lustre, GPFS, CephFS, 9p, AFS, BeeGFS, ...), where SQLite's WAL does not work.
bool is_network_filesystem(int64_t fs_type);
// The journal mode a store on a file system of type `fs_type` uses: "wal" on a local one, "delete"
// (a rollback journal) on a network one. `override_mode` (CRUCIBLE_JOURNAL_MODE) wins unless it is
// "" or "auto": wal, delete, truncate or persist; anything else throws StoreError.
std::string journal_mode_for(int64_t fs_type, const std::string& override_mode = "");
// journal_mode_for the file system holding `path`'s directory and $CRUCIBLE_JOURNAL_MODE.
std::string journal_mode_for_path(const std::filesystem::path& path);

// A run that did not end as planned: its status is not 'complete' (killed: 'running'; interrupted:
// 'incomplete'; 'failed'), or it holds fewer results than it planned (Store::plan_run).
struct UnfinishedRun {
  int64_t id = 0;
  std::string uuid, status, tag, hostname, started_at;
  int64_t results = 0;
  std::optional<int64_t> planned;  // unknown for runs that did not record a plan
};
// "run 3 (tag slurm:7/1, host n01, started ...) is 'running' with 2 of 8 planned results"
std::string describe(const UnfinishedRun& run);
// "<file>: 1 run did not finish, merge refused ...:" and one indented describe() line per run.
std::string describe_unfinished(const std::filesystem::path& file,
                                const std::vector<UnfinishedRun>& runs);

// How Store::merge treats a source database.
struct MergeOptions {
  // Copy runs that did not finish (UnfinishedRun) too; by default the merge refuses such a source
  // whole, naming the file and the runs, and adds nothing.
  bool allow_incomplete = false;
};

class Store {
 public:
  static constexpr int kSchemaVersion = 13;

  // Opens (creating if needed) and migrates the database; marks runs left 'running' by a process
  // that no longer exists on this host as 'incomplete'. Throws StoreError naming the file.
  static std::unique_ptr<Store> open(const std::filesystem::path& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Opens an existing database to read: never creates, migrates or writes it. Throws StoreError
  // for a missing file, a file that is not a crucible database, or another schema version.
  static std::unique_ptr<Store> open_readonly(const std::filesystem::path& path);

  int schema_version();
  int64_t begin_run(const RunInfo& run);
  // Writes the result, its accuracy rows and kernel rows in one transaction.
  int64_t add_result(int64_t run_id, const ResultRecord& result);
  // Many results in one transaction (an import; a run writes each as it finishes).
  void add_results(int64_t run_id, const std::vector<ResultRecord>& results);
  // status: "complete" (every result written) or "failed" (the harness stopped on an error).
  void finish_run(int64_t run_id, const std::string& status);
  // Removes a run that recorded no result (its command failed before the first): a request that
  // ends in an error leaves no row. A run with results is kept.
  void discard_run(int64_t run_id);
  // Records how many results the run will write (its (model, backend, mode) jobs), so a reader
  // can tell a run that covered its models from one that lost some (unfinished_runs).
  void plan_run(int64_t run_id, int64_t planned_results);
  // Runs that did not end as planned, oldest first (see UnfinishedRun).
  std::vector<UnfinishedRun> unfinished_runs();
  // The journal mode SQLite reports for this connection ("wal", "delete", ...).
  std::string journal_mode();

  std::vector<RunRow> runs(int limit = 20);
  // One run; throws StoreError naming the id when there is none.
  RunRow run(int64_t run_id);
  std::vector<ResultRow> results(int64_t run_id);
  std::vector<OutputAccuracy> accuracy(int64_t result_id);
  // Slowest first, or in the order the backend declared them (its schedule).
  std::vector<KernelTiming> kernels(int64_t result_id, bool schedule_order = false);
  void add_calibration(const Calibration& c);
  // Every calibration of (suite, model, backend), newest first; all series when model is "".
  std::vector<Calibration> calibrations(const std::string& model = "");
  int64_t add_repro(const ReproRecord& r);
  // Every repro of `model` (all when ""), newest first.
  std::vector<ReproRecord> repros(const std::string& model = "");
  // The status (suite, model, backend, mode) had in the latest run before `run_id` that has a
  // result for it; nullopt when none has.
  std::optional<std::string> previous_status(const std::string& suite, const std::string& model,
                                             const std::string& backend, const std::string& mode,
                                             int64_t run_id);
  // Queries answered as tables (store_queries.cpp).
  // One SQL statement that only reads; a statement that would write is refused before it runs.
  Table query(const std::string& sql);
  Table runs_table(int limit);
  // One run's results in the order they were recorded, each error under its row; only those
  // that did not pass when `failed_only`. Throws StoreError for an unknown run.
  Table results_table(int64_t run_id, bool failed_only);
  // Throws StoreError when the metric is unknown or no result of (model, backend) exists.
  Table history(const HistoryQuery& q);
  // The kernel timings of one result (by id), slowest first; throws StoreError for an unknown id.
  Table kernels_table(int64_t result_id);
  // The newest result of (model, backend) that has kernel timings; nullopt when none has. `model`
  // may name its suite too, as run tables print it ("onnx-zoo/resnet50").
  std::optional<int64_t> latest_profiled_result(const std::string& model,
                                                const std::string& backend);

  // Copies every run of the database at `shard` that this one lacks (by uuid) with its results,
  // accuracy rows, kernels and repros, and calibrations not yet here, in one transaction: merging
  // the same shard twice adds nothing, and a failure adds nothing. The shard is only read; it
  // must be a crucible database of this schema version (store_merge.cpp).
  // A shard with a run that did not finish (a killed shard) is refused unless
  // options.allow_incomplete: StoreError names the file and each such run.
  MergeStats merge(const std::filesystem::path& shard);
  MergeStats merge(const std::filesystem::path& shard, const MergeOptions& options);

  // Every (suite, model, backend, mode) of runs `a` and `b` side by side: statuses, medians, the
  // change with its 95% interval and U-test p, the series' noise, speed-ups, a verdict and the
  // kernels that moved most (compare.cpp). Throws StoreError for a run that does not exist.
  Table compare(int64_t a, int64_t b);

  // Every result of the runs started since `since` (a UTC time, "" for all), oldest run first:
  // run, started_at, git_commit, suite, model, backend, mode, status, median_ms, cv, speedup,
  // compile_s, memory_ratio, noisy, result id, unaudited (1 under --no-audit), audit_share,
  // audit_coverage. What the HTML report is drawn from.
  Table report_rows(const std::string& since);
  // The newest run's launcher settings (JSON object text; "{}" for an empty store).
  std::string latest_launcher_json();

  // The statuses (suite, model, backend, mode) had in the last `limit` runs up to and including
  // `run_id`, oldest first.
  std::vector<Status> status_history(const std::string& suite, const std::string& model,
                                     const std::string& backend, const std::string& mode,
                                     int64_t run_id, int limit);
  // Runs the change detector (detect.h) over every series of the store and lists its alerts,
  // with the kernels that moved most for a timing change (regressions.cpp). Throws StoreError for
  // a run id that does not exist.
  Table regressions(const RegressionQuery& q);

  // SQLite's PRAGMA integrity_check: "ok" for a sound database.
  std::string integrity_check();

 private:
  explicit Store(sqlite3* db, std::filesystem::path path);
  static sqlite3* open_connection(const std::filesystem::path& path, int flags);
  void migrate();
  void mark_abandoned_runs();
  std::vector<RunRow> run_rows(int64_t run_id, int limit);       // run_id 0: any
  int64_t insert_result(int64_t run_id, const ResultRecord& r);  // inside a transaction

  sqlite3* db_;
  std::filesystem::path path_;
};

}  // namespace crucible::reports
