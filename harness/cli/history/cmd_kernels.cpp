// `crucible kernels`: a result's kernel timings, slowest first.
#include <fmt/format.h>

#include "cli.h"
#include "crucible/reports/store.h"
#include "read_options.h"

namespace crucible::cli {

int kernels_command(const std::vector<std::string>& args) {
  po::options_description opts("kernels options");
  ReadOptions r;
  int64_t result = 0;
  std::string model, backend;
  add_read_options(opts, r);
  opts.add_options()("result", po::value(&result), "a result id (from history or query)")(
      "model", po::value(&model),
      "or the newest profiled result of this model (MODEL, or SUITE/MODEL as run tables print "
      "it)")("backend", po::value(&backend), "... on this backend");
  po::positional_options_description pos;
  pos.add("result", 1);
  po::variables_map vm;
  if (!parse("kernels", "(RESULT | --model M --backend B) [--db F] [--format table|csv|json]", opts,
             pos, args, vm)) {
    return kExitOk;
  }
  reports::parse_table_format(r.format);
  if (vm.count("result") == (model.empty() && backend.empty() ? 0u : 1u)) {
    throw po::error("give a result id or --model and --backend, not both");
  }
  if (!vm.count("result") && (model.empty() || backend.empty())) {
    throw po::error("--model and --backend go together");
  }
  auto store = reports::Store::open_readonly(r.db);
  if (!vm.count("result")) {
    const auto id = store->latest_profiled_result(model, backend);
    if (!id) {
      throw reports::StoreError(fmt::format(
          "{}: no result of model '{}' on '{}' has kernel timings", r.db, model, backend));
    }
    result = *id;
  }
  return print(store->kernels_table(result), r);
}

}  // namespace crucible::cli
