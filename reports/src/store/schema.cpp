// Migration 0 -> 1: runs, results, per-output accuracy and per-kernel timings.
// Migration 1 -> 2: the audited, noise-aware timing (seed, percentiles, counters, contention).
// Migration 2 -> 3: A/A calibrations (each series' measured run-to-run noise).
// Migration 3 -> 4: minified repros. Migration 4 -> 5: the backend version behind each result.
// Migration 5 -> 6: a run's uuid (what `db merge` knows a run by) and an index per series.
// Migration 6 -> 7: the audit's share and coverage. Migration 7 -> 8: simulated counters.
// Migration 8 -> 9: a run's planned result count, so a merge can tell a shard that lost models.
// Migration 9 -> 10: each timed call's CPU time (Google Benchmark's cpu_time).
#include "schema.h"

namespace crucible::reports {

// A table, not logic: one SQL text per schema version, read in order; splitting it would only
// scatter the versions.
const std::vector<std::string_view>& migrations() {
  static const std::vector<std::string_view> kMigrations = {
      R"sql(
CREATE TABLE runs (
  id            INTEGER PRIMARY KEY,
  started_at    TEXT NOT NULL,
  finished_at   TEXT,
  status        TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'incomplete')),
  tag           TEXT NOT NULL DEFAULT '',
  suites        TEXT NOT NULL,
  backends      TEXT NOT NULL,
  mode          TEXT NOT NULL,
  hostname      TEXT NOT NULL,
  pid           INTEGER NOT NULL,
  os            TEXT,
  cpu_model     TEXT,
  cores         INTEGER,
  isa_flags     TEXT,
  compiler      TEXT,
  libraries     TEXT,
  git_commit    TEXT,
  threads       INTEGER,
  canary_ms     REAL,
  command       TEXT,
  launcher_json TEXT NOT NULL DEFAULT '{}',
  env_json      TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE results (
  id             INTEGER PRIMARY KEY,
  run_id         INTEGER NOT NULL REFERENCES runs(id),
  suite          TEXT NOT NULL,
  model          TEXT NOT NULL,
  backend        TEXT NOT NULL,
  mode           TEXT NOT NULL,
  batch_size     INTEGER NOT NULL,
  status         TEXT NOT NULL,
  error          TEXT NOT NULL DEFAULT '',
  n_samples      INTEGER NOT NULL DEFAULT 0,
  median_ms      REAL,
  mean_ms        REAL,
  stdev_ms       REAL,
  min_ms         REAL,
  max_ms         REAL,
  samples        BLOB,
  speedup        REAL,
  compile_s      REAL,
  compile_warm_s REAL,
  peak_rss_mb    REAL,
  memory_ratio   REAL,
  created_at     TEXT NOT NULL
);
CREATE INDEX results_by_run ON results(run_id);
CREATE INDEX results_by_model ON results(suite, model, backend, mode);
CREATE TABLE accuracy (
  result_id          INTEGER NOT NULL REFERENCES results(id),
  output_index       INTEGER NOT NULL,
  dtype              TEXT NOT NULL,
  shape              TEXT NOT NULL,
  max_abs_err        REAL,
  max_rel_err        REAL,
  mismatches         INTEGER,
  first_mismatch     INTEGER,
  rmse_vs_fp64       REAL,
  rmse_eager_vs_fp64 REAL,
  cosine             REAL,
  passed             INTEGER NOT NULL,
  PRIMARY KEY (result_id, output_index)
);
CREATE TABLE kernels (
  result_id INTEGER NOT NULL REFERENCES results(id),
  name      TEXT NOT NULL,
  calls     INTEGER NOT NULL,
  total_ns  INTEGER NOT NULL
);
CREATE INDEX kernels_by_result ON kernels(result_id);
)sql",
      R"sql(
ALTER TABLE runs ADD COLUMN seed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE results ADD COLUMN p10_ms REAL;
ALTER TABLE results ADD COLUMN p90_ms REAL;
ALTER TABLE results ADD COLUMN cv REAL;
ALTER TABLE results ADD COLUMN calls_per_sample INTEGER;
ALTER TABLE results ADD COLUMN timer_overhead_ns REAL;
ALTER TABLE results ADD COLUMN audit TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN instructions BLOB;
ALTER TABLE results ADD COLUMN cycles BLOB;
ALTER TABLE results ADD COLUMN page_faults BLOB;
ALTER TABLE results ADD COLUMN instructions_median REAL;
ALTER TABLE results ADD COLUMN instructions_cv REAL;
ALTER TABLE results ADD COLUMN counters_unavailable TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN noisy INTEGER NOT NULL DEFAULT 0;
ALTER TABLE results ADD COLUMN noise_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN contention_json TEXT;
ALTER TABLE results ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
ALTER TABLE results ADD COLUMN pass_suspicious INTEGER NOT NULL DEFAULT 0;
)sql",
      R"sql(
CREATE TABLE calibrations (
  id              INTEGER PRIMARY KEY,
  created_at      TEXT NOT NULL,
  hostname        TEXT NOT NULL,
  suite           TEXT NOT NULL,
  model           TEXT NOT NULL,
  backend         TEXT NOT NULL,
  runs            INTEGER NOT NULL,
  run_ids         TEXT NOT NULL,
  median_ms       REAL,
  time_cv         REAL,
  within_run_cv   REAL,
  instructions_cv REAL,
  speedup_median  REAL,
  speedup_min     REAL,
  speedup_max     REAL,
  noisy_runs      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX calibrations_by_series ON calibrations(suite, model, backend);
)sql",
      R"sql(
CREATE TABLE repros (
  id              INTEGER PRIMARY KEY,
  created_at      TEXT NOT NULL,
  run_id          INTEGER REFERENCES runs(id),
  suite           TEXT NOT NULL,
  model           TEXT NOT NULL,
  backend         TEXT NOT NULL,
  config          TEXT NOT NULL,
  outcome         TEXT NOT NULL CHECK (outcome IN
                    ('minimized', 'no_failure', 'flaky', 'other_failure', 'not_reproduced')),
  signature       TEXT NOT NULL,
  message         TEXT NOT NULL,
  nodes_before    INTEGER NOT NULL,
  nodes_after     INTEGER NOT NULL,
  compute_nodes   INTEGER NOT NULL,
  oracle_calls    INTEGER NOT NULL,
  cache_hits      INTEGER NOT NULL,
  flipped         INTEGER NOT NULL,
  original_failures INTEGER NOT NULL,
  replays_ok      INTEGER NOT NULL,
  replays         INTEGER NOT NULL,
  wall_s          REAL NOT NULL,
  path            TEXT NOT NULL,
  culprit_kernel  TEXT NOT NULL DEFAULT '',
  culprit_pass    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX repros_by_model ON repros(suite, model, backend);
)sql",
      R"sql(
ALTER TABLE results ADD COLUMN backend_version TEXT NOT NULL DEFAULT '';
ALTER TABLE repros ADD COLUMN backend_version TEXT NOT NULL DEFAULT '';
)sql",
      R"sql(
ALTER TABLE runs ADD COLUMN uuid TEXT;
UPDATE runs SET uuid = lower(hex(randomblob(16))) WHERE uuid IS NULL;
CREATE UNIQUE INDEX runs_by_uuid ON runs(uuid);
CREATE INDEX results_by_series ON results(model, backend, mode, run_id);
)sql",
      R"sql(
ALTER TABLE results ADD COLUMN audit_share REAL;
ALTER TABLE results ADD COLUMN audit_coverage REAL;
ALTER TABLE results ADD COLUMN disturbed_by TEXT NOT NULL DEFAULT '';
)sql",
      R"sql(
ALTER TABLE results ADD COLUMN sim_instructions BLOB;
ALTER TABLE results ADD COLUMN sim_d1_misses BLOB;
ALTER TABLE results ADD COLUMN sim_ll_misses BLOB;
ALTER TABLE results ADD COLUMN sim_instructions_median REAL;
ALTER TABLE kernels ADD COLUMN instructions REAL;
)sql",
      R"sql(
ALTER TABLE runs ADD COLUMN planned_results INTEGER;
)sql",
      R"sql(
ALTER TABLE results ADD COLUMN cpu_ms BLOB;
)sql",
      R"sql(
ALTER TABLE results ADD COLUMN flops REAL;
ALTER TABLE results ADD COLUMN min_bytes REAL;
ALTER TABLE results ADD COLUMN peak_gflops REAL;
ALTER TABLE results ADD COLUMN triad_gbs REAL;
ALTER TABLE results ADD COLUMN roofline_fraction REAL;
ALTER TABLE kernels ADD COLUMN flops REAL;
ALTER TABLE kernels ADD COLUMN bytes REAL;
)sql",
      R"sql(
ALTER TABLE results ADD COLUMN cache_gbs REAL;
ALTER TABLE results ADD COLUMN cache_bytes REAL;
)sql",
      R"sql(
ALTER TABLE results RENAME COLUMN cache_gbs TO l2_gbs;
ALTER TABLE results RENAME COLUMN cache_bytes TO l2_bytes;
ALTER TABLE results ADD COLUMN l1_gbs REAL;
ALTER TABLE results ADD COLUMN l1_bytes REAL;
ALTER TABLE results ADD COLUMN l3_gbs REAL;
ALTER TABLE results ADD COLUMN l3_bytes REAL;
)sql",
  };
  return kMigrations;
}

}  // namespace crucible::reports
