// Merging shard databases (see Store::merge): runs are known by their uuid, and each copied run
// brings its results, their accuracy and kernel rows and its repros, with ids renumbered.
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>

#include "crucible/reports/store.h"
#include "sqlite_db.h"

namespace crucible::reports {

namespace {

// The columns of `table` in the main database except `skip`, comma-separated, each after
// `prefix` ("t." to name them in a join).
std::string columns_except(sqlite3* db, const std::string& table,
                           const std::vector<std::string>& skip, const std::string& prefix = "") {
  Statement q(db, fmt::format("SELECT name FROM main.pragma_table_info('{}')", table));
  std::string out;
  while (q.step()) {
    const std::string c = q.text(0);
    if (std::find(skip.begin(), skip.end(), c) != skip.end()) continue;
    out += (out.empty() ? "" : ", ") + prefix + c;
  }
  return out;
}

int64_t changes(sqlite3* db) { return sqlite3_changes64(db); }

// Copies each row `select` names, as (old id[, new parent id]), with `insert` (?1 the old id, ?2
// the parent's new id) and records old -> new id in temporary table `map`. Returns the rows.
int64_t copy_mapped(sqlite3* db, const std::string& select, const std::string& insert,
                    const std::string& map) {
  Statement rows(db, select), copy(db, insert),
      remember(db, fmt::format("INSERT INTO {} (old, new) VALUES (?, ?)", map));
  int64_t n = 0;
  while (rows.step()) {
    copy.reset();
    copy.bind(1, rows.int64(0));
    if (rows.columns() > 1) copy.bind(2, rows.int64(1));
    copy.run();
    remember.reset();
    remember.bind(1, rows.int64(0)).bind(2, static_cast<int64_t>(sqlite3_last_insert_rowid(db)));
    remember.run();
    ++n;
  }
  return n;
}

}  // namespace

std::string describe_unfinished(const std::filesystem::path& file,
                                const std::vector<UnfinishedRun>& runs) {
  std::string msg = fmt::format(
      "{}: {} run{} did not finish, merge refused (nothing added; --allow-incomplete merges {} "
      "anyway):",
      file.string(), runs.size(), runs.size() == 1 ? "" : "s", runs.size() == 1 ? "it" : "them");
  for (const UnfinishedRun& r : runs) msg += "\n  " + describe(r);
  return msg;
}

MergeStats Store::merge(const std::filesystem::path& shard) { return merge(shard, {}); }

MergeStats Store::merge(const std::filesystem::path& shard, const MergeOptions& options) {
  // Checks the shard as a reader would (exists, is a crucible database, same schema) first, then
  // that every run it would bring finished: a shard killed mid-run (SIGKILL, a node lost, a time
  // limit) leaves its run 'running' with part of its results, and a merged store that silently
  // lacks them reads as a night where those models were never asked for.
  {
    auto source = open_readonly(shard);
    std::vector<UnfinishedRun> lost;
    for (UnfinishedRun& r : source->unfinished_runs()) {
      Statement here(db_, "SELECT count(*) FROM runs WHERE uuid = ?");
      here.bind(1, r.uuid);
      here.step();
      if (here.int64(0) == 0) lost.push_back(std::move(r));  // one already here is not copied
    }
    if (!lost.empty() && !options.allow_incomplete) {
      throw StoreError(describe_unfinished(shard, lost));
    }
  }
  if (std::filesystem::equivalent(shard, path_)) {
    throw StoreError(fmt::format("{}: cannot merge a database into itself", shard.string()));
  }
  Statement(db_, "ATTACH DATABASE ? AS shard").bind(1, shard.string()).run();
  struct Detach {
    sqlite3* db;
    ~Detach() { sqlite3_exec(db, "DETACH DATABASE shard", nullptr, nullptr, nullptr); }
  } detach{db_};

  MergeStats st;
  Transaction tx(db_);
  exec(db_, "CREATE TEMP TABLE IF NOT EXISTS run_map (old INTEGER PRIMARY KEY, new INTEGER)");
  exec(db_, "CREATE TEMP TABLE IF NOT EXISTS result_map (old INTEGER PRIMARY KEY, new INTEGER)");
  exec(db_, "DELETE FROM run_map");
  exec(db_, "DELETE FROM result_map");

  Statement present(db_,
                    "SELECT count(*) FROM shard.runs s WHERE EXISTS"
                    " (SELECT 1 FROM main.runs m WHERE m.uuid = s.uuid)");
  present.step();
  st.runs_present = present.int64(0);
  const std::string run_cols = columns_except(db_, "runs", {"id"});
  st.runs = copy_mapped(db_,
                        "SELECT s.id FROM shard.runs s WHERE NOT EXISTS"
                        " (SELECT 1 FROM main.runs m WHERE m.uuid = s.uuid) ORDER BY s.id",
                        fmt::format("INSERT INTO main.runs ({0}) SELECT {0} FROM shard.runs"
                                    " WHERE id = ?1",
                                    run_cols),
                        "run_map");
  const std::string result_cols = columns_except(db_, "results", {"id", "run_id"});
  st.results = copy_mapped(
      db_,
      "SELECT x.id, m.new FROM shard.results x JOIN run_map m ON m.old = x.run_id ORDER BY x.id",
      fmt::format("INSERT INTO main.results (run_id, {0}) SELECT ?2, {0} FROM shard.results"
                  " WHERE id = ?1",
                  result_cols),
      "result_map");
  for (const auto& [table, count] :
       {std::pair<std::string, int64_t*>{"accuracy", &st.accuracy}, {"kernels", &st.kernels}}) {
    exec(db_, fmt::format("INSERT INTO main.{0} (result_id, {1}) SELECT m.new, {2} FROM"
                          " shard.{0} t JOIN result_map m ON m.old = t.result_id ORDER BY t.rowid",
                          table, columns_except(db_, table, {"result_id"}),
                          columns_except(db_, table, {"result_id"}, "t.")));
    *count = changes(db_);
  }
  // A repro belongs to a copied run, or (minify on its own) to none: those are known by when and
  // where they were written.
  const std::string repro_cols = columns_except(db_, "repros", {"id", "run_id"});
  exec(db_,
       fmt::format("INSERT INTO main.repros (run_id, {0}) SELECT m.new, {1} FROM shard.repros t"
                   " LEFT JOIN run_map m ON m.old = t.run_id WHERE m.new IS NOT NULL OR"
                   " (t.run_id IS NULL AND NOT EXISTS (SELECT 1 FROM main.repros r WHERE"
                   " r.run_id IS NULL AND r.created_at = t.created_at AND r.model = t.model AND"
                   " r.backend = t.backend AND r.path = t.path)) ORDER BY t.id",
                   repro_cols, columns_except(db_, "repros", {"id", "run_id"}, "t.")));
  st.repros = changes(db_);
  exec(db_, fmt::format(
                "INSERT INTO main.calibrations ({0}) SELECT {1} FROM shard.calibrations t WHERE"
                " NOT EXISTS (SELECT 1 FROM main.calibrations c WHERE c.created_at = t.created_at"
                " AND c.hostname = t.hostname AND c.suite = t.suite AND c.model = t.model AND"
                " c.backend = t.backend) ORDER BY t.id",
                columns_except(db_, "calibrations", {"id"}),
                columns_except(db_, "calibrations", {"id"}, "t.")));
  st.calibrations = changes(db_);
  tx.commit();
  return st;
}

}  // namespace crucible::reports
