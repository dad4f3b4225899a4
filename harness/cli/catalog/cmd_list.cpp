// `crucible list ops|backends`: what the op registry holds and which plugins the search path finds.
#include <fmt/format.h>

#include <iostream>
#include <map>

#include "cli.h"
#include "crucible/core/quote.h"
#include "crucible/ir/op_registry.h"
#include "crucible/plugin_loader.h"

namespace crucible::cli {

int list_command(const std::vector<std::string>& args) {
  po::options_description opts("list options");
  std::string what;
  std::vector<std::string> plugin_paths;
  opts.add_options()("what", po::value(&what)->required(), "ops | backends")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin directories");
  po::positional_options_description pos;
  pos.add("what", 1);
  po::variables_map vm;
  if (!parse("list", "ops|backends [--plugin-path DIR]", opts, pos, args, vm)) return kExitOk;
  if (what == "ops") {
    for (const std::string& name : OpRegistry::global().names()) std::cout << name << "\n";
    return kExitOk;
  }
  if (what == "backends") {
    // --backends NAME loads crucible_backend_NAME.so (the first in the search path): the file's
    // name is what a run asks for, whatever name the plugin reports for itself.
    int status = kExitOk;
    std::map<std::string, std::vector<std::string>> files_of;  // reported name -> load names
    for (const auto& path : list_plugins(plugin_search_path(plugin_paths))) {
      const std::string name = backend_name_of(path);
      try {
        auto loaded = load_plugin(path);
        auto info = loaded->backend().info();
        files_of[info.name].push_back(name);
        std::cout << fmt::format(
            "{:<12} {:<8} abi {}  {}{}\n", name, info.version, info.abi, path.string(),
            info.name == name
                ? ""
                : fmt::format("  (reports itself as '{}')", escape_controls(info.name)));
      } catch (const PluginError& e) {
        std::cout << fmt::format("{:<12} broken: {}\n", name, e.what());
        status = kExitFailed;
      }
    }
    for (const auto& [reported, names] : files_of) {
      if (names.size() < 2) continue;
      std::cerr << fmt::format(
          "warning: {} plugins report the name '{}' ({}); a run loads the one named in "
          "--backends, and stores results under that name\n",
          names.size(), escape_controls(reported), fmt::join(names, ", "));
    }
    return status;
  }
  throw po::error(fmt::format("unknown list '{}' (expected ops or backends)", what));
}

}  // namespace crucible::cli
