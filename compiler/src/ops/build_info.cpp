// Library versions for run records (see build_info.h).
#include "crucible/ops/build_info.h"

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

namespace crucible {

std::string library_versions() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{}; fmt {}.{}.{}", v->major, v->minor, v->patch,
                     FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
}

}  // namespace crucible
