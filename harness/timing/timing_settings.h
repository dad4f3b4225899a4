// The run's timing options, declared once: the fields a timing worker is told, and one table of
// their options that run's parser, the worker's parser and the worker's argv are all made from.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <variant>
#include <vector>

namespace crucible {

struct TimingSettings {
  int repeat = 10;             // timed samples per backend (at least)
  int warmup = 3;              // untimed calls first (accuracy runs warm up too)
  double min_sample_ms = 1.0;  // a timed sample calls the graph until it lasts this long
  double min_time_ms = 200;    // samples past `repeat` until each backend was timed this long
  bool no_audit = false;       // time without the output audit (to measure its cost)
};

struct TimingOption {
  const char* name;
  const char* help;
  bool timing_only;  // means nothing without --mode performance or both
  std::variant<int TimingSettings::*, double TimingSettings::*, bool TimingSettings::*> field;
};

const std::vector<TimingOption>& timing_options();

// Adds each option to `opts`, bound to its field of `into`, the field's value as the default.
void add_timing_options(boost::program_options::options_description& opts, TimingSettings& into);

// `--name value` for each option (a switch only when on): what the worker parses back.
std::vector<std::string> timing_args(const TimingSettings& s);

}  // namespace crucible
