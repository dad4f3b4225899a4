// The oneDNN plumbing every oneDNN-backed kernel shares: one CPU engine, a stream and a scratchpad
// per thread (so one primitive may run on several threads at once), and layout names for dumps.
#pragma once

#include <cstddef>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

namespace crucible::dnnl_rt {

dnnl::engine& cpu_engine();
// oneDNN does not promise that one stream may be used from several threads; a CPU stream is a
// cheap handle, so each thread keeps its own.
dnnl::stream& thread_stream();
// Scratch memory of at least `bytes`, owned by the calling thread (for primitives created with
// scratchpad_mode::user). Valid until the thread's next call.
void* thread_scratchpad(size_t bytes);
// Runs `primitive` on the calling thread's stream with a scratchpad of `scratch_md`'s size added
// to `args`, and waits for it.
void execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory>& args,
             const dnnl::memory::desc& scratch_md);

// While a SerialThreads(true) lives, OpenMP's max threads on this thread is 1. oneDNN fixes most
// primitives' thread count when they are created (and keys its primitive cache by it), while its
// GEMM sizes its threads when it runs: a primitive both created and run in such a scope stays on
// the calling thread, for work too small to repay a fork (a 10x10 linear took 1.4 us on one
// thread, 3.1 us on two). SerialThreads(false) does nothing.
class SerialThreads {
 public:
  explicit SerialThreads(bool serial);
  ~SerialThreads();
  SerialThreads(const SerialThreads&) = delete;
  SerialThreads& operator=(const SerialThreads&) = delete;

 private:
  int saved_threads_ = 0;  // 0: nothing to restore
};

// Is this implementation oneDNN's reference (slow, unvectorized) kernel?
bool is_reference(const char* impl);
// Does a memory descriptor hold a blocked layout (inner blocks, such as nChw16c)?
bool is_blocked(const dnnl::memory::desc& md);
// oneDNN's name for the layout of dims named `letters`: outer dims by decreasing stride,
// upper-case when also blocked, then the inner blocks ("OIw8i8o", "aBcd16b").
std::string layout_name(const dnnl::memory::desc& md, std::string_view letters);

}  // namespace crucible::dnnl_rt
