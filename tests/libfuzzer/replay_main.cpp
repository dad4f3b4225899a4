// main() for the fuzz targets outside libFuzzer: runs LLVMFuzzerTestOneInput once on every file
// under the paths given (the committed corpus and regressions, seeds from the tree), so CI replays
// each target's corpus in every build, sanitized or not.
//   fuzz_X_replay [[--only SUFFIX] PATH]...   (--only: the next folder's files whose names end so)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_support.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::string only;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
      continue;
    }
    const fs::path p = argv[i];
    if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file() && (only.empty() || e.path().filename().string().ends_with(only)))
          files.push_back(e.path());
      }
      only.clear();
    } else {
      std::fprintf(stderr, "replay: %s does not exist\n", p.c_str());
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs under the paths given\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string bytes = crucible::fuzz::read_file_bytes(f);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs, none crashed\n", files.size());
  fs::remove_all(crucible::fuzz::scratch_dir());
  return 0;
}
