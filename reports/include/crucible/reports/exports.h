// Exports of one stored run for other tools: Google Benchmark's JSON (what its compare.py reads),
// JUnit XML (what CI systems show as test results) and a Chrome/Perfetto trace of the profiled
// results' kernels. The dynamo CSVs are in csv_export.h.
#pragma once

#include <cstdint>
#include <ostream>

#include "crucible/reports/store.h"

namespace crucible::reports {

// Every performance result with samples as one benchmark "suite/model/backend", one entry per
// timed sample (run_type iteration, repetition_index), so compare.py's U test sees the samples.
void write_gbench_json(Store& store, int64_t run_id, std::ostream& out);

// One testsuite per (suite, backend), one testcase per result: failure for a wrong answer,
// error for a crash, timeout, OOM or a compile/load/run failure, skipped for skipped and xfail.
void write_junit(Store& store, int64_t run_id, std::ostream& out);

// Trace Event Format: per profiled result a process, and per profiled graph call each kernel as
// a complete event ("ph": "X") in schedule order. The store keeps each kernel's total over the
// calls, so every event lasts that kernel's mean (said in its args). `result_id` 0: every
// profiled result of the run. Throws StoreError when none has kernel timings.
void write_chrome_trace(Store& store, int64_t run_id, int64_t result_id, std::ostream& out);

}  // namespace crucible::reports
