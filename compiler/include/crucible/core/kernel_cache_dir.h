// Where compiled kernels are cached when nothing says otherwise: one rule for the backends that
// compile and for the harness, which lets its sandboxed workers write there and nowhere else.
#pragma once

#include <filesystem>

namespace crucible {

// $CRUCIBLE_CACHE_DIR, else $XDG_CACHE_HOME/crucible/kernels (an absolute one), else
// ~/.cache/crucible/kernels. Throws Error when none can be named (no HOME, no passwd entry).
std::filesystem::path default_kernel_cache_dir();

}  // namespace crucible
