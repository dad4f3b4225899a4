// TensorProto conversion (see tensor_proto.h). Every size is checked against the bytes actually
// present before a tensor is allocated, so a proto claiming 2^40 elements costs nothing.
#include "tensor_proto.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include "crucible/onnx/import.h"

namespace crucible::onnx {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

std::optional<DType> dtype_of(int32_t t) {
  switch (t) {
    case TensorProto::FLOAT:
      return DType::kF32;
    case TensorProto::DOUBLE:
      return DType::kF64;
    case TensorProto::INT64:
      return DType::kI64;
    case TensorProto::INT32:
      return DType::kI32;
    case TensorProto::UINT8:
      return DType::kU8;
    case TensorProto::BOOL:
      return DType::kBool;
    case TensorProto::BFLOAT16:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

std::string onnx_type_name(int32_t t) {
  if (TensorProto::DataType_IsValid(t)) {
    std::string n = TensorProto::DataType_Name(static_cast<TensorProto::DataType>(t));
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return n;
  }
  return fmt::format("element type {}", t);
}

int64_t checked_numel(const Shape& shape, const std::string& what) {
  constexpr int64_t kMax = int64_t{1} << 40;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw ImportError(fmt::format("{}: negative dim {}", what, d), false);
    if (d != 0 && n > kMax / d)
      throw ImportError(fmt::format("{}: more than 2^40 elements", what), false);
    n *= d;
  }
  return n;
}

namespace {

// Resolves an external-data location inside `base_dir`; anything that escapes it (an absolute
// path, "..", a symlink pointing out) is refused.
fs::path external_path(const std::string& location, const fs::path& base_dir,
                       const std::string& what) {
  const fs::path loc(location);
  if (location.empty() || loc.is_absolute())
    throw ImportError(
        fmt::format("{}: external data path '{}' must be relative to the model's folder", what,
                    location),
        false);
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(base_dir.empty() ? fs::path(".") : base_dir, ec);
  const fs::path full = fs::weakly_canonical(base / loc, ec);
  auto [b, f] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (ec || b != base.end())
    throw ImportError(
        fmt::format("{}: external data path '{}' leaves the model's folder", what, location),
        false);
  return full;
}

// Where a tensor's external bytes are, once every claim about them is checked against the file.
struct ExternalSlice {
  fs::path path;
  std::string location;
  int64_t offset = 0;
};

ExternalSlice locate_external(const TensorProto& t, const fs::path& base_dir,
                              const std::string& what, size_t bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    auto number = [&](const std::string& v) {
      char* end = nullptr;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || x < 0)
        throw ImportError(fmt::format("{}: external data {}='{}' is not a size", what, kv.key(), v),
                          false);
      return static_cast<int64_t>(x);
    };
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = number(kv.value());
    if (kv.key() == "length") length = number(kv.value());
  }
  const fs::path path = external_path(location, base_dir, what);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw ImportError(fmt::format("{}: external data file '{}' is missing", what, location), false);
  if (length >= 0 && static_cast<size_t>(length) != bytes)
    throw ImportError(
        fmt::format("{}: external data length {} but the type needs {} bytes", what, length, bytes),
        false);
  if (static_cast<int64_t>(bytes) > st.st_size || offset > st.st_size - static_cast<int64_t>(bytes))
    throw ImportError(fmt::format("{}: external data '{}' holds {} bytes, needs {} from offset {}",
                                  what, location, st.st_size, bytes, offset),
                      false);
  return {path, location, offset};
}

void read_external(const ExternalSlice& slice, const std::string& what, void* dst, size_t bytes) {
  std::ifstream in(slice.path, std::ios::binary);
  in.seekg(slice.offset);
  if (!in.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes)))
    throw ImportError(fmt::format("{}: cannot read external data '{}'", what, slice.location),
                      false);
}

// How many values the typed field that carries `dtype` holds (ONNX packs the small integer
// types, bool and bf16 into int32_data).
int64_t typed_value_count(const TensorProto& t, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return t.float_data_size();
    case DType::kF64:
      return t.double_data_size();
    case DType::kI64:
      return t.int64_data_size();
    default:
      return t.int32_data_size();
  }
}

template <typename Src, typename Dst>
void copy_field(const google::protobuf::RepeatedField<Src>& src, Dst* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[static_cast<int>(i)]);
}

}  // namespace

Tensor tensor_from_proto(const TensorProto& t, const fs::path& base_dir, const std::string& what) {
  auto dtype = dtype_of(t.data_type());
  if (!dtype)
    throw ImportError(
        fmt::format("{}: dtype {} not supported", what, onnx_type_name(t.data_type())), true);
  if (t.has_segment())
    throw ImportError(fmt::format("{}: segmented tensors not supported", what), true);
  Shape shape(t.dims().begin(), t.dims().end());
  const int64_t n = checked_numel(shape, what);
  const size_t bytes = static_cast<size_t>(n) * dtype_size(*dtype);
  const bool external = t.data_location() == TensorProto::EXTERNAL;
  // Sizes are checked before allocating, whichever way the data comes: a claim the data does not
  // back is refused first.
  std::optional<ExternalSlice> slice;
  if (external) {
    slice = locate_external(t, base_dir, what, bytes);
  } else if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes)
      throw ImportError(fmt::format("{}: {} bytes of data for {} elements of {}", what,
                                    t.raw_data().size(), n, dtype_name(*dtype)),
                        false);
  } else if (const int64_t values = typed_value_count(t, *dtype); values != n) {
    throw ImportError(fmt::format("{}: {} values for {} elements", what, values, n), false);
  }
  Tensor out = Tensor::empty(*dtype, shape);
  if (slice) {
    read_external(*slice, what, out.raw_data(), bytes);
  } else if (t.has_raw_data()) {
    std::memcpy(out.raw_data(), t.raw_data().data(), bytes);
  } else {
    switch (*dtype) {
      case DType::kF32:
        copy_field(t.float_data(), out.data<float>(), n);
        break;
      case DType::kF64:
        copy_field(t.double_data(), out.data<double>(), n);
        break;
      case DType::kI64:
        copy_field(t.int64_data(), out.data<int64_t>(), n);
        break;
      case DType::kI32:
        copy_field(t.int32_data(), out.data<int32_t>(), n);
        break;
      case DType::kU8:
        copy_field(t.int32_data(), out.data<uint8_t>(), n);
        break;
      case DType::kBool:
        copy_field(t.int32_data(), out.data<bool>(), n);
        break;
      case DType::kBF16:
        copy_field(t.int32_data(), static_cast<uint16_t*>(out.raw_data()), n);
        break;
    }
  }
  return out;
}

void release_data(TensorProto& t) {
  std::string().swap(*t.mutable_raw_data());
  t.clear_raw_data();
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_int64_data();
  t.mutable_float_data()->Clear();
  // RepeatedField keeps its capacity after Clear; swapping with an empty one frees it.
  google::protobuf::RepeatedField<float>().Swap(t.mutable_float_data());
  google::protobuf::RepeatedField<int64_t>().Swap(t.mutable_int64_data());
}

}  // namespace crucible::onnx
