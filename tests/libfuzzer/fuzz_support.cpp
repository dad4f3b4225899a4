// The libFuzzer targets' shared helpers (fuzz_support.h): scratch files and sectioned inputs.
#include "fuzz_support.h"

#include <unistd.h>

#include <fstream>
#include <utility>
#include <vector>

namespace crucible::fuzz {

namespace fs = std::filesystem;

const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    const fs::path base =
        fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("crucible-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

fs::path write_scratch(const std::string& name, std::string_view bytes) {
  const fs::path p = scratch_dir() / name;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p;
}

std::vector<std::pair<std::string, std::string>> split_sections(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> parts{{"", ""}};
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with("--- ") && line.size() > 4) {
      parts.emplace_back(std::string(line.substr(4)), "");
    } else {
      parts.back().second.append(line);
      if (end < text.size()) parts.back().second += '\n';
    }
    at = end + 1;
  }
  return parts;
}

}  // namespace crucible::fuzz
