// The codegen backend's toolchain: turns generated C++ translation units into a shared object
// through a private on-disk cache, and loads it (the role of Inductor's cpp_builder + codecache).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "crucible/core/error.h"

namespace crucible::codegen {

// A compiler or loader failure. For a compile error, what() is "<compiler> failed on
// <source>:\n<diagnostics>" (diagnostics trimmed to the first error lines) and `source` is the
// translation unit that failed; for a link failure `source` is the cache entry's directory, for
// other failures it is empty.
class ToolchainError : public crucible::Error {
 public:
  using Error::Error;
  std::filesystem::path source;
};

struct ToolchainOptions {
  // Empty means "resolve at build time": $CXX if set, else "c++". May hold a launcher prefix
  // ("ccache c++"); it is split on spaces and run without a shell.
  std::string compiler;
  std::vector<std::string> flags = default_flags();
  // Appends -ffast-math. Off by default: it changes results against eager and the fp64 reference.
  bool fast_math = false;
  // Empty means "resolve at build time": $CRUCIBLE_CACHE_DIR, else
  // $XDG_CACHE_HOME/crucible/kernels, else $HOME/.cache/crucible/kernels.
  std::filesystem::path cache_dir;
  int jobs = 0;  // parallel translation-unit compiles; 0 = std::thread::hardware_concurrency()

  // Every field filled in from the environment, as a build would resolve it.
  static ToolchainOptions defaults();
  // -O3 -march=native -fopenmp -shared -fPIC -std=c++17
  static std::vector<std::string> default_flags();
  // compiler_for(getenv("CXX")).
  static std::string default_compiler();
  // The compiler command codegen runs when $CXX is `cxx` (nullptr when unset): $CXX when it holds
  // a word, else "c++". The one rule every caller asks.
  static std::string compiler_for(const char* cxx);
  static std::filesystem::path default_cache_dir();
};

struct BuildResult {
  std::filesystem::path library;  // <cache_dir>/<key>/<key>.so
  std::string key;                // 64 hex digits (SHA-256)
  bool cache_hit = false;
  double compile_seconds = 0;  // wall time of compile + link; 0 on a hit
  // The .cpp files in the cache entry, for debugging: sources[i] holds the i-th input translation
  // unit (tu<i>.cpp), followed by the generated cache_key.cpp. On a hit they are the files already
  // there.
  std::vector<std::filesystem::path> sources;
  std::vector<std::string> command_lines;  // exactly what was run, shell-quoted; empty on a hit
  // Why an existing entry for this key was discarded before rebuilding ("" if there was none or it
  // was good), e.g. "size 120 in .meta but the .so has 96 bytes".
  std::string rejected;
};

// Builds one shared object from several complete C++ translation units: each compiled with `-c
// -fPIC` in parallel (up to opts.jobs at once), then one `-shared` link, unless a verified cached
// object for the same key exists. key = SHA-256 of (compiler command, `<compiler> --version` first
// line, the full flag list incl. -ffast-math, every source in order, and the host CPU when a flag
// says "native").
//
// A cached entry is trusted only if its .so and .meta are regular files (lstat: a symlink, FIFO,
// directory or device in their place is never followed, opened or read) within size caps, the
// .meta names the same key, its recorded size and SHA-256 match the .so's bytes, and the .so
// contains the key string that cache_key.cpp embeds; otherwise the entry is removed and rebuilt,
// never loaded, and anything but a regular file in the entry is removed first. LoadedLibrary then
// checks the embedded symbol after dlopen. Builds of one key are serialized across threads and
// processes by an flock on <entry>/.lock. Throws ToolchainError on compiler failure or an unsafe
// cache directory.
BuildResult build_shared_library(const std::vector<std::string>& sources,
                                 const ToolchainOptions& opts);

// First line of `<compiler> --version`, cached per compiler string for the process lifetime.
std::string compiler_version(const std::string& compiler);

// A dlopen'ed library (RTLD_NOW | RTLD_LOCAL), closed on destruction. The constructor checks that
// the library defines `extern "C" const char crucible_cache_key[]` equal to `expected_key` and
// throws ToolchainError (after closing it) otherwise. Libraries the kernel pulls in (libgomp) are
// pinned so that dlclose never unloads a runtime whose threads are still parked in it. As with any
// dlopen, a path already loaded in this process is not re-read from disk.
class LoadedLibrary {
 public:
  LoadedLibrary(const std::filesystem::path& so, const std::string& expected_key);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;
  LoadedLibrary(LoadedLibrary&& other) noexcept;
  LoadedLibrary& operator=(LoadedLibrary&& other) noexcept;

  // The address of `name`; throws ToolchainError naming the symbol if the library lacks it.
  void* symbol(const std::string& name) const;
  template <typename F>
  F* function(const std::string& name) const {
    return reinterpret_cast<F*>(symbol(name));
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::filesystem::path path_;
};

// Why the compiler codegen would run cannot be started on this machine ("" when it can):
// compiler_for(cxx)'s first word, a path or looked up in `path` ($PATH) as execvp would. Asked
// before a run (the plugin's Backend::unavailable_here), so a node without a compiler is refused
// in one line instead of failing every model as fail_to_compile.
std::string missing_compiler(const char* cxx, const char* path);

// Helpers shared by toolchain.cpp and kernel_cache.cpp (and tested); not for other callers.
namespace detail {

struct CommandResult {
  int exit_code = -1;  // the exit status, or -1 if killed by a signal
  int signal = 0;      // the signal that ended the process, or 0
  std::string output;  // stdout and stderr, interleaved
};
// Runs argv[0] (searched in PATH) without a shell, stdin from /dev/null and LC_ALL=C so diagnostics
// are untranslated. Throws ToolchainError if the program cannot be started.
CommandResult run_command(const std::vector<std::string>& argv);
// The compiler string as argv words ("ccache c++" -> {"ccache", "c++"}).
std::vector<std::string> split_words(const std::string& command);
// At most `max_lines` lines / `max_chars` characters of compiler output, starting a little before
// the first line that mentions an error, with a note of how much was cut.
std::string trim_diagnostics(const std::string& output, size_t max_lines = 40,
                             size_t max_chars = 4000);
// "model name" and "flags" of the first CPU in /proc/cpuinfo: what -march=native compiles for.
const std::string& host_cpu_id();

}  // namespace detail

}  // namespace crucible::codegen
