// Entry point of the crucible CLI: dispatches to a subcommand and turns every error into one line
// on stderr and a non-zero exit status.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "cli.h"
#include "crucible/core/did_you_mean.h"
#include "crucible/core/error.h"
#include "crucible/core/quote.h"
#include "privileges.h"

namespace {
void print_usage() {
  std::cout
      << "usage: crucible <command> [options]   (crucible help <command>, or <command> --help, "
         "for its options; crucible --version)\n\n"
         "A benchmarking and accuracy-regression harness for tensor-graph "
         "compilers.\n\ncommands:\n";
  // The names' column as wide as the longest name, so every summary starts in one column.
  size_t width = 0;
  for (const auto& c : crucible::cli::commands()) width = std::max(width, c.name.size());
  for (const auto& c : crucible::cli::commands())
    std::cout << fmt::format("  {:<{}}  {}\n", c.name, width, c.summary);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace crucible::cli;
  // Error texts carry user input (paths, names, a plugin's exception text): escaped and of bounded
  // length (message_text), each stays the one line the exit codes promise.
  using crucible::escape_controls;
  using crucible::message_text;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    print_usage();
    return argc < 2 ? kExitUsage : kExitOk;
  }
  if (std::string(argv[1]) == "--version" || std::string(argv[1]) == "version") {
    std::cout << version_text();
    return kExitOk;
  }
  std::string name = argv[1];
  // Before any plugin is loaded anywhere: no worker may read or write this process's memory.
  crucible::keep_memory_private(name == "worker");
  std::vector<std::string> args(argv + 2, argv + argc);
  // `crucible help CMD` is `crucible CMD --help`.
  if (name == "help") {
    if (args.empty()) {
      print_usage();
      return kExitOk;
    }
    name = args[0];
    args = {"--help"};
  }
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    try {
      return c.run(args);
    } catch (const po::error& e) {
      std::cerr << fmt::format("crucible {}: {} (see crucible {} --help)\n", name,
                               message_text(e.what(), 4000), name);
      return kExitUsage;
    } catch (const crucible::Error& e) {
      std::cerr << fmt::format("crucible {}: {}\n", name, message_text(e.what(), 4000));
      return kExitUsage;
    } catch (const std::bad_alloc&) {
      std::cerr << fmt::format("crucible {}: out of memory\n", name);
      return kExitFailed;
    } catch (const std::exception& e) {
      std::cerr << fmt::format("crucible {}: internal error: {}\n", name,
                               message_text(e.what(), 4000));
      return kExitFailed;
    }
  }
  std::vector<std::string> names;
  for (const auto& c : commands()) names.push_back(c.name);
  const std::string near = crucible::closest_name(name, names);
  std::cerr << fmt::format("crucible: unknown command '{}'{} (see crucible --help)\n",
                           escape_controls(name),
                           near.empty() ? "" : fmt::format("; did you mean '{}'?", near));
  return kExitUsage;
}
