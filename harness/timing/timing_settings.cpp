// The timing options' table (see timing_settings.h).
#include "timing_settings.h"

#include <fmt/format.h>

namespace crucible {

namespace po = boost::program_options;

const std::vector<TimingOption>& timing_options() {
  static const std::vector<TimingOption> kOptions = {
      {"repeat", "timed repeats per backend", true, &TimingSettings::repeat},
      {"warmup", "warm-up runs per backend", false, &TimingSettings::warmup},
      {"min-sample-ms",
       "performance: each timed sample calls the graph back to back until it lasts this long", true,
       &TimingSettings::min_sample_ms},
      {"min-time-ms",
       "performance: after --repeat samples, keep sampling (interleaved, at most 100 x --repeat "
       "samples) until every backend has spent this long in timed calls; 0: exactly --repeat",
       true, &TimingSettings::min_time_ms},
      {"no-audit",
       "performance: skip auditing the timed outputs (only to measure what the audit costs)", true,
       &TimingSettings::no_audit},
  };
  return kOptions;
}

void add_timing_options(po::options_description& opts, TimingSettings& into) {
  for (const TimingOption& o : timing_options()) {
    std::visit(
        [&](auto member) {
          auto& field = into.*member;
          using T = std::remove_reference_t<decltype(field)>;
          if constexpr (std::is_same_v<T, bool>) {
            opts.add_options()(o.name, po::bool_switch(&field), o.help);
          } else {
            opts.add_options()(o.name, po::value(&field)->default_value(field), o.help);
          }
        },
        o.field);
  }
}

std::vector<std::string> timing_args(const TimingSettings& s) {
  std::vector<std::string> out;
  for (const TimingOption& o : timing_options()) {
    std::visit(
        [&](auto member) {
          const auto& v = s.*member;
          using T = std::remove_cvref_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            if (v) out.push_back(fmt::format("--{}", o.name));
          } else {
            out.push_back(fmt::format("--{}", o.name));
            out.push_back(fmt::format("{}", v));
          }
        },
        o.field);
  }
  return out;
}

}  // namespace crucible
