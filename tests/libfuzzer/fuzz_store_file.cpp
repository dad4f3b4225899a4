// libFuzzer target: a damaged store. The bytes are the database file; every reader the history
// commands use runs on it read-only, then it is opened for writing (migration) and merged into a
// fresh store, as `crucible merge` would take a shard from another machine.
#include <filesystem>

#include "crucible/core/error.h"
#include "crucible/reports/store.h"
#include "fuzz_support.h"

namespace {

using crucible::reports::Store;

void read_everything(Store& s) {
  const auto runs = s.runs(5);
  for (const auto& r : runs) {
    s.run(r.id);
    int n = 0;
    for (const auto& res : s.results(r.id)) {
      if (++n > 20) break;
      s.accuracy(res.id);
      s.kernels(res.id);
      s.kernels_table(res.id);
    }
    s.results_table(r.id, false);
  }
  if (runs.size() >= 2) s.compare(runs[0].id, runs[1].id);
  s.runs_table(5);
  s.unfinished_runs();
  s.calibrations();
  s.repros();
  s.report_rows("");
  s.regressions({});
  s.latest_launcher_json();
  s.history({.model = "m", .backend = "codegen", .suite = "", .metric = "speedup", .since = ""});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const fs::path dir = crucible::fuzz::scratch_dir() / "store";
  fs::remove_all(dir);
  const fs::path db =
      crucible::fuzz::write_scratch("store/shard.db", crucible::fuzz::as_text(data, size));
  try {
    auto s = Store::open_readonly(db);
    read_everything(*s);
  } catch (const crucible::Error&) {
  }
  try {
    auto s = Store::open(db);
    read_everything(*s);
    Store::open(dir / "main.db")->merge(db);
  } catch (const crucible::Error&) {
  }
  return 0;
}
