// Speed-ups over the peer (see peer.h).
#include "crucible/reports/peer.h"

namespace crucible::reports {

namespace {
bool timed_pass(const ResultRecord& r) {
  return r.mode == "performance" && r.status == Status::kPass && r.speedup && *r.speedup > 0;
}
}  // namespace

std::optional<double> speedup_over_peer(const ResultRecord& r,
                                        const std::vector<ResultRecord>& all) {
  if (!timed_pass(r)) return std::nullopt;
  for (const ResultRecord& p : all) {
    if (p.backend == kPeerBackend && p.suite == r.suite && p.model == r.model && timed_pass(p))
      return *r.speedup / *p.speedup;
  }
  return std::nullopt;
}

bool has_peer(const std::vector<ResultRecord>& all) {
  for (const ResultRecord& r : all) {
    if (r.backend == kPeerBackend && r.mode == "performance") return true;
  }
  return false;
}

}  // namespace crucible::reports
