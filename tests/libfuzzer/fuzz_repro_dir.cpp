// libFuzzer target: a repro folder (load_repro), as `crucible repro DIR` reads one sent from
// another machine. One input is the manifest, then "--- NAME" sections, one file each. A manifest
// line `file NAME * *` is sealed with NAME's real size and hash, so mutations of a file get past
// the tamper check and reach the graph, side-file and input checks behind it.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "crucible/core/error.h"
#include "fuzz_support.h"
#include "minify/repro.h"
#include "output_digest.h"

namespace {

std::string sealed(const std::string& manifest,
                   const std::vector<std::pair<std::string, std::string>>& files) {
  std::istringstream in(manifest);
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.starts_with("file ") && line.ends_with(" * *")) {
      const std::string n = line.substr(5, line.size() - 9);
      for (const auto& [file, bytes] : files) {
        if (file == n) {
          line = fmt::format("file {} {} {:016x}", n, bytes.size(),
                             crucible::digest_bytes(bytes.data(), bytes.size()));
        }
      }
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  auto parts = crucible::fuzz::split_sections(crucible::fuzz::as_text(data, size));
  const fs::path dir = crucible::fuzz::scratch_dir() / "repro";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::pair<std::string, std::string>> files(parts.begin() + 1, parts.end());
  for (const auto& [name, bytes] : files) {
    // Only plain names: a section must not write outside the folder.
    if (name.find('/') != std::string::npos || name == "." || name == ".." || name.size() > 200)
      continue;
    std::ofstream(dir / name, std::ios::binary) << bytes;
  }
  std::ofstream(dir / "manifest.txt", std::ios::binary) << sealed(parts[0].second, files);
  try {
    crucible::minify::load_repro(dir);
  } catch (const crucible::Error&) {
  }
  return 0;
}
