// Plugin discovery and loading (see plugin_loader.h).
#include "crucible/plugin_loader.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "crucible/core/did_you_mean.h"
#include "crucible/core/quote.h"
#include "crucible/plugin_file.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {
constexpr const char* kAbiSymbol = "crucible_plugin_abi";
constexpr const char* kFactorySymbol = "crucible_create_backend";

void append_list(std::vector<fs::path>& out, const std::string& colon_list) {
  size_t start = 0;
  while (start <= colon_list.size()) {
    size_t end = colon_list.find(':', start);
    if (end == std::string::npos) end = colon_list.size();
    if (end > start) out.emplace_back(colon_list.substr(start, end - start));
    start = end + 1;
  }
}

fs::path self_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path(".") : exe.parent_path();
}
}  // namespace

std::vector<fs::path> plugin_search_path(const std::vector<std::string>& extra) {
  std::vector<fs::path> dirs;
  for (const std::string& e : extra) append_list(dirs, e);
  if (const char* env = std::getenv("CRUCIBLE_PLUGIN_PATH")) append_list(dirs, env);
  dirs.push_back((self_dir() / ".." / "lib" / "crucible").lexically_normal());
  return dirs;
}

std::string backend_name_of(const fs::path& plugin_file) {
  std::string stem = plugin_file.stem().string();
  constexpr std::string_view kPrefix = "crucible_backend_";
  return stem.starts_with(kPrefix) ? stem.substr(kPrefix.size()) : stem;
}

fs::path find_plugin(const std::string& name, const std::vector<fs::path>& dirs) {
  // Anything under the name counts as found (a dangling symlink, a directory, a FIFO): load_plugin
  // then says what is wrong with it, rather than "missing" or a later directory's file.
  if (name.find('/') != std::string::npos || fs::path(name).extension() == ".so") {
    if (!path_entry_exists(name)) {
      throw PluginError(fmt::format("{}: plugin file does not exist", escape_controls(name)));
    }
    return fs::path(name);
  }
  const std::string file = fmt::format("crucible_backend_{}.so", name);
  std::vector<std::string> looked;
  for (const fs::path& d : dirs) {
    fs::path p = d / file;
    if (path_entry_exists(p)) return p;
    looked.push_back(escape_controls(d.string()));
  }
  std::vector<std::string> known;
  for (const fs::path& p : list_plugins(dirs)) known.push_back(backend_name_of(p));
  const std::string suggestion = suggest_names(name, known);
  throw PluginError(fmt::format("backend '{}': no {} in {}{}", escape_controls(name),
                                escape_controls(file), fmt::join(looked, ", "),
                                suggestion.empty() ? "" : "; " + escape_controls(suggestion)));
}

std::unique_ptr<LoadedBackend> load_plugin(const fs::path& file) {
  const std::string where = escape_controls(file.string());
  // Before dlopen maps anything: a truncated library would otherwise fault (SIGBUS) inside it.
  validate_plugin_file(file);
  boost::dll::shared_library lib;
  try {
    // rtld_local keeps one plugin's symbols from resolving another's; rtld_now surfaces missing
    // symbols here, as a message, rather than as a crash at first call.
    lib.load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    // Boost wraps dlerror()'s text in its own; keep just dlerror's reason.
    std::string reason = e.what();
    const std::string marker = "dlerror system message: ";
    if (auto at = reason.find(marker); at != std::string::npos) {
      reason = reason.substr(at + marker.size());
      reason = reason.substr(0, reason.rfind(')'));
      if (auto colon = reason.rfind(": "); colon != std::string::npos)
        reason = reason.substr(colon + 2);
    }
    throw PluginError(
        fmt::format("{}: not a loadable shared library ({})", where, escape_controls(reason)));
  }
  if (!lib.has(kAbiSymbol)) {
    throw PluginError(fmt::format("{}: not a crucible plugin (no {} symbol)", where, kAbiSymbol));
  }
  const uint32_t abi = lib.get_alias<plugin::AbiVersionFn>(kAbiSymbol)();
  if (abi != plugin::kAbiVersion) {
    throw PluginError(
        fmt::format("{}: plugin ABI version {} does not match this crucible's ABI version {}; "
                    "rebuild the plugin against this crucible",
                    where, abi, plugin::kAbiVersion));
  }
  if (!lib.has(kFactorySymbol)) {
    throw PluginError(
        fmt::format("{}: crucible plugin exports no backend factory ({})", where, kFactorySymbol));
  }
  std::unique_ptr<plugin::Backend> backend;
  try {
    backend = lib.get_alias<plugin::FactoryFn>(kFactorySymbol)();
  } catch (const std::exception& e) {
    throw PluginError(
        fmt::format("{}: backend factory failed: {}", where, escape_controls(e.what())));
  } catch (...) {
    throw PluginError(fmt::format("{}: backend factory failed with an unknown exception", where));
  }
  if (!backend) throw PluginError(fmt::format("{}: backend factory returned no backend", where));
  return std::make_unique<LoadedBackend>(std::move(lib), std::move(backend), file);
}

std::vector<fs::path> list_plugins(const std::vector<fs::path>& dirs) {
  std::vector<fs::path> out;
  std::set<std::string> seen;
  for (const fs::path& d : dirs) {
    std::error_code ec;
    std::vector<fs::path> here;
    for (const auto& entry : fs::directory_iterator(d, ec)) {
      const std::string f = entry.path().filename().string();
      if (f.starts_with("crucible_backend_") && f.ends_with(".so")) here.push_back(entry.path());
    }
    std::sort(here.begin(), here.end());
    for (const fs::path& p : here) {
      if (seen.insert(p.filename().string()).second) out.push_back(p);
    }
  }
  return out;
}

}  // namespace crucible
