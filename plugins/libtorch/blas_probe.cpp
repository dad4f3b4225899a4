// Finds the BLAS behind libtorch (see blas_probe.h) by looking up sgemm_ in the process: the
// library that defines it is the one every at::mm on the BLAS path reaches.
#include "blas_probe.h"

#include <dlfcn.h>

#include <string>

namespace crucible::libtorch {

std::string active_blas() {
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  if (sgemm == nullptr) return "unknown (no sgemm_ in the process)";
  Dl_info info{};
  const std::string file =
      dladdr(sgemm, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "?";
  using ConfigFn = char* (*)();
  if (auto* config = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    return std::string(config()) + " (" + file + ")";
  }
  if (file.find("/blas/") != std::string::npos) return "reference BLAS (" + file + ")";
  return file;
}

std::string openblas_core() {
  using CoreFn = char* (*)();
  auto* core = reinterpret_cast<CoreFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return core != nullptr ? core() : "none";
}

}  // namespace crucible::libtorch
