// Spelling of attribute values in .graph text (see text_syntax.h).
#include "text_syntax.h"

#include <fmt/format.h>

#include <cmath>

#include "crucible/core/quote.h"

namespace crucible {

std::string quote_string(std::string_view s) { return quote(s, QuoteStyle::kGraph); }

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_attr_value(const AttrValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return fmt::format("{}", i); }
    std::string operator()(double d) const { return format_float(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::string& s) const { return quote_string(s); }
    std::string operator()(const std::vector<int64_t>& l) const {
      return fmt::format("[{}]", fmt::join(l, ", "));
    }
    std::string operator()(DType t) const { return std::string(dtype_name(t)); }
  };
  return std::visit(Visitor{}, v);
}

}  // namespace crucible
