// The tensor file format (see tensor_file.h): a magic line, then little-endian u64 counts and
// sizes. Per tensor: defined (u8), dtype (u8), rank (u64), dims (i64 each), bytes (u64), zeros to
// the next multiple of 64 bytes of the file, data (so a mapping of the file holds it aligned).
#include "tensor_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "crucible/core/error.h"
#include "crucible/core/quote.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "crucible-tensors 2\n";
constexpr uint64_t kMaxRank = 64;

// The zeros before a tensor's data at file offset `at`.
uint64_t padding(uint64_t at) {
  return (Storage::kAlignment - at % Storage::kAlignment) % Storage::kAlignment;
}

// The file mapped copy-on-write: the tensors read borrow its pages, so the outputs of a large
// model are page cache the kernel may drop and read again, not a copy in the parent's anonymous
// memory (a full-size gpt2 training step's outputs and references reached 9.8 GB, and the OOM
// killer took the run). Private: a write lands in a copy, never in the file.
class Mapping {
 public:
  Mapping(int fd, uint64_t size) : size_(size) {
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED)
      data_ = static_cast<char*>(p);
    else
      error_ = errno;
  }
  ~Mapping() {
    if (data_) ::munmap(data_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  bool ok() const { return size_ == 0 || data_ != nullptr; }
  char* data() const { return data_; }
  int error() const { return error_; }

 private:
  char* data_ = nullptr;
  int error_ = 0;
  uint64_t size_ = 0;
};

// A cursor over the mapped file; every read checks what is left first, so no size the file claims
// is taken before the bytes it needs are known to be there.
class Reader {
 public:
  Reader(std::shared_ptr<Mapping> map, uint64_t size, std::string where)
      : map_(std::move(map)), left_(size), size_(size), where_(std::move(where)) {}

  uint64_t u64(const char* what) {
    uint64_t v = 0;
    read(&v, sizeof v, what);
    return v;
  }
  uint8_t u8(const char* what) {
    uint8_t v = 0;
    read(&v, 1, what);
    return v;
  }
  void read(void* into, uint64_t n, const char* what) {
    if (n > 0) std::memcpy(into, skip(n, what), n);
  }
  // The next `n` bytes, in the mapping, passed.
  const char* skip(uint64_t n, const char* what) {
    if (n > left_) fail(fmt::format("{} needs {} bytes, {} left", what, n, left_));
    const char* at = map_->data() + (size_ - left_);
    left_ -= n;
    return at;
  }
  // The next `bytes` as a tensor's storage, borrowed from the mapping.
  std::shared_ptr<Storage> borrow(uint64_t bytes, const char* what) {
    char* at = const_cast<char*>(skip(bytes, what));
    return std::make_shared<Storage>(at, bytes, map_);
  }
  uint64_t offset() const { return size_ - left_; }
  uint64_t left() const { return left_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: {} (at byte {})", where_, what, size_ - left_));
  }

 private:
  std::shared_ptr<Mapping> map_;
  uint64_t left_, size_;
  std::string where_;
};

Tensor read_tensor(Reader& r) {
  const uint8_t defined = r.u8("a tensor's defined flag");
  if (defined == 0) return Tensor();
  if (defined != 1) r.fail(fmt::format("defined flag {} is neither 0 nor 1", defined));
  const uint8_t code = r.u8("a dtype");
  if (code >= std::size(kAllDTypes)) r.fail(fmt::format("unknown dtype code {}", code));
  const DType dtype = kAllDTypes[code];
  const uint64_t rank = r.u64("a rank");
  if (rank > kMaxRank) r.fail(fmt::format("rank {} over {}", rank, kMaxRank));
  Shape shape;
  uint64_t elements = 1;
  for (uint64_t d = 0; d < rank; ++d) {
    const auto n = static_cast<int64_t>(r.u64("a dimension"));
    if (n < 0) r.fail(fmt::format("negative dimension {}", n));
    // Every element takes at least a byte of the file, so no honest size exceeds what is left.
    if (n > 0 && elements > r.left() / static_cast<uint64_t>(n)) {
      r.fail(fmt::format("dimension {} makes more elements than the file holds", n));
    }
    elements *= static_cast<uint64_t>(std::max<int64_t>(n, 1));
    shape.push_back(n);
  }
  const uint64_t bytes = r.u64("a data size");
  const uint64_t want = static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype);
  if (bytes != want) {
    r.fail(fmt::format("{} bytes of data for {}{}, which takes {}", bytes, dtype_name(dtype),
                       fmt::join(shape, ","), want));
  }
  const uint64_t pad = padding(r.offset());
  const char* zeros = r.skip(pad, "the padding before tensor data");
  if (std::any_of(zeros, zeros + pad, [](char c) { return c != 0; }))
    r.fail("padding before tensor data that is not zeros");
  if (bytes > r.left()) r.fail(fmt::format("tensor data needs {} bytes, {} left", bytes, r.left()));
  return Tensor::over(r.borrow(bytes, "tensor data"), 0, dtype, shape);
}

}  // namespace

TensorFileWriter::TensorFileWriter(fs::path path)
    : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_) fail();
  bytes(kMagic.data(), kMagic.size());
  u64(0);  // the group count, written by finish()
}

TensorFileWriter::~TensorFileWriter() {
  if (!file_) return;
  std::fclose(file_);
  std::error_code ignored;
  fs::remove(tmp_, ignored);  // never finished: no reader sees half a file
}

// Writes straight from each tensor's memory: the outputs of a large model are hundreds of MB,
// and a copy into one buffer first doubled the time of the hand-off.
void TensorFileWriter::add(const std::vector<Tensor>& group) {
  u64(group.size());
  for (const Tensor& given : group) {
    u8(given.defined() ? 1 : 0);
    if (!given.defined()) continue;
    const Tensor t = given.contiguous();
    u8(static_cast<uint8_t>(t.dtype()));
    u64(t.shape().size());
    for (int64_t d : t.shape()) u64(static_cast<uint64_t>(d));
    u64(t.nbytes());
    static constexpr char kZeros[Storage::kAlignment] = {};
    bytes(kZeros, padding(at_));
    bytes(t.raw_data(), t.nbytes());
  }
  ++groups_;
}

// A failure leaves the half file to the destructor, which removes it.
void TensorFileWriter::finish() {
  if (!ok_ || std::fseek(file_, static_cast<long>(kMagic.size()), SEEK_SET) != 0) fail();
  u64(groups_);
  if (!ok_ || std::fflush(file_) != 0) fail();
  std::fclose(file_);
  file_ = nullptr;
  fs::rename(tmp_, path_);
}

void TensorFileWriter::bytes(const void* p, size_t n) {
  ok_ = ok_ && (n == 0 || std::fwrite(p, 1, n, file_) == n);
  at_ += n;
}

void TensorFileWriter::fail() const {
  throw Error(fmt::format("{}: cannot write tensors", escape_controls(tmp_.string())));
}

void write_tensor_file(const fs::path& path, const TensorGroups& groups) {
  TensorFileWriter w(path);
  for (const auto& group : groups) w.add(group);
  w.finish();
}

TensorGroups read_tensor_file(const fs::path& path) {
  const std::string where = escape_controls(path.string());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot read tensors: {}", where, std::strerror(errno)));
  struct stat st {};
  const bool is_file = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const auto size = static_cast<uint64_t>(is_file ? st.st_size : 0);
  auto map = std::make_shared<Mapping>(fd, size);
  ::close(fd);  // the mapping keeps the pages
  if (!is_file) throw Error(fmt::format("{}: cannot read tensors: not a regular file", where));
  if (!map->ok())
    throw Error(fmt::format("{}: cannot map tensors: {}", where, std::strerror(map->error())));
  Reader r(std::move(map), size, where);
  std::string magic(kMagic.size(), '\0');
  if (size < kMagic.size()) throw Error(fmt::format("{}: not a crucible tensor file", where));
  r.read(magic.data(), magic.size(), "the magic line");
  if (magic != kMagic) throw Error(fmt::format("{}: not a crucible tensor file", where));
  const uint64_t ngroups = r.u64("the group count");
  if (ngroups > r.left()) r.fail(fmt::format("{} groups in a file this short", ngroups));
  TensorGroups groups;
  for (uint64_t g = 0; g < ngroups; ++g) {
    const uint64_t n = r.u64("a group's tensor count");
    if (n > r.left()) r.fail(fmt::format("{} tensors in a file this short", n));
    std::vector<Tensor> group;
    for (uint64_t i = 0; i < n; ++i) group.push_back(read_tensor(r));
    groups.push_back(std::move(group));
  }
  if (r.left() != 0) r.fail(fmt::format("{} bytes after the last tensor", r.left()));
  return groups;
}

}  // namespace crucible
