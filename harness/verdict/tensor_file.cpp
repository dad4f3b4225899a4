// The tensor file format (see tensor_file.h): a magic line, then little-endian u64 counts and
// sizes. Per tensor: defined (u8), dtype (u8), rank (u64), dims (i64 each), bytes (u64), data.
#include "tensor_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>

#include "crucible/core/error.h"
#include "crucible/core/quote.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "crucible-tensors 1\n";
constexpr uint64_t kMaxRank = 64;

void put_u64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A cursor over the file's bytes; every read checks what is left first.
class Reader {
 public:
  Reader(std::string_view bytes, std::string where) : rest_(bytes), where_(std::move(where)) {}

  uint64_t u64(const char* what) {
    need(sizeof(uint64_t), what);
    uint64_t v = 0;
    std::memcpy(&v, rest_.data(), sizeof v);
    rest_.remove_prefix(sizeof v);
    return v;
  }
  uint8_t u8(const char* what) {
    need(1, what);
    const auto v = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return v;
  }
  std::string_view take(uint64_t n, const char* what) {
    need(n, what);
    std::string_view v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return v;
  }
  size_t left() const { return rest_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: {} (at byte {})", where_, what, offset()));
  }

 private:
  void need(uint64_t n, const char* what) const {
    if (n > rest_.size()) {
      fail(fmt::format("{} needs {} bytes, {} left", what, n, rest_.size()));
    }
  }
  size_t offset() const { return total_ - rest_.size(); }
  std::string_view rest_;
  std::string where_;
  size_t total_ = rest_.size();
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
  std::string_view data = r.take(bytes, "tensor data");
  Tensor t = Tensor::empty(dtype, shape);
  if (bytes > 0) std::memcpy(t.raw_data(), data.data(), bytes);
  return t;
}

}  // namespace

void write_tensor_file(const fs::path& path, const TensorGroups& groups) {
  std::string out(kMagic);
  put_u64(out, groups.size());
  for (const auto& group : groups) {
    put_u64(out, group.size());
    for (const Tensor& given : group) {
      out.push_back(given.defined() ? 1 : 0);
      if (!given.defined()) continue;
      const Tensor t = given.contiguous();
      out.push_back(static_cast<char>(t.dtype()));
      put_u64(out, t.shape().size());
      for (int64_t d : t.shape()) put_u64(out, static_cast<uint64_t>(d));
      put_u64(out, t.nbytes());
      if (t.nbytes() > 0) out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
    }
  }
  const fs::path tmp = fs::path(path.string() + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f.flush()) {
      throw Error(fmt::format("{}: cannot write tensors", escape_controls(tmp.string())));
    }
  }
  fs::rename(tmp, path);
}

TensorGroups read_tensor_file(const fs::path& path) {
  const std::string where = escape_controls(path.string());
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot read tensors: no such file", where));
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!std::string_view(bytes).starts_with(kMagic)) {
    throw Error(fmt::format("{}: not a crucible tensor file", where));
  }
  Reader r(std::string_view(bytes).substr(kMagic.size()), where);
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
