// `crucible db merge OUT IN...` (shard databases into one, idempotent) and `crucible db migrate
// FILE` (upgrade an older store to this crucible's schema, which the read commands never do).
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "crucible/reports/store.h"

namespace crucible::cli {

int db_command(const std::vector<std::string>& args) {
  po::options_description opts("db options");
  std::string action;
  std::vector<std::string> files;
  opts.add_options()("action", po::value(&action)->required(), "merge | migrate")(
      "files", po::value(&files)->multitoken(), "merge: OUT.db IN.db...; migrate: FILE.db");
  po::positional_options_description pos;
  pos.add("action", 1).add("files", -1);
  po::variables_map vm;
  if (!parse("db", "merge OUT.db IN.db... | migrate FILE.db", opts, pos, args, vm)) return kExitOk;
  if (action == "migrate") {
    if (files.size() != 1) throw po::error("db migrate takes one database");
    if (!std::filesystem::is_regular_file(files[0]))
      throw reports::StoreError(fmt::format("{}: no such database", files[0]));
    auto store = reports::Store::open(files[0]);
    std::cout << fmt::format("{}: schema version {}\n", files[0], store->schema_version());
    return kExitOk;
  }
  if (action != "merge") throw po::error(fmt::format("unknown db action '{}'", action));
  if (files.size() < 2) throw po::error("db merge takes OUT.db and at least one IN.db");
  // Every shard is checked before the output is created or touched.
  for (size_t i = 1; i < files.size(); ++i) reports::Store::open_readonly(files[i]).reset();
  auto out = reports::Store::open(files[0]);
  for (size_t i = 1; i < files.size(); ++i) {
    const reports::MergeStats st = out->merge(files[i]);
    std::cout << fmt::format(
        "{}: {} runs added ({} already present), {} results, {} accuracy rows, {} kernel rows, "
        "{} repros, {} calibrations\n",
        files[i], st.runs, st.runs_present, st.results, st.accuracy, st.kernels, st.repros,
        st.calibrations);
  }
  return kExitOk;
}

}  // namespace crucible::cli
