// Setting OpenMP's thread count so every region gets what it plans for (openmp_threads.h).
#include "crucible/core/openmp_threads.h"

#include <omp.h>

#include <algorithm>

namespace crucible {

int use_openmp_threads(int requested) {
  omp_set_dynamic(0);
  // With no active level (OMP_MAX_ACTIVE_LEVELS=0, or a plugin's omp_set_max_active_levels(0))
  // every region runs on one thread while omp_get_max_threads() still says n.
  if (omp_get_max_active_levels() < 1) omp_set_max_active_levels(1);
  const int n = std::clamp(requested, 1, std::max(omp_get_thread_limit(), 1));
  omp_set_num_threads(n);
  return n;
}

}  // namespace crucible
