// The shared oneDNN engine, per-thread streams and scratchpads, and layout names (see
// dnnl_runtime.h).
#include "dnnl_runtime.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace crucible::dnnl_rt {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

void* thread_scratchpad(size_t bytes) {
  thread_local std::unique_ptr<void, FreeDeleter> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    buffer.reset(std::aligned_alloc(64, rounded));
    if (!buffer) {
      capacity = 0;
      throw std::bad_alloc();
    }
    capacity = rounded;
  }
  return buffer.get();
}

void execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory>& args,
             const dnnl::memory::desc& scratch_md) {
  if (const size_t bytes = scratch_md.get_size(); bytes > 0) {
    args.insert_or_assign(DNNL_ARG_SCRATCHPAD,
                          dnnl::memory(scratch_md, cpu_engine(), thread_scratchpad(bytes)));
  }
  dnnl::stream& stream = thread_stream();
  primitive.execute(stream, args);
  stream.wait();
}

SerialThreads::SerialThreads(bool serial) {
  if (serial && omp_get_max_threads() > 1) {
    saved_threads_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
}

SerialThreads::~SerialThreads() {
  if (saved_threads_ > 0) omp_set_num_threads(saved_threads_);
}

bool is_reference(const char* impl) { return std::string_view(impl).starts_with("ref"); }

bool is_blocked(const dnnl::memory::desc& md) {
  return md.data.format_kind == dnnl_blocked && md.data.format_desc.blocking.inner_nblks > 0;
}

std::string layout_name(const dnnl::memory::desc& md, std::string_view letters) {
  const auto& d = md.data;
  const auto& blk = d.format_desc.blocking;
  std::vector<int> order(d.ndims);
  for (int i = 0; i < d.ndims; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  std::string name;
  for (int i : order) {
    bool blocked = false;
    for (int b = 0; b < blk.inner_nblks; ++b) blocked |= blk.inner_idxs[b] == i;
    const char c = letters[i];
    name += blocked ? static_cast<char>(c - 'a' + 'A') : c;
  }
  for (int b = 0; b < blk.inner_nblks; ++b) {
    name += fmt::format("{}{}", blk.inner_blks[b], letters[blk.inner_idxs[b]]);
  }
  return name;
}

}  // namespace crucible::dnnl_rt
