// The environment a run measured in, as one SQL expression over `runs r`: what a code change does
// not change. `regressions` starts a baseline where it changes; `compare` reads two runs' alike.
#pragma once

namespace crucible::reports::detail {

// "cpu=...;cores=...;compiler=...;libraries=...;threads=...;launcher=..." of the run aliased r.
inline constexpr const char* kRunFingerprintSql =
    "'cpu=' || coalesce(r.cpu_model, '') || ';cores=' || coalesce(r.cores, '') ||"
    " ';compiler=' || coalesce(r.compiler, '') || ';libraries=' || coalesce(r.libraries, '') ||"
    " ';threads=' || coalesce(r.threads, '') || ';launcher=' || r.launcher_json";

}  // namespace crucible::reports::detail
