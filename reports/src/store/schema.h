// The store's schema as an ordered list of migrations: migration k takes the database from
// version k to k+1. Append new migrations; never edit one that has shipped.
#pragma once

#include <string_view>
#include <vector>

namespace crucible::reports {

const std::vector<std::string_view>& migrations();

}  // namespace crucible::reports
