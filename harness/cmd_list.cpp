// `crucible list ops|backends`: what the op registry holds and which plugins the search path finds.
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
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
    int status = kExitOk;
    for (const auto& path : list_plugins(plugin_search_path(plugin_paths))) {
      try {
        auto loaded = load_plugin(path);
        auto info = loaded->backend().info();
        std::cout << fmt::format("{:<12} {:<8} abi {}  {}\n", info.name, info.version, info.abi,
                                 path.string());
      } catch (const PluginError& e) {
        std::cout << fmt::format("{:<12} broken: {}\n", path.filename().string(), e.what());
        status = kExitFailed;
      }
    }
    return status;
  }
  throw po::error(fmt::format("unknown list '{}' (expected ops or backends)", what));
}

}  // namespace crucible::cli
