// Lexical pieces of the .graph format shared by the printer and the parser: how attribute values
// and strings are spelled, so that what one writes the other reads back exactly.
#pragma once

#include <string>
#include <string_view>

#include "crucible/ir/attrs.h"

namespace crucible {

std::string quote_string(std::string_view s);  // "a\"b" with \\, \", \n, \t escapes
std::string format_float(double v);  // shortest round-trip, always with '.', 'e', inf or nan
std::string format_attr_value(const AttrValue& v);

}  // namespace crucible
