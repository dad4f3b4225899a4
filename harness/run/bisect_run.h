// `crucible run --bisect`: after a run, every new failure of an accuracy result (one the previous
// run of the same model and backend did not have) is minified to a repro, which is stored.
#pragma once

#include <filesystem>
#include <vector>

#include "crucible/reports/records.h"
#include "crucible/reports/store.h"
#include "run_config.h"
#include "suite.h"

namespace crucible {

void bisect_new_failures(const RunConfig& cfg, reports::Store& store, int64_t run_id,
                         const std::vector<ModelEntry>& models,
                         const std::vector<reports::ResultRecord>& results,
                         const std::filesystem::path& out_dir);

}  // namespace crucible
