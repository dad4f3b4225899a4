// Attribute list with typed access.
#include "crucible/ir/attrs.h"

#include <fmt/format.h>

#include "crucible/core/error.h"

namespace crucible {

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kBool:
      return "bool";
    case AttrKind::kString:
      return "string";
    case AttrKind::kInts:
      return "int list";
    case AttrKind::kDType:
      return "dtype";
  }
  return "?";
}

AttrKind attr_kind_of(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [k, v] : items_) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Attrs::set(std::string name, AttrValue value) {
  for (auto& [k, v] : items_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
}

namespace {
template <typename T>
const T& get_as(const Attrs& a, std::string_view name, AttrKind kind) {
  const AttrValue* v = a.find(name);
  if (v == nullptr) throw Error(fmt::format("missing attribute '{}'", name));
  if (const T* p = std::get_if<T>(v)) return *p;
  throw Error(fmt::format("attribute '{}' must be {}, got {}", name, attr_kind_name(kind),
                          attr_kind_name(attr_kind_of(*v))));
}
}  // namespace

int64_t Attrs::get_int(std::string_view name) const {
  return get_as<int64_t>(*this, name, AttrKind::kInt);
}

double Attrs::get_float(std::string_view name) const {
  const AttrValue* v = find(name);
  if (v != nullptr) {
    if (const int64_t* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  }
  return get_as<double>(*this, name, AttrKind::kFloat);
}

bool Attrs::get_bool(std::string_view name) const {
  return get_as<bool>(*this, name, AttrKind::kBool);
}

const std::string& Attrs::get_string(std::string_view name) const {
  return get_as<std::string>(*this, name, AttrKind::kString);
}

const std::vector<int64_t>& Attrs::get_ints(std::string_view name) const {
  return get_as<std::vector<int64_t>>(*this, name, AttrKind::kInts);
}

DType Attrs::get_dtype(std::string_view name) const {
  return get_as<DType>(*this, name, AttrKind::kDType);
}

int64_t Attrs::get_int_or(std::string_view name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}
double Attrs::get_float_or(std::string_view name, double fallback) const {
  return has(name) ? get_float(name) : fallback;
}
bool Attrs::get_bool_or(std::string_view name, bool fallback) const {
  return has(name) ? get_bool(name) : fallback;
}
std::string Attrs::get_string_or(std::string_view name, std::string fallback) const {
  return has(name) ? get_string(name) : fallback;
}
std::optional<double> Attrs::get_optional_float(std::string_view name) const {
  if (!has(name)) return std::nullopt;
  return get_float(name);
}

}  // namespace crucible
