// Toolchain plumbing for the codegen backend: option defaults, running the compiler without a
// shell, its version, diagnostics trimming, and LoadedLibrary (dlopen with a cache-key check).
#include "crucible/codegen/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <link.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "crucible/core/kernel_cache_dir.h"

extern char** environ;

namespace crucible::codegen {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------
// Options

std::vector<std::string> ToolchainOptions::default_flags() {
  // Kernels are built for the instruction set crucible itself was (CRUCIBLE_ARCH), so a build
  // that Valgrind can run loads kernels it can run too.
#ifdef CRUCIBLE_KERNEL_ARCH
  const std::string arch = CRUCIBLE_KERNEL_ARCH;
#else
  const std::string arch = "native";
#endif
  return {"-O3", "-march=" + arch, "-fopenmp", "-shared", "-fPIC", "-std=c++17"};
}

std::string ToolchainOptions::default_compiler() { return compiler_for(std::getenv("CXX")); }

std::string ToolchainOptions::compiler_for(const char* cxx) {
  const std::string given = cxx ? cxx : "";
  return given.find_first_not_of(" \t") == std::string::npos ? "c++" : given;
}

namespace {

// Whether `program` names an executable: a path (with a '/') directly, else in a PATH directory.
bool executable_found(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

std::string missing_compiler(const char* cxx, const char* path) {
  // compiler_for gives a command of at least one word: $CXX when it holds one, else c++.
  const std::string program = detail::split_words(ToolchainOptions::compiler_for(cxx)).at(0);
  if (executable_found(program, path ? path : "")) return "";
  const bool cxx_set = cxx && std::string_view(cxx).find_first_not_of(" \t") != std::string::npos;
  if (!cxx_set) {
    return "codegen: no C++ compiler: 'c++' is not on PATH and $CXX is unset (install g++ or "
           "clang++ on this node, or set CXX)";
  }
  return fmt::format(
      "codegen: no C++ compiler: $CXX is '{}' and '{}' is not an executable on PATH (install a "
      "compiler on this node, or set CXX to one)",
      cxx, program);
}

fs::path ToolchainOptions::default_cache_dir() {
  try {
    return default_kernel_cache_dir();
  } catch (const Error& e) {
    throw ToolchainError(e.what());
  }
}

ToolchainOptions ToolchainOptions::defaults() {
  ToolchainOptions o;
  o.compiler = default_compiler();
  o.flags = default_flags();
  o.cache_dir = default_cache_dir();
  return o;
}

// ---------------------------------------------------------------------------------------------------
// Processes and text

namespace detail {

std::vector<std::string> split_words(const std::string& command) {
  std::vector<std::string> words;
  std::istringstream in(command);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

CommandResult run_command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw ToolchainError("empty command");
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // LC_ALL=C: GCC translates its diagnostics and quotes, and callers match on "error".
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "LC_ALL=", 7) != 0) env_storage.emplace_back(*e);
  }
  env_storage.emplace_back("LC_ALL=C");
  std::vector<char*> env;
  env.reserve(env_storage.size() + 1);
  for (std::string& e : env_storage) env.push_back(e.data());
  env.push_back(nullptr);

  // O_CLOEXEC: compiles run in parallel threads, and a child that inherited another compile's write
  // end would keep that pipe open and delay its EOF.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw ToolchainError(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw ToolchainError(fmt::format("cannot run '{}': {}", argv[0], std::strerror(rc)));
  }

  CommandResult result;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    // Keep the head: the first errors are what matters, and template spew can run to megabytes.
    if (result.output.size() < (1u << 20)) result.output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      throw ToolchainError(
          fmt::format("waiting for '{}' failed: {}", argv[0], std::strerror(errno)));
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

std::string trim_diagnostics(const std::string& output, size_t max_lines, size_t max_chars) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  while (!lines.empty() && lines.back().find_first_not_of(" \t\r") == std::string::npos)
    lines.pop_back();

  size_t first = 0;
  if (lines.size() > max_lines) {
    // Start two lines before the first error: that keeps GCC's "In function ..." context line.
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].find("error") != std::string::npos) {
        first = i >= 2 ? i - 2 : 0;
        break;
      }
    }
  }
  std::string text;
  size_t last = first;
  for (; last < lines.size() && last - first < max_lines; ++last) {
    if (text.size() + lines[last].size() + 1 > max_chars) {
      if (text.empty()) text = lines[last].substr(0, max_chars) + "\n";  // one giant line: cut it
      ++last;
      break;
    }
    text += lines[last] + "\n";
  }
  const size_t omitted = first + (lines.size() - std::min(last, lines.size()));
  if (omitted > 0) text += fmt::format("[{} more lines of compiler output not shown]\n", omitted);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

const std::string& host_cpu_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string model, flags;
    for (std::string line; std::getline(in, line);) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
      if (!model.empty() && !flags.empty()) break;
    }
    return model.empty() && flags.empty() ? std::string("unknown cpu") : model + "\n" + flags;
  }();
  return id;
}

}  // namespace detail

std::string compiler_version(const std::string& compiler) {
  static std::mutex mutex;
  static std::map<std::string, std::string> cache;
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(compiler); it != cache.end()) return it->second;
  }
  // Probed outside the lock so a slow compiler does not stall other threads asking about another
  // one; two threads may both probe the first time, which is harmless.
  std::vector<std::string> argv = detail::split_words(compiler);
  if (argv.empty()) throw ToolchainError("no compiler given");
  argv.push_back("--version");
  const detail::CommandResult r = detail::run_command(argv);
  std::string first = r.output.substr(0, r.output.find('\n'));
  while (!first.empty() && (first.back() == '\r' || first.back() == ' ')) first.pop_back();
  if (r.exit_code != 0 || first.empty()) {
    throw ToolchainError(fmt::format("'{} --version' failed: {}", compiler,
                                     detail::trim_diagnostics(r.output, 5, 500)));
  }
  std::lock_guard lock(mutex);
  return cache.emplace(compiler, first).first->second;
}

// ---------------------------------------------------------------------------------------------------
// LoadedLibrary

namespace {

std::set<std::string> loaded_objects() {
  std::set<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && info->dlpi_name[0]) {
          static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        }
        return 0;
      },
      &names);
  return names;
}

}  // namespace

LoadedLibrary::LoadedLibrary(const fs::path& so, const std::string& expected_key) : path_(so) {
  const std::set<std::string> before = loaded_objects();
  dlerror();
  handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    throw ToolchainError(
        fmt::format("cannot load {}: {}", so.string(), why ? why : "unknown error"));
  }
  // Pin what the kernel pulled in (RTLD_NODELETE), but not the kernel itself. The OpenMP runtime
  // keeps its worker threads parked inside its own code after a parallel region; if our dlclose
  // dropped the last reference to it (a host that does not link libgomp itself), those threads
  // would crash.
  for (const std::string& name : loaded_objects()) {
    if (before.count(name) || name == so.string()) continue;
    if (void* pin = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(pin);
  }
  const auto* key = static_cast<const char*>(dlsym(handle_, "crucible_cache_key"));
  std::string problem;
  if (!key) {
    problem = "it does not define crucible_cache_key, so it is not a crucible kernel library";
  } else if (std::strncmp(key, expected_key.c_str(), expected_key.size() + 1) != 0) {
    // Bounded reads: a foreign library's symbol of this name need not be a terminated string.
    problem = fmt::format("it was built for cache key '{}'", std::string(key, strnlen(key, 80)));
  }
  if (!problem.empty()) {
    dlclose(handle_);
    handle_ = nullptr;
    throw ToolchainError(
        fmt::format("refusing {} (expected cache key {}): {}", so.string(), expected_key, problem));
  }
}

LoadedLibrary::~LoadedLibrary() {
  if (handle_) dlclose(handle_);
}

LoadedLibrary::LoadedLibrary(LoadedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

LoadedLibrary& LoadedLibrary::operator=(LoadedLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

void* LoadedLibrary::symbol(const std::string& name) const {
  if (!handle_) {
    throw ToolchainError(fmt::format("symbol '{}' requested from a moved-from library", name));
  }
  void* p = dlsym(handle_, name.c_str());
  if (!p) {
    throw ToolchainError(fmt::format("symbol '{}' not found in {}", name, path_.string()));
  }
  return p;
}

}  // namespace crucible::codegen
