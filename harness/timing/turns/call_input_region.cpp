// The timed calls' inputs, written by the parent and read by the worker (see call_input_region.h).
#include "call_input_region.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "crucible/core/error.h"
#include "environment.h"
#include "machine_peaks.h"
#include "turn_channel.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1
#endif

namespace crucible {

CallInputRegion::CallInputRegion(std::vector<Tensor> set_b)
    : set_b_(std::move(set_b)), layout_(set_b_), capacity_(layout_.max_calls()) {
  bytes_ = std::max<size_t>(layout_.slot_bytes(), 1) * static_cast<size_t>(capacity_);
  fd_ = ::memfd_create("crucible-call-inputs", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd_ < 0)
    throw Error(fmt::format("cannot make the calls' inputs: memfd: {}", strerror(errno)));
  void* map = MAP_FAILED;
  if (::ftruncate(fd_, static_cast<off_t>(bytes_)) == 0)
    map = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  // Sealed after the parent's writable mapping exists: every later one, the worker's included,
  // can only read.
  if (map == MAP_FAILED ||
      ::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) !=
          0) {
    const int e = errno;
    if (map != MAP_FAILED) ::munmap(map, bytes_);
    ::close(fd_);
    throw Error(fmt::format("cannot make the calls' inputs ({} bytes): {}", bytes_, strerror(e)));
  }
  map_ = static_cast<std::byte*>(map);
}

CallInputRegion::~CallInputRegion() {
  ::munmap(map_, bytes_);
  ::close(fd_);
}

namespace {

// How a sample of `bytes` of inputs is written. Its worker waits, blocked, and the others wait
// for their turns: every CPU this process may use is free for it (up to 4, each writer at least
// 8 MiB, since a thread costs tens of microseconds). Past the caches only when the block is larger
// than the L3: the calls of smaller ones find their inputs cached, as they did when one thread
// wrote them.
FillWay fill_way(size_t bytes) {
  constexpr size_t kBytesPerWriter = size_t{8} << 20;
  // Read once: every sample writes, and the L3's size takes a few sysfs reads.
  static const int usable = usable_cpus();
  static const int64_t l3 = l3_cache_bytes();
  FillWay way;
  way.threads = static_cast<int>(std::clamp<size_t>(bytes / kBytesPerWriter, 1,
                                                    static_cast<size_t>(std::clamp(usable, 1, 4))));
  way.past_caches = l3 > 0 && bytes > static_cast<size_t>(l3);
  return way;
}

}  // namespace

void CallInputRegion::write(uint64_t secret, int64_t round, int64_t calls) {
  if (calls < 0 || calls > capacity_)
    throw Error(fmt::format("a sample of {} calls: the inputs hold {}", calls, capacity_));
  layout_.fill(set_b_, secret, static_cast<uint64_t>(round * kCallIdStride), calls, map_,
               fill_way(layout_.slot_bytes() * static_cast<size_t>(calls)));
}

CallInputView::CallInputView(int fd, const std::vector<Tensor>& set_b)
    : shapes_(set_b), layout_(set_b) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw Error(fmt::format("no calls' inputs on descriptor {}: {}", fd, strerror(errno)));
  const auto bytes = static_cast<size_t>(st.st_size);
  capacity_ = static_cast<int64_t>(bytes / std::max<size_t>(layout_.slot_bytes(), 1));
  void* map = bytes > 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (map == MAP_FAILED)
    throw Error(fmt::format("cannot map the calls' inputs ({} bytes): {}", bytes, strerror(errno)));
  ::close(fd);
  std::shared_ptr<const void> keep(map, [bytes](const void* p) {
    ::munmap(const_cast<void*>(p), bytes);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  });
  block_ = std::make_shared<Storage>(map, bytes, std::move(keep));
}

std::vector<Tensor> CallInputView::call(int64_t i) const {
  if (i < 0 || i >= capacity_)
    throw Error(fmt::format("call {} of a sample: the inputs hold {}", i, capacity_));
  return layout_.views(shapes_, block_, i);
}

}  // namespace crucible
