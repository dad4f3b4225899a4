// Test helpers for codegen's chain layouts: options that pick one (chain_layout=nhwc|nchw8c), and
// an expectation on the layouts schedule.txt prints for given steps.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <span>
#include <string>
#include <utility>

#include "crucible/plugin_api.h"

namespace crucible::testing {

inline plugin::Options ChainOptions(const std::string& chain) {
  plugin::Options o;
  o.config["chain_layout"] = chain;
  return o;
}

// The name the schedule prints for `chain`.
inline std::string ChainName(const std::string& chain) {
  return chain == "nhwc" ? "nhwc" : "nChw8c";
}

// Every "(inputs) -> output" step of `steps` (a regex) has `layout` in the schedule, with "C"
// standing for the chain's layout name.
inline void ExpectLayouts(const std::string& sched, const std::string& chain,
                          std::span<const std::pair<const char*, const char*>> steps) {
  for (const auto& [io, layout] : steps) {
    const std::string want =
        std::regex_replace(std::string(layout), std::regex("C"), ChainName(chain));
    EXPECT_TRUE(
        std::regex_search(sched, std::regex(std::string(io) + "[^\n]* layout " + want + "\n")))
        << chain << ": " << io << " " << want << "\n"
        << sched;
  }
}

}  // namespace crucible::testing
