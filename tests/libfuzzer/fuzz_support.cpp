// The libFuzzer targets' shared helpers (fuzz_support.h): scratch files, sectioned inputs and
// the store's readers.
#include "fuzz_support.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "crucible/reports/store.h"

namespace crucible::fuzz {

namespace fs = std::filesystem;

const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    const fs::path base =
        fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("crucible-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    // Under /dev/shm a folder left behind holds memory until reboot. The handler runs after the
    // statics are destroyed, so it keeps a copy of its own that is never freed.
    static const fs::path* const left = new fs::path(d);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(*left, ec);
    });
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

std::string read_file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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

const std::string& empty_store() {
  static const std::string bytes = [] {
    const fs::path p = scratch_dir() / "empty_store_template.db";
    fs::remove(p);
    reports::Store::open(p);
    std::string b = read_file_bytes(p);
    fs::remove(p);
    return b;
  }();
  return bytes;
}

void read_store(reports::Store& s) {
  const auto runs = s.runs(5);
  reports::HistoryQuery seen{
      .model = "m", .backend = "codegen", .suite = "", .metric = "speedup", .since = ""};
  for (const auto& r : runs) {
    s.run(r.id);
    int n = 0;
    for (const auto& res : s.results(r.id)) {
      if (++n > 20) break;
      seen = {.model = res.model,
              .backend = res.backend,
              .suite = res.suite,
              .metric = "speedup",
              .since = ""};
      s.accuracy(res.id);
      s.kernels(res.id);
      s.kernels_table(res.id);
    }
    s.results_table(r.id, false);
  }
  if (runs.size() >= 2) s.compare(runs[0].id, runs[1].id);
  s.runs_table(5);
  s.unfinished_runs();
  s.calibrations();
  s.repros();
  s.report_rows("");
  s.regressions({});
  s.latest_launcher_json();
  // A model the store has, so its rows reach the history's arithmetic.
  for (const char* metric : {"speedup", "latency", "compile", "memory", "accuracy"}) {
    seen.metric = metric;
    s.history(seen);
  }
  if (!runs.empty()) s.status_history(seen.suite, seen.model, seen.backend, "", runs[0].id, 10);
}

}  // namespace crucible::fuzz
