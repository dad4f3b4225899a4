// Finds and loads backend plugins with Boost.DLL: checks the ABI version before anything else and
// turns every way a plugin can be broken into one clear PluginError line.
#pragma once

#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "crucible/plugin_api.h"

namespace crucible {

class PluginError : public Error {
 public:
  using Error::Error;
};

// A backend together with the library that holds its code; the library outlives the backend.
class LoadedBackend {
 public:
  LoadedBackend(boost::dll::shared_library lib, std::unique_ptr<plugin::Backend> backend,
                std::filesystem::path path)
      : lib_(std::move(lib)), backend_(std::move(backend)), path_(std::move(path)) {}
  ~LoadedBackend() { backend_.reset(); }

  plugin::Backend& backend() { return *backend_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  boost::dll::shared_library lib_;  // declared first: destroyed after backend_
  std::unique_ptr<plugin::Backend> backend_;
  std::filesystem::path path_;
};

// Directories searched for plugins, in order: each --plugin-path entry (colon-separated lists
// allowed), CRUCIBLE_PLUGIN_PATH, then <dir of the crucible binary>/../lib/crucible.
std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::string>& extra);

// The file for a backend: `name` itself when it contains a '/' or ends in .so, otherwise
// crucible_backend_<name>.so in the first directory that has an entry of that name (of any kind: a
// dangling symlink there is reported by load_plugin, not skipped). Throws PluginError listing where
// it looked.
std::filesystem::path find_plugin(const std::string& name,
                                  const std::vector<std::filesystem::path>& dirs);

// Checks the file (validate_plugin_file: type, ELF headers and extents), loads the library, checks
// its ABI version, and calls its factory. Throws PluginError, one line naming the file.
std::unique_ptr<LoadedBackend> load_plugin(const std::filesystem::path& file);

// Every crucible_backend_*.so in `dirs` (first one wins per name), for listing.
std::vector<std::filesystem::path> list_plugins(const std::vector<std::filesystem::path>& dirs);
// "codegen" for .../crucible_backend_codegen.so: the name find_plugin looks the file up by.
std::string backend_name_of(const std::filesystem::path& plugin_file);

}  // namespace crucible
