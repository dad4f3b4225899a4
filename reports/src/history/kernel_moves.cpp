// Kernel attribution of a timing change (see kernel_moves.h).
#include "kernel_moves.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "sqlite_db.h"

namespace crucible::reports {

namespace {

// Per-call time of each kernel of a result, in microseconds.
std::map<std::string, double> kernel_us(sqlite3* db, int64_t result_id) {
  Statement q(db, "SELECT name, calls, total_ns FROM kernels WHERE result_id = ?");
  q.bind(1, result_id);
  std::map<std::string, double> out;
  while (q.step()) {
    out[q.text(0)] = static_cast<double>(q.int64(2)) / 1e3 / std::max<int64_t>(q.int64(1), 1);
  }
  return out;
}

}  // namespace

std::string moved_kernels(sqlite3* db, int64_t before, int64_t after) {
  const auto a = kernel_us(db, before), b = kernel_us(db, after);
  std::vector<std::pair<double, std::string>> moved;
  for (const auto& [name, us] : b) {
    const auto it = a.find(name);
    moved.push_back({us - (it == a.end() ? 0.0 : it->second), name});
  }
  for (const auto& [name, us] : a) {
    if (!b.contains(name)) moved.push_back({-us, name});
  }
  std::sort(moved.begin(), moved.end(),
            [](const auto& x, const auto& y) { return std::abs(x.first) > std::abs(y.first); });
  std::string out;
  for (size_t i = 0; i < moved.size() && i < 3; ++i) {
    out += fmt::format("{}{} {:+.1f} us", i ? ", " : "", moved[i].second, moved[i].first);
  }
  return out;
}

}  // namespace crucible::reports
