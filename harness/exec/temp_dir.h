// A private temporary directory (mkdtemp under the system's temp dir), removed with everything in
// it when the object goes: where a command's children leave reports and logs nobody keeps.
#pragma once

#include <filesystem>
#include <string>

namespace crucible {

class TempDir {
 public:
  // `prefix` names the directory ("crucible_run_graph_" -> /tmp/crucible_run_graph_Ab12Cd).
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace crucible
