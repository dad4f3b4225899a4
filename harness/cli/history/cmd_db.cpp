// `crucible db merge OUT IN...` (shard databases into one, idempotent; a shard whose run did not
// finish is refused), `crucible db check FILE...` (which runs did not finish) and `crucible db
// migrate FILE` (upgrade an older store to this crucible's schema, which the read commands never
// do).
#include <fmt/format.h>

#include <iostream>
#include <set>

#include "cli.h"
#include "crucible/reports/store.h"

namespace crucible::cli {

int db_command(const std::vector<std::string>& args) {
  po::options_description opts("db options");
  std::string action;
  std::vector<std::string> files;
  bool allow_incomplete = false;
  opts.add_options()("action", po::value(&action)->required(), "merge | check | migrate")(
      "files", po::value(&files)->multitoken(),
      "merge: OUT.db IN.db...; check: FILE.db...; migrate: FILE.db")(
      "allow-incomplete", po::bool_switch(&allow_incomplete),
      "merge: copy runs that did not finish too (by default a shard holding a run that is not "
      "'complete', or has fewer results than it planned, is refused with exit 1)");
  po::positional_options_description pos;
  pos.add("action", 1).add("files", -1);
  po::variables_map vm;
  if (!parse("db",
             "merge [--allow-incomplete] OUT.db IN.db... | check FILE.db... | migrate FILE.db",
             opts, pos, args, vm)) {
    return kExitOk;
  }
  if (allow_incomplete && action != "merge") throw po::error("--allow-incomplete is for db merge");
  if (action == "migrate") {
    if (files.size() != 1) throw po::error("db migrate takes one database");
    if (!std::filesystem::is_regular_file(files[0]))
      throw reports::StoreError(fmt::format("{}: no such database", files[0]));
    auto store = reports::Store::open(files[0]);
    std::cout << fmt::format("{}: schema version {}\n", files[0], store->schema_version());
    return kExitOk;
  }
  if (action == "check") {
    // Each run that did not finish as planned, per file; exit 1 when there is one (a lost shard).
    if (files.empty()) throw po::error("db check takes at least one database");
    int unfinished = 0;
    for (const auto& f : files) {
      const auto runs = reports::Store::open_readonly(f)->unfinished_runs();
      for (const auto& r : runs) std::cout << f << ": " << reports::describe(r) << "\n";
      if (runs.empty()) std::cout << f << ": every run finished\n";
      unfinished += static_cast<int>(runs.size());
    }
    return unfinished ? kExitFailed : kExitOk;
  }
  if (action != "merge") throw po::error(fmt::format("unknown db action '{}'", action));
  if (files.size() < 2) throw po::error("db merge takes OUT.db and at least one IN.db");
  // Every shard is checked before the output is created or touched: a database, this schema, and
  // (unless --allow-incomplete) every run it would add finished with the results it planned.
  std::set<std::string> merged_before;  // runs already in OUT are not copied again
  if (std::filesystem::is_regular_file(files[0])) {
    try {
      const reports::Table t =
          reports::Store::open_readonly(files[0])->query("SELECT uuid FROM runs");
      for (const auto& row : t.rows) merged_before.insert(reports::cell_text(row.at(0), false));
    } catch (const reports::StoreError&) {
      // An older OUT is migrated by the merge below; every shard run then counts as new.
    }
  }
  int refused = 0;
  for (size_t i = 1; i < files.size(); ++i) {
    std::vector<reports::UnfinishedRun> lost;
    for (auto& r : reports::Store::open_readonly(files[i])->unfinished_runs()) {
      if (!merged_before.count(r.uuid)) lost.push_back(std::move(r));
    }
    if (!lost.empty() && !allow_incomplete) {
      std::cerr << "crucible db: " << reports::describe_unfinished(files[i], lost) << "\n";
      ++refused;
    }
  }
  if (refused) return kExitFailed;
  const reports::MergeOptions options{allow_incomplete};
  auto out = reports::Store::open(files[0]);
  for (size_t i = 1; i < files.size(); ++i) {
    const reports::MergeStats st = out->merge(files[i], options);
    std::cout << fmt::format(
        "{}: {} runs added ({} already present), {} results, {} accuracy rows, {} kernel rows, "
        "{} repros, {} calibrations\n",
        files[i], st.runs, st.runs_present, st.results, st.accuracy, st.kernels, st.repros,
        st.calibrations);
  }
  return kExitOk;
}

}  // namespace crucible::cli
