// Reading a stopped timing worker's call outputs (see call_reader.h).
#include "call_reader.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/uio.h>

#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <thread>

#include "output_sample.h"

namespace crucible {

namespace {

// A thread's state letter from /proc/<pid>/task/<tid>/stat (after the command's closing paren).
char thread_state(const std::filesystem::path& stat) {
  std::ifstream in(stat);
  std::string line;
  std::getline(in, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ? 'X' : line[paren + 2];
}

bool all_stopped(pid_t pid) {
  std::error_code ec;
  const std::filesystem::path tasks = fmt::format("/proc/{}/task", pid);
  for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
    const char s = thread_state(t.path() / "stat");
    if (s != 'T' && s != 't' && s != 'Z' && s != 'X') return false;
  }
  return !ec;
}

// Reads `n` bytes at `addr` of `pid` into `to`; false when any is not readable.
bool read_memory(pid_t pid, uint64_t addr, void* to, size_t n) {
  iovec local{to, n};
  iovec remote{reinterpret_cast<void*>(addr), n};
  return n == 0 || ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

constexpr int kStopWaitMs = 500;

}  // namespace

StoppedWorker::StoppedWorker(pid_t pid) : pid_(pid) {
  if (::kill(pid_, SIGSTOP) != 0) {
    error_ = "it is gone";
    return;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStopWaitMs);
  while (!all_stopped(pid_)) {
    if (std::chrono::steady_clock::now() > until) {
      error_ = fmt::format("a thread of it did not stop within {} ms", kStopWaitMs);
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

StoppedWorker::~StoppedWorker() { ::kill(pid_, SIGCONT); }

std::string read_call_table(pid_t pid, const TurnDone& done, int64_t index,
                            std::vector<CallOutput>& rows) {
  const int64_t per_call = done.entries / done.calls;
  rows.assign(static_cast<size_t>(per_call), CallOutput{});
  const uint64_t at = done.table + static_cast<uint64_t>(index * per_call) * sizeof(CallOutput);
  if (!read_memory(pid, at, rows.data(), rows.size() * sizeof(CallOutput)))
    return fmt::format("its table of call {} does not read at {:#x}", index, at);
  for (size_t o = 0; o < rows.size(); ++o) {
    const CallOutput& r = rows[o];
    if (r.call != rows[0].call)
      return fmt::format("its table names calls {} and {} for one call", rows[0].call, r.call);
    if (r.dtype < 0 || r.dtype >= static_cast<int32_t>(std::size(kAllDTypes)) || r.ndim < 0 ||
        r.ndim > 8)
      return fmt::format("its table's output {} of call {} has dtype {} and {} dims", o, r.call,
                         r.dtype, r.ndim);
    int64_t numel = 1;
    for (int d = 0; d < r.ndim; ++d) {
      if (r.dims[d] < 0 || (r.dims[d] > 0 && numel > (int64_t{1} << 40) / r.dims[d]))
        return fmt::format("its table's output {} of call {} has dim {}", o, r.call, r.dims[d]);
      numel *= r.dims[d];
    }
    if (r.nbytes != static_cast<uint64_t>(numel) * dtype_size(static_cast<DType>(r.dtype)))
      return fmt::format("its table's output {} of call {} says {} bytes for {} elements", o,
                         r.call, r.nbytes, numel);
  }
  return "";
}

std::string read_sampled_output(pid_t pid, const CallOutput& row, size_t output, uint64_t secret,
                                Tensor& out) {
  const auto dtype = static_cast<DType>(row.dtype);
  const size_t size = dtype_size(dtype);
  const auto numel = static_cast<int64_t>(row.nbytes / std::max<size_t>(size, 1));
  const std::vector<int64_t> at = sampled_elements(secret, row.call, output, numel);
  out = Tensor::empty(dtype, {static_cast<int64_t>(at.size())});
  auto* to = static_cast<unsigned char*>(out.raw_data());
  // One read for a whole output; else an element per iovec, IOV_MAX at a time.
  if (static_cast<int64_t>(at.size()) == numel) {
    if (!read_memory(pid, row.addr, to, row.nbytes))
      return fmt::format("output {} of call {} does not read at {:#x}", output, row.call, row.addr);
    return "";
  }
  std::vector<iovec> local, remote;
  for (size_t k = 0; k < at.size(); k += IOV_MAX) {
    local.clear();
    remote.clear();
    size_t bytes = 0;
    for (size_t e = k; e < std::min(at.size(), k + IOV_MAX); ++e) {
      local.push_back({to + e * size, size});
      remote.push_back(
          {reinterpret_cast<void*>(row.addr + static_cast<uint64_t>(at[e]) * size), size});
      bytes += size;
    }
    if (::process_vm_readv(pid, local.data(), local.size(), remote.data(), remote.size(), 0) !=
        static_cast<ssize_t>(bytes))
      return fmt::format("output {} of call {} does not read at {:#x}", output, row.call, row.addr);
  }
  return "";
}

}  // namespace crucible
