// A run's output folder (logs, CSVs, kernel cache, repros): one per store and run. A folder is
// claimed by a marker file made with O_EXCL, so two runs never write into one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace crucible {

// Where a run's outputs go when not told: crucible_out/<store name>-<8 hex of its absolute
// path>/run_<id>, so two stores used from one folder never share one.
std::filesystem::path default_output_dir(const std::filesystem::path& db, int64_t run_id);

// `--output-dir` with "{run}" replaced by the run id (a folder per run under one parent).
std::filesystem::path expand_output_dir(const std::string& pattern, int64_t run_id);
bool has_run_placeholder(const std::string& pattern);

// `base`, base.2, base.3, ...: the first name `take` accepts (it may claim it); Error when none
// of 1000 does. A generated folder name that is taken moves on rather than writing over it.
std::filesystem::path first_free_name(
    const std::filesystem::path& base,
    const std::function<bool(const std::filesystem::path&)>& take);

// Creates `dir` (and its parents) and its marker naming (db, run_id); false when the folder
// already holds the marker of a run, and then nothing is written. run_id 0: claimed before the
// run exists (the marker is rewritten by mark_output_dir).
bool claim_output_dir(const std::filesystem::path& dir, const std::filesystem::path& db,
                      int64_t run_id);
void mark_output_dir(const std::filesystem::path& dir, const std::filesystem::path& db,
                     int64_t run_id);
// Removes the marker (a claim made before a run that then never started).
void release_output_dir(const std::filesystem::path& dir);
// "run N of STORE" as the marker says, for an error message; "" without a marker.
std::string output_dir_owner(const std::filesystem::path& dir);

}  // namespace crucible
