// The peer's decision files: read only under the context they were timed in, written whole.
#include "choice_file.h"

#include <fmt/format.h>
#include <torch/version.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "blas_probe.h"
#include "crucible/core/kernel_cache_dir.h"

namespace crucible::libtorch {

namespace {

std::string read_choices_context() {
  const char* fault = std::getenv("CRUCIBLE_TEST_LINEAR_FAULT");
  std::string cpu = "-";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 1);
      break;
    }
  }
  return fmt::format("context torch {}.{}.{}; cpu{}; BLAS core {}; fault {}", TORCH_VERSION_MAJOR,
                     TORCH_VERSION_MINOR, TORCH_VERSION_PATCH, cpu, openblas_core(),
                     fault != nullptr ? fault : "-");
}

}  // namespace

const std::string& choices_context() {
  static const std::string context = read_choices_context();
  return context;
}

std::filesystem::path choices_file(const std::string& name) {
  try {
    return default_kernel_cache_dir() / name;  // the worker's folder for this backend
  } catch (const std::exception&) {
    return {};  // no folder: the process's decisions alone
  }
}

std::vector<std::string> read_choice_lines(const std::filesystem::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  std::string context;
  if (!std::getline(in, context) || context != choices_context()) return lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void write_choice_lines(const std::filesystem::path& file, const std::vector<std::string>& lines) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  const std::filesystem::path tmp = file.string() + fmt::format(".{}", ::getpid());
  {
    std::ofstream out(tmp);
    out << choices_context() << "\n";
    for (const std::string& line : lines) out << line << "\n";
    if (!out) return;
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace crucible::libtorch
