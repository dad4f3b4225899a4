// Node attributes: an ordered list of name=value pairs (ints, floats, bools, strings, int lists,
// dtypes). Order is kept as written so that printing a parsed graph gives back the same text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "crucible/core/dtype.h"

namespace crucible {

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, DType>;

enum class AttrKind { kInt, kFloat, kBool, kString, kInts, kDType };
std::string_view attr_kind_name(AttrKind k);
AttrKind attr_kind_of(const AttrValue& v);

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items);

  bool has(std::string_view name) const { return find(name) != nullptr; }
  const AttrValue* find(std::string_view name) const;
  void set(std::string name, AttrValue value);  // replaces in place or appends
  bool empty() const { return items_.empty(); }
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& other) const { return items_ == other.items_; }

  // Typed getters: throw Error naming the attribute when missing or of another kind.
  // get_float accepts an int value as well.
  int64_t get_int(std::string_view name) const;
  double get_float(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  const std::vector<int64_t>& get_ints(std::string_view name) const;
  DType get_dtype(std::string_view name) const;

  int64_t get_int_or(std::string_view name, int64_t fallback) const;
  double get_float_or(std::string_view name, double fallback) const;
  bool get_bool_or(std::string_view name, bool fallback) const;
  std::string get_string_or(std::string_view name, std::string fallback) const;
  std::optional<double> get_optional_float(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace crucible
