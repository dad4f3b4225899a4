// The compiled-kernel cache: build_shared_library() keys (compiler, flags, sources), returns a
// verified <cache_dir>/<key>/<key>.so if there is one, else compiles and publishes it atomically.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "content_hash.h"
#include "crucible/codegen/toolchain.h"
#include "crucible/core/quote.h"

namespace crucible::codegen {

namespace fs = std::filesystem;

namespace {

// Bumped when the entry layout or key recipe changes: old entries are then never looked up again.
constexpr const char* kCacheFormat = "crucible-kernel-cache-v1";
constexpr const char* kKeySymbol = "crucible_cache_key";
// Caps on what is ever read from the cache. A .meta is a few hundred bytes; generated libraries
// are tens to hundreds of KiB (the model zoo's largest is well under 10 MiB). A file over its cap
// is a bad entry, rejected from its size alone, never read.
constexpr uint64_t kMaxMetaBytes = 64 << 10;
constexpr uint64_t kMaxLibraryBytes = 256 << 20;

std::string errno_text() { return std::strerror(errno); }

// Unique per process (pid) and per call (counter), so two writers never share a temporary name.
fs::path temp_name(const fs::path& final_path) {
  static std::atomic<unsigned long> counter{0};
  return fs::path(fmt::format("{}.tmp.{}.{}", final_path.string(), getpid(), counter++));
}

bool is_temp_name(const std::string& name) { return name.find(".tmp.") != std::string::npos; }

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
}

// Removes whatever is at `p` without following it: a file, a symlink (not its target), a FIFO, or
// a directory with its contents. Returns false if something is still there.
bool remove_any(const fs::path& p) {
  struct stat st;
  if (lstat(p.c_str(), &st) != 0) return errno == ENOENT;
  std::error_code ec;
  if (S_ISDIR(st.st_mode)) {
    fs::remove_all(p, ec);
  } else {
    fs::remove(p, ec);
  }
  return lstat(p.c_str(), &st) != 0 && errno == ENOENT;
}

std::string kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symlink";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// Writes `content` under a temporary name and renames it over `final_path`: readers see either the
// old file or the whole new one, and a killed writer leaves only a *.tmp.* file.
void write_file_atomically(const fs::path& final_path, std::string_view content) {
  const fs::path tmp = temp_name(final_path);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw ToolchainError(fmt::format("cannot create {}: {}", tmp.string(), errno_text()));
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = errno_text();
      close(fd);
      remove_quietly(tmp);
      throw ToolchainError(fmt::format("cannot write {}: {}", tmp.string(), why));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (close(fd) != 0 || std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const std::string why = errno_text();
    remove_quietly(tmp);
    throw ToolchainError(fmt::format("cannot write {}: {}", final_path.string(), why));
  }
}

// What lstat says is at a cache path: nothing, a regular file of `size` bytes, or something else
// (`kind`: a symlink, FIFO, directory, ...), which is never followed, opened or read.
struct CacheFile {
  bool exists = false;
  bool regular = false;
  bool directory = false;
  uint64_t size = 0;
  std::string kind;
  dev_t dev = 0;
  ino_t ino = 0;
};

CacheFile inspect(const fs::path& p) {
  CacheFile f;
  struct stat st;
  if (lstat(p.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      f.exists = true;
      f.kind = fmt::format("unreadable ({})", errno_text());
    }
    return f;
  }
  f.exists = true;
  f.regular = S_ISREG(st.st_mode);
  f.directory = S_ISDIR(st.st_mode);
  f.size = static_cast<uint64_t>(st.st_size);
  f.kind = kind_of(st.st_mode);
  f.dev = st.st_dev;
  f.ino = st.st_ino;
  return f;
}

// The bytes of the regular file `f` describes at `p`, read without following a symlink or blocking
// on a FIFO, and only if it still is that file with at most `cap` bytes; nullopt and `why` if not.
std::optional<std::string> read_cache_file(const fs::path& p, const CacheFile& f, uint64_t cap,
                                           std::string& why) {
  const std::string name = p.filename().string();
  if (!f.exists) {
    why = fmt::format("{} is missing", name);
    return std::nullopt;
  }
  if (!f.regular) {
    why = fmt::format("{} is {}, not a regular file", name, f.kind);
    return std::nullopt;
  }
  if (f.size > cap) {
    why = fmt::format("{} has {} bytes, more than a cache file may have ({})", name, f.size, cap);
    return std::nullopt;
  }
  const int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    why = fmt::format("{} cannot be opened: {}", name, errno_text());
    return std::nullopt;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != f.dev || st.st_ino != f.ino) {
    close(fd);
    why = fmt::format("{} was replaced while being checked", name);
    return std::nullopt;
  }
  std::string bytes(f.size + 1, '\0');  // one more than expected, to notice a file that grew
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = fmt::format("{} cannot be read: {}", name, errno_text());
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (got != f.size) {
    why = fmt::format("{} changed size while being read", name);
    return std::nullopt;
  }
  bytes.resize(got);
  return bytes;
}

// Creates `dir` (mode 0700) if missing and refuses it unless it is a directory owned by us that
// nobody else can write: we dlopen what is in it, so a directory another user can write is a
// code-injection hole.
void ensure_private_dir(const fs::path& dir, const char* what) {
  if (mkdir(dir.c_str(), 0700) == 0) {
    chmod(dir.c_str(), 0700);  // in case the umask took bits away that we need (e.g. 0277)
  } else if (errno == ENOENT) {
    // Parents get default permissions, like mkdir -p; only the cache directory itself is ours.
    std::error_code ec;
    fs::create_directories(dir.parent_path(), ec);
    if (mkdir(dir.c_str(), 0700) == 0) {
      chmod(dir.c_str(), 0700);
    } else if (errno != EEXIST) {
      throw ToolchainError(
          fmt::format("cannot create {} {}: {}", what, dir.string(), errno_text()));
    }
  } else if (errno != EEXIST) {
    throw ToolchainError(fmt::format("cannot create {} {}: {}", what, dir.string(), errno_text()));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    throw ToolchainError(fmt::format("cannot use {} {}: {}", what, dir.string(), errno_text()));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw ToolchainError(fmt::format("{} {} is not a directory", what, dir.string()));
  }
  if (st.st_uid != geteuid()) {
    throw ToolchainError(
        fmt::format("refusing {} {}: it is owned by uid {}, not by the current user (uid {}), "
                    "and compiled code is loaded from it; point CRUCIBLE_CACHE_DIR at a private "
                    "directory",
                    what, dir.string(), st.st_uid, geteuid()));
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    throw ToolchainError(fmt::format(
        "refusing {} {}: it is group- or world-writable (mode {:04o}), so another user could "
        "plant code that would be loaded; chmod 700 it or point CRUCIBLE_CACHE_DIR at a private "
        "directory",
        what, dir.string(), st.st_mode & 07777));
  }
}

// An exclusive flock on <entry>/.lock for the whole look-up/build/publish of one key. It serializes
// same-key builds across threads (each opens its own file description) and processes, so the second
// one waits and then hits instead of compiling again, and nobody reads an entry between the .so and
// .meta renames. The kernel drops the lock when a holder dies, so a killed build never wedges the
// entry.
class EntryLock {
 public:
  explicit EntryLock(const fs::path& path) {
    // O_NOFOLLOW and a type check: a symlink there must not create or lock a file elsewhere, and a
    // FIFO or directory in its place is removed (once) and replaced by a real lock file.
    for (int attempt = 0;; ++attempt) {
      fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      struct stat st;
      if (fd_ >= 0 && fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) break;
      const std::string why = fd_ < 0 ? errno_text() : "not a regular file";
      if (fd_ >= 0) close(fd_);
      const CacheFile found = inspect(path);
      if (attempt < 2 && (!found.exists || found.regular || remove_any(path))) continue;
      throw ToolchainError(
          fmt::format("cannot open lock {}: {}{}", path.string(), why,
                      found.exists && !found.regular
                          ? fmt::format(" (it is {} and cannot be removed)", found.kind)
                          : ""));
    }
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        const std::string why = errno_text();
        close(fd_);
        throw ToolchainError(fmt::format("cannot lock {}: {}", path.string(), why));
      }
    }
  }
  ~EntryLock() { close(fd_); }  // closing the last descriptor releases the flock
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  int fd_ = -1;
};

std::string key_source(const std::string& key) {
  // Brace form so the const array gets external linkage; default visibility in case the flags
  // say -fvisibility=hidden.
  return fmt::format(
      "// Generated by crucible: the cache key this library was built for, checked on load.\n"
      "extern \"C\" {{\n"
      "__attribute__((visibility(\"default\"))) extern const char {0}[];\n"
      "__attribute__((visibility(\"default\"))) const char {0}[] = \"{1}\";\n"
      "}}\n",
      kKeySymbol, key);
}

// The key string as cache_key.cpp stores it in .rodata: NUL-terminated.
bool embeds_key(std::string_view so_bytes, const std::string& key) {
  return so_bytes.find(std::string_view(key.c_str(), key.size() + 1)) != std::string_view::npos;
}

struct EntryPaths {
  fs::path dir, library, meta, lock;
};

// Why the entry cannot be trusted, "" if it is absent altogether, or nullopt if it is good. Checks,
// in order: both files are regular files (lstat: a symlink, FIFO, directory or device in their
// place is never followed or opened) within their size caps; .meta present; its key; its size
// against the .so's size (before a byte of the .so is read); its SHA-256 against the .so's bytes
// (catches flipped bytes and any replaced file); and that the bytes hold the NUL-terminated key
// string that cache_key.cpp embeds (catches a foreign library whose .meta was rewritten to match).
// None of this dlopens the file: loading runs its constructors, and glibc would keep serving a
// stale mapping of the same path after we rebuild it.
std::optional<std::string> check_entry(const EntryPaths& e, const std::string& key) {
  const CacheFile so = inspect(e.library), meta = inspect(e.meta);
  if (!so.exists && !meta.exists) return std::string();
  std::string why;
  if (so.exists && !so.regular) return fmt::format("the .so is {}, not a regular file", so.kind);
  if (!so.exists) return "the .meta has no .so beside it";
  std::optional<std::string> text = read_cache_file(e.meta, meta, kMaxMetaBytes, why);
  if (!text) return "the .so has no readable .meta: " + why;
  std::map<std::string, std::string> fields;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (const size_t eq = line.find('='); eq != std::string::npos) {
      fields[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  if (fields["key"] != key) return fmt::format("the .meta names key '{}'", fields["key"]);
  if (fields["size"] != std::to_string(so.size)) {
    return fmt::format("size '{}' in the .meta but the .so has {} bytes", fields["size"], so.size);
  }
  std::optional<std::string> bytes = read_cache_file(e.library, so, kMaxLibraryBytes, why);
  if (!bytes) return "the .so cannot be read: " + why;
  if (fields["sha256"] != sha256_hex(*bytes)) return "the .so's SHA-256 differs from the .meta's";
  if (!embeds_key(*bytes, key)) return "the .so does not embed its cache key";
  return std::nullopt;
}

struct Compile {
  fs::path source, object, temp_object;
  std::vector<std::string> argv;
  detail::CommandResult result;
  std::exception_ptr error;  // the command could not even be started
  bool ran = false;
};

// Runs the compiles on up to `jobs` threads. After a failure no new one starts; running ones
// finish.
void run_compiles(std::vector<Compile>& compiles, int jobs) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (;;) {
      const size_t i = next++;
      if (i >= compiles.size() || failed) return;
      Compile& c = compiles[i];
      c.ran = true;
      try {
        c.result = detail::run_command(c.argv);
        if (c.result.exit_code != 0) failed = true;
      } catch (...) {
        c.error = std::current_exception();
        failed = true;
      }
    }
  };
  const size_t threads = std::min<size_t>(static_cast<size_t>(std::max(jobs, 1)), compiles.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

std::string failure_text(const detail::CommandResult& r) {
  const std::string diagnostics = detail::trim_diagnostics(r.output);
  if (r.signal != 0) return fmt::format("{} (killed by signal {})", diagnostics, r.signal);
  return diagnostics.empty() ? fmt::format("(exit status {}, no output)", r.exit_code)
                             : diagnostics;
}

bool has_flag(const std::vector<std::string>& flags, const std::string& f) {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

// Flags that only mean something to the linker; passed to `-c` they would draw "unused" warnings.
bool link_only(const std::string& f) {
  return f == "-shared" || f.rfind("-l", 0) == 0 || f.rfind("-L", 0) == 0 ||
         f.rfind("-Wl,", 0) == 0;
}

// The key covers everything that decides the machine code we would load. The compiler command
// is in as well as its version line, which two different drivers could share. -march=native
// means "this CPU", so a cache shared between machines (an NFS home) must also key on the CPU.
std::string cache_key(const std::string& compiler, const std::vector<std::string>& flags,
                      const std::vector<std::string>& sources) {
  Sha256 hasher;
  hasher.update_field(kCacheFormat);
  hasher.update_field(compiler);
  hasher.update_field(compiler_version(compiler));
  hasher.update_field(std::to_string(flags.size()));
  bool native = false;
  for (const std::string& f : flags) {
    hasher.update_field(f);
    native = native || f.find("=native") != std::string::npos;
  }
  if (native) hasher.update_field(detail::host_cpu_id());
  hasher.update_field(std::to_string(sources.size()));
  for (const std::string& s : sources) hasher.update_field(s);
  return hasher.hex_digest();
}

// The entry's paths, its directory made ours: anything else under its name (a symlink to a
// directory elsewhere, a file, a FIFO) is removed, never followed.
EntryPaths open_entry(const fs::path& cache_dir, const std::string& key) {
  ensure_private_dir(cache_dir, "kernel cache directory");
  EntryPaths entry;
  entry.dir = cache_dir / key;
  entry.library = entry.dir / (key + ".so");
  entry.meta = entry.dir / (key + ".meta");
  entry.lock = entry.dir / ".lock";
  if (const CacheFile d = inspect(entry.dir); d.exists && !d.directory) {
    if (!remove_any(entry.dir)) {
      throw ToolchainError(fmt::format("kernel cache entry {} is {} and cannot be removed",
                                       entry.dir.string(), d.kind));
    }
  }
  ensure_private_dir(entry.dir, "kernel cache entry");
  return entry;
}

// Leftovers of killed builds, and anything that is not a regular file (only regular files are
// ever written here): renaming a new source or object over a directory would fail. Every writer
// of the entry holds its lock, so none of them is live.
void remove_stale_files(const EntryPaths& entry) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& f : fs::directory_iterator(entry.dir, ec)) {
    if (f.path() == entry.lock) continue;
    const CacheFile found = inspect(f.path());
    if (is_temp_name(f.path().filename().string()) || !found.regular) stale.push_back(f.path());
  }
  for (const fs::path& p : stale) {
    if (!remove_any(p)) {
      throw ToolchainError(fmt::format("kernel cache entry {}: cannot remove {} ({})",
                                       entry.dir.string(), p.filename().string(), inspect(p).kind));
    }
  }
}

// One compile per source (the last is the key's own): written into the entry, compiled to a
// temporary object that is renamed once every compile succeeded.
std::vector<Compile> plan_compiles(const std::vector<fs::path>& paths,
                                   const std::vector<std::string>& sources, const std::string& key,
                                   const std::vector<std::string>& compiler_argv,
                                   const std::vector<std::string>& flags) {
  std::vector<Compile> compiles(paths.size());
  for (size_t i = 0; i < compiles.size(); ++i) {
    Compile& c = compiles[i];
    c.source = paths[i];
    write_file_atomically(c.source, i < sources.size() ? sources[i] : key_source(key));
    c.object = fs::path(c.source).replace_extension(".o");
    c.temp_object = temp_name(c.object);
    c.argv = compiler_argv;
    for (const std::string& f : flags) {
      if (!link_only(f)) c.argv.push_back(f);
    }
    if (!has_flag(flags, "-fPIC")) c.argv.push_back("-fPIC");
    c.argv.insert(c.argv.end(), {"-c", c.source.string(), "-o", c.temp_object.string()});
  }
  return compiles;
}

std::vector<std::string> link_command(const std::vector<Compile>& compiles,
                                      const std::vector<std::string>& compiler_argv,
                                      const std::vector<std::string>& flags,
                                      const fs::path& output) {
  std::vector<std::string> link = compiler_argv;
  for (const Compile& c : compiles) link.push_back(c.object.string());
  // Flags after the objects, so a -l in them resolves the objects' references.
  for (const std::string& f : flags) link.push_back(f);
  if (!has_flag(flags, "-shared")) link.push_back("-shared");
  link.insert(link.end(), {"-o", output.string()});
  return link;
}

// Checks the freshly linked `temp_library` (readable, within size, embedding `key`), moves it to
// the entry's final name, and writes the entry's .meta last: it is the commit record, so a build
// killed before it leaves an entry that the next build rejects and redoes.
void publish_library(const fs::path& temp_library, const EntryPaths& entry, const std::string& key,
                     const std::string& compiler, const std::vector<std::string>& flags) {
  std::string why;
  const std::optional<std::string> bytes =
      read_cache_file(temp_library, inspect(temp_library), kMaxLibraryBytes, why);
  if (!bytes) throw ToolchainError(fmt::format("linked {} but {}", entry.library.string(), why));
  if (!embeds_key(*bytes, key)) {
    throw ToolchainError(fmt::format("linked {} but it does not embed its cache key {}",
                                     entry.library.string(), key));
  }
  if (std::rename(temp_library.c_str(), entry.library.c_str()) != 0) {
    throw ToolchainError(fmt::format("cannot write {}: {}", entry.library.string(), errno_text()));
  }
  write_file_atomically(entry.meta, fmt::format("key={}\nsize={}\nsha256={}\ncompiler={}\n"
                                                "compiler_version={}\nflags={}\n",
                                                key, bytes->size(), sha256_hex(*bytes), compiler,
                                                compiler_version(compiler), shell_command(flags)));
}

}  // namespace

BuildResult build_shared_library(const std::vector<std::string>& sources,
                                 const ToolchainOptions& opts) {
  const std::string compiler =
      opts.compiler.empty() ? ToolchainOptions::default_compiler() : opts.compiler;
  const fs::path cache_dir =
      fs::absolute(opts.cache_dir.empty() ? ToolchainOptions::default_cache_dir() : opts.cache_dir);
  std::vector<std::string> flags = opts.flags;
  if (opts.fast_math && !has_flag(flags, "-ffast-math")) flags.push_back("-ffast-math");
  const std::vector<std::string> compiler_argv = detail::split_words(compiler);
  if (compiler_argv.empty()) throw ToolchainError("no compiler given");

  const std::string key = cache_key(compiler, flags, sources);

  const EntryPaths entry = open_entry(cache_dir, key);

  BuildResult result;
  result.key = key;
  result.library = entry.library;
  for (size_t i = 0; i < sources.size(); ++i) {
    result.sources.push_back(entry.dir / fmt::format("tu{}.cpp", i));
  }
  result.sources.push_back(entry.dir / "cache_key.cpp");

  EntryLock lock(entry.lock);
  const std::optional<std::string> problem = check_entry(entry, key);
  if (!problem) {
    result.cache_hit = true;
    return result;
  }
  result.rejected = *problem;
  // The .meta first: without it the entry stays invalid even if removing the .so fails.
  remove_any(entry.meta);
  remove_any(entry.library);
  remove_stale_files(entry);

  // The sources written into the entry, one compile each, then the link.
  std::vector<Compile> compiles = plan_compiles(result.sources, sources, key, compiler_argv, flags);
  const fs::path temp_library = temp_name(entry.library);
  const std::vector<std::string> link = link_command(compiles, compiler_argv, flags, temp_library);
  for (const Compile& c : compiles) result.command_lines.push_back(shell_command(c.argv));
  result.command_lines.push_back(shell_command(link));

  const auto start = std::chrono::steady_clock::now();
  const int jobs = opts.jobs > 0
                       ? opts.jobs
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  try {
    run_compiles(compiles, jobs);
    for (const Compile& c : compiles) {
      if (!c.ran || (!c.error && c.result.exit_code == 0)) continue;
      if (c.error) std::rethrow_exception(c.error);
      ToolchainError err(
          fmt::format("{} failed on {}:\n{}", compiler, c.source.string(), failure_text(c.result)));
      err.source = c.source;
      throw err;
    }
    for (const Compile& c : compiles) {
      if (std::rename(c.temp_object.c_str(), c.object.c_str()) != 0) {
        throw ToolchainError(fmt::format("cannot write {}: {}", c.object.string(), errno_text()));
      }
    }
    const detail::CommandResult linked = detail::run_command(link);
    if (linked.exit_code != 0) {
      ToolchainError err(fmt::format("{} failed to link {}:\n{}", compiler, entry.library.string(),
                                     failure_text(linked)));
      err.source = entry.dir;
      throw err;
    }
    result.compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    publish_library(temp_library, entry, key, compiler, flags);
  } catch (...) {
    // Nothing may stay under a final name except the sources, which the error points at.
    for (const Compile& c : compiles) {
      remove_quietly(c.temp_object);
      remove_quietly(c.object);
    }
    remove_quietly(temp_library);
    remove_quietly(entry.library);
    throw;
  }
  return result;
}

}  // namespace crucible::codegen
