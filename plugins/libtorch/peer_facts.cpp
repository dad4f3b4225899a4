// The facts of peer_facts.h. Which op classes reach oneDNN is observed, not assumed: a small
// conv2d, linear and batched matmul run under PyTorch's profiler and the ops they dispatched to are
// looked at (1.13 sends f32 convolutions to oneDNN by shape heuristics, and f32 GEMMs to the BLAS).
#include "peer_facts.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/core/InferenceMode.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>
#include <omp.h>

#include <cstdlib>
#include <functional>
#include <set>

#include "blas_probe.h"
#include "jit_profile.h"

namespace crucible::libtorch {

namespace {

// The run's reason for this BLAS core, as the worker's environment held it when this plugin
// loaded (the variable is set only while the plugin loads).
const std::string kBlasChoice = [] {
  const char* v = std::getenv("CRUCIBLE_BLAS_CORE_CHOICE");
  return std::string(v != nullptr ? v : "");
}();

// The text after `key` in at::show_config()'s lines, up to the line's end.
std::string config_field(const std::string& key) {
  const std::string config = at::show_config();
  const size_t at = config.find(key);
  if (at == std::string::npos) return "?";
  const size_t from = at + key.size();
  return config.substr(from, config.find('\n', from) - from);
}

std::string onednn_version() {
  struct Version {
    int major, minor, patch;
    const char* hash;
  };
  void* lib = dlopen("libdnnl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  using Fn = const Version* (*)();
  auto* fn = lib != nullptr ? reinterpret_cast<Fn>(dlsym(lib, "dnnl_version")) : nullptr;
  std::string out = config_field("MKL-DNN v");
  if (fn != nullptr) {
    const Version* v = fn();
    out = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
  }
  if (lib != nullptr) dlclose(lib);
  return out;
}

// Every op name `fn` dispatched to, nested ones included.
std::set<std::string> ops_dispatched(const std::function<void()>& fn) {
  std::set<std::string> out;
  for (const auto& list : profile_events(fn)) {
    for (const auto& e : list) {
      if (e.kind() == torch::autograd::profiler::EventKind::PushRange) out.insert(e.name());
    }
  }
  return out;
}

std::string reaches_onednn(const std::function<void()>& fn) {
  try {
    for (const std::string& op : ops_dispatched(fn)) {
      if (op.find("mkldnn") != std::string::npos) return "yes";
    }
    return "no";
  } catch (const std::exception&) {
    return "?";
  }
}

std::string onednn_use() {
  c10::InferenceMode inference;
  const auto f = at::TensorOptions().dtype(at::kFloat);
  // Batch 2: 1.13's heuristic keeps small batch-1 convolutions in its own kernels.
  const at::Tensor image = at::ones({2, 16, 14, 14}, f), filter = at::ones({16, 16, 3, 3}, f);
  const at::Tensor x = at::ones({64, 64}, f), w = at::ones({64, 64}, f);
  const at::Tensor a = at::ones({4, 64, 64}, f);
  return fmt::format(
      "conv2d {}, linear {}, matmul {}", reaches_onednn([&] { at::conv2d(image, filter); }),
      reaches_onednn([&] { at::linear(x, w); }), reaches_onednn([&] { at::matmul(a, a); }));
}

// The allocator: a preloaded jemalloc or tcmalloc is in the process's objects; else glibc's.
std::string allocator() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        for (const char* lib : {"jemalloc", "tcmalloc"}) {
          if (name.find(lib) != std::string::npos) {
            *static_cast<std::string*>(out) = lib;
            return 1;
          }
        }
        return 0;
      },
      &found);
  return found.empty() ? "glibc malloc" : found;
}

}  // namespace

// Intra-op threads are OpenMP's as the worker set them (the plugin sets the run's --threads before
// each run). ATen's first parallel call sets OpenMP's threads to its own default, the physical
// cores (1 on a 2-vCPU VM), so they are put back after the small ops run here, or the backends
// loaded beside this one would run on ATen's default.
std::string peer_facts() {
  const int omp_threads = omp_get_max_threads();
  std::string out = fmt::format(
      "ATen {}; oneDNN {} ({}); BLAS {}; BLAS core {}; threads intra {}, inter {}; allocator {}",
      config_field("CPU capability usage: "), onednn_version(), onednn_use(), active_blas(),
      openblas_core(), omp_threads, at::get_num_interop_threads(), allocator());
  omp_set_num_threads(omp_threads);
  if (!kBlasChoice.empty()) out += "; blas_core " + kBlasChoice;
  return out;
}

}  // namespace crucible::libtorch
