// The peer every speed-up is also read against: PyTorch's own eager mode (the libtorch plugin),
// what the users of a tensor compiler run today. crucible's eager stays the denominator of
// `speedup`; this gives the second ratio beside it.
#pragma once

#include <optional>
#include <vector>

#include "crucible/reports/records.h"

namespace crucible::reports {

inline constexpr const char* kPeerBackend = "libtorch";

// r's speed-up over the peer in the same run: r.speedup / the peer's (both are over crucible's
// eager, timed in the same interleaved job). nullopt for anything but a passing performance
// result with a passing peer result of the same suite and model.
std::optional<double> speedup_over_peer(const ResultRecord& r,
                                        const std::vector<ResultRecord>& all);

// Whether `all` holds a performance result of the peer.
bool has_peer(const std::vector<ResultRecord>& all);

}  // namespace crucible::reports
