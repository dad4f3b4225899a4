// The crucible CLI's subcommand table and the helpers every subcommand shares: option parsing with
// Boost.program_options, --help text, and the exit codes.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend_env.h"

namespace crucible {
struct RunConfig;
struct LaunchOptions;
}  // namespace crucible

namespace crucible::cli {

namespace po = boost::program_options;

// Exit codes: 0 success, 1 the job ran but something failed (a model did not pass), 2 bad usage or
// input (unknown flag, malformed graph, missing file, broken plugin).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

struct Command {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

const std::vector<Command>& commands();

// `crucible --version`: the version, the plugin ABI, and how this binary was built.
std::string version_text();

// Parses `args` against `options` (plus --help); positional names map to options in order.
// Returns false after printing help when --help was given. Throws po::error on bad usage.
bool parse(const std::string& command, const std::string& usage,
           const po::options_description& options,
           const po::positional_options_description& positional,
           const std::vector<std::string>& args, po::variables_map& vm);

// --memory-limit's help, for a run's workers or a minify's candidates ("worker").
std::string memory_limit_help(const std::string& who);
// --memory-limit checked against what this machine can enforce: -1 becomes 80% of RAM, a value
// below the floor a worker needs is refused (po::error). Returns the limit in MB (0: none).
int64_t checked_memory_limit(int64_t mb);

// Repeated, comma-separated list options ("a,b" "c") as one list, empty items dropped.
std::vector<std::string> split_commas(const std::vector<std::string>& items);

// Parses repeated -c key=value options; throws po::error naming a malformed one.
std::map<std::string, std::string> parse_config(const std::vector<std::string>& pairs);

// `crucible run`'s options (and `extra`, the caller's own) parsed into `cfg` and `launch`;
// false after printing --help. Shared by run and calibrate; `refused` names run options the
// caller sets itself, so giving one is an error rather than a value silently overwritten, and
// `preset` sets them (after parsing, before the options are checked against mode and backends).
bool parse_run_options(const std::string& command, const std::string& usage,
                       const po::options_description& extra, const std::vector<std::string>& args,
                       RunConfig& cfg, LaunchOptions& launch,
                       const std::vector<std::string>& refused = {},
                       const std::function<void(RunConfig&)>& preset = {});
// What a run in this process needs before it starts: the fallback CPU affinity, and the note
// when --memory-limit can only limit address space here.
void prepare_local_run(const RunConfig& cfg);

// --backend-env's specs parsed, a bad one a po::error (exit 2 with its line).
BackendEnv parsed_backend_env(const std::vector<std::string>& specs);
// ... for a command that runs one backend (`backend`, as --backend names it): that backend's
// changes; a spec naming another backend is a po::error too.
EnvChanges one_backend_env(const std::vector<std::string>& specs, const std::string& backend);

int run_graph_command(const std::vector<std::string>& args);
int list_command(const std::vector<std::string>& args);
int run_command(const std::vector<std::string>& args);
int worker_command(const std::vector<std::string>& args);
int models_command(const std::vector<std::string>& args);
int export_command(const std::vector<std::string>& args);
int import_command(const std::vector<std::string>& args);
int calibrate_command(const std::vector<std::string>& args);
int minify_command(const std::vector<std::string>& args);
int repro_command(const std::vector<std::string>& args);
int bisect_command(const std::vector<std::string>& args);
int bisect_step_command(const std::vector<std::string>& args);
int runs_command(const std::vector<std::string>& args);
int results_command(const std::vector<std::string>& args);
int history_command(const std::vector<std::string>& args);
int kernels_command(const std::vector<std::string>& args);
int query_command(const std::vector<std::string>& args);
int regressions_command(const std::vector<std::string>& args);
int compare_command(const std::vector<std::string>& args);
int report_command(const std::vector<std::string>& args);
int export_results_command(const std::vector<std::string>& args);
int check_expected_command(const std::vector<std::string>& args);
int db_command(const std::vector<std::string>& args);

}  // namespace crucible::cli
