// Tests of the codegen toolchain: shared objects built from C++ sources through the kernel cache;
// hits and misses, verification of cached entries, concurrency and cache-directory safety.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "codegen/content_hash.h"
#include "crucible/codegen/toolchain.h"

namespace crucible::codegen {
namespace {

namespace fs = std::filesystem;

const std::string kAddOne = "extern \"C\" int add_one(int x) { return x + 1; }\n";
const std::string kOmpSum =
    "extern \"C\" double omp_sum(const double* x, long n) {\n"
    "  double s = 0;\n"
    "#pragma omp parallel for reduction(+ : s)\n"
    "  for (long i = 0; i < n; ++i) s += x[i];\n"
    "  return s;\n"
    "}\n";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

// The .meta's fields, in file order.
std::vector<std::pair<std::string, std::string>> read_meta(const fs::path& p) {
  std::vector<std::pair<std::string, std::string>> fields;
  std::istringstream in(slurp(p));
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    fields.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return fields;
}

void write_meta(const fs::path& p, const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string text;
  for (const auto& [k, v] : fields) text += fmt::format("{}={}\n", k, v);
  spit(p, text);
}

void set_meta_field(const fs::path& meta, const std::string& key, const std::string& value) {
  auto fields = read_meta(meta);
  for (auto& [k, v] : fields) {
    if (k == key) v = value;
  }
  write_meta(meta, fields);
}

fs::path meta_of(const BuildResult& r) { return r.library.parent_path() / (r.key + ".meta"); }

std::set<std::string> entry_files(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& f : fs::directory_iterator(dir)) names.insert(f.path().filename().string());
  return names;
}

bool has_temp_file(const fs::path& dir) {
  for (const std::string& n : entry_files(dir)) {
    if (n.find(".tmp.") != std::string::npos) return true;
  }
  return false;
}

int call_add_one(const BuildResult& r, int x) {
  LoadedLibrary lib(r.library, r.key);
  return lib.function<int(int)>("add_one")(x);
}

class ToolchainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "crucible_toolchain_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    opts_ = ToolchainOptions::defaults();
    opts_.cache_dir = root_ / "cache";
    opts_.jobs = 2;
  }
  void TearDown() override {
    chmod(root_.c_str(), 0700);
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path root_;
  ToolchainOptions opts_;
};

TEST_F(ToolchainTest, FirstBuildMissesAndLoads) {
  const BuildResult r = build_shared_library({kAddOne}, opts_);
  EXPECT_FALSE(r.cache_hit);
  EXPECT_GT(r.compile_seconds, 0);
  EXPECT_EQ(r.rejected, "");
  ASSERT_EQ(r.key.size(), 64u);
  EXPECT_EQ(r.key.find_first_not_of("0123456789abcdef"), std::string::npos);
  const fs::path entry = opts_.cache_dir / r.key;
  EXPECT_EQ(r.library, entry / (r.key + ".so"));
  ASSERT_TRUE(fs::exists(r.library));

  // Layout: sources kept for debugging, objects, the library and its .meta, no temporaries.
  ASSERT_EQ(r.sources.size(), 2u);
  EXPECT_EQ(r.sources[0], entry / "tu0.cpp");
  EXPECT_EQ(slurp(r.sources[0]), kAddOne);
  EXPECT_NE(slurp(r.sources[1]).find(r.key), std::string::npos);
  const auto files = entry_files(entry);
  for (const char* f : {"tu0.cpp", "tu0.o", "cache_key.cpp", "cache_key.o"})
    EXPECT_TRUE(files.count(f)) << f;
  EXPECT_FALSE(has_temp_file(entry));
  const auto meta = read_meta(meta_of(r));
  ASSERT_GE(meta.size(), 4u);
  EXPECT_EQ(meta[0], std::make_pair(std::string("key"), r.key));
  EXPECT_EQ(meta[1], std::make_pair(std::string("size"), std::to_string(fs::file_size(r.library))));
  std::map<std::string, std::string> m(meta.begin(), meta.end());
  EXPECT_EQ(m["sha256"], sha256_file_hex(r.library));
  EXPECT_EQ(m["compiler"], opts_.compiler);
  EXPECT_EQ(m["flags"], "-O3 -march=native -fopenmp -shared -fPIC -std=c++17");

  // What ran: one -c per translation unit (no -shared there), then one -shared link.
  ASSERT_EQ(r.command_lines.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(r.command_lines[i].find(" -c "), std::string::npos) << r.command_lines[i];
    EXPECT_NE(r.command_lines[i].find("-fPIC"), std::string::npos) << r.command_lines[i];
    EXPECT_EQ(r.command_lines[i].find("-shared"), std::string::npos) << r.command_lines[i];
  }
  EXPECT_NE(r.command_lines[0].find("tu0.cpp"), std::string::npos);
  EXPECT_NE(r.command_lines[2].find("-shared"), std::string::npos);
  EXPECT_NE(r.command_lines[2].find("tu0.o"), std::string::npos);

  EXPECT_EQ(call_add_one(r, 41), 42);
}

TEST_F(ToolchainTest, SecondBuildOfSameSourcesHits) {
  const BuildResult first = build_shared_library({kAddOne}, opts_);
  const auto mtime = fs::last_write_time(first.library);
  const BuildResult second = build_shared_library({kAddOne}, opts_);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.compile_seconds, 0);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.library, first.library);
  EXPECT_TRUE(second.command_lines.empty());
  EXPECT_EQ(fs::last_write_time(second.library), mtime);  // not rebuilt
  EXPECT_EQ(call_add_one(second, 1), 2);
}

TEST_F(ToolchainTest, ChangingFlagsMisses) {
  ToolchainOptions o2 = opts_;
  o2.flags = {"-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17"};
  ToolchainOptions fast = opts_;
  fast.fast_math = true;
  const BuildResult a = build_shared_library({kAddOne}, opts_);
  const BuildResult b = build_shared_library({kAddOne}, o2);
  const BuildResult c = build_shared_library({kAddOne}, fast);
  EXPECT_FALSE(b.cache_hit);
  EXPECT_FALSE(c.cache_hit);
  EXPECT_NE(a.key, b.key);
  EXPECT_NE(a.key, c.key);
  EXPECT_NE(b.key, c.key);
  for (const std::string& line : a.command_lines)
    EXPECT_EQ(line.find("-ffast-math"), std::string::npos);
  for (const std::string& line : c.command_lines)
    EXPECT_NE(line.find("-ffast-math"), std::string::npos);
  ASSERT_FALSE(b.command_lines.empty());
  EXPECT_NE(b.command_lines[0].find("-O2"), std::string::npos);
  EXPECT_EQ(call_add_one(c, 2), 3);
}

TEST_F(ToolchainTest, ChangingOneSourceByteMisses) {
  std::string changed = kAddOne;
  changed[changed.find("x + 1") + 4] = '2';
  const BuildResult a = build_shared_library({kAddOne}, opts_);
  const BuildResult b = build_shared_library({changed}, opts_);
  EXPECT_FALSE(b.cache_hit);
  EXPECT_NE(a.key, b.key);
  EXPECT_EQ(call_add_one(a, 1), 2);
  EXPECT_EQ(call_add_one(b, 1), 3);
  // Splitting the same text differently across translation units is a different build too.
  // Both lists concatenate to the same bytes.
  const BuildResult two = build_shared_library({"int v1;\n", "int v2;\n"}, opts_);
  const BuildResult one = build_shared_library({"int v1;\nint v2;\n", ""}, opts_);
  EXPECT_FALSE(one.cache_hit);
  EXPECT_NE(one.key, two.key);
}

TEST_F(ToolchainTest, TranslationUnitsCompileInParallelIntoOneLibrary) {
  // A compiler wrapper: each -c marks itself running, waits (up to 5 s) until another compile runs
  // too, and records how many were running. Run one after another, each would only see itself.
  const fs::path marks = root_ / "marks";
  fs::create_directory(marks);
  const fs::path wrapper = root_ / "cxx_wrapper.sh";
  const std::string cxx = ToolchainOptions::default_compiler();
  spit(wrapper, fmt::format(R"(#!/bin/sh
case " $* " in *" -c "*)
  d='{0}'; touch "$d/running.$$"; i=0
  while [ $(ls "$d" | wc -l) -lt 2 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  ls "$d" | wc -l >> '{1}'
  {2} "$@"; rc=$?
  rm -f "$d/running.$$"
  exit $rc ;;
esac
exec {2} "$@"
)",
                            marks.string(), (root_ / "seen").string(), cxx));
  fs::permissions(wrapper, fs::perms::owner_all);
  ToolchainOptions o = opts_;
  o.compiler = wrapper.string();
  o.jobs = 3;
  const BuildResult r = build_shared_library({kAddOne, kOmpSum}, o);
  EXPECT_FALSE(r.cache_hit);
  ASSERT_EQ(r.sources.size(), 3u);
  EXPECT_EQ(r.sources[1].filename(), "tu1.cpp");
  EXPECT_EQ(slurp(r.sources[1]), kOmpSum);
  EXPECT_EQ(r.command_lines.size(), 4u);  // three compiles and a link
  std::istringstream seen(slurp(root_ / "seen"));
  int most = 0;
  for (int n; seen >> n;) most = std::max(most, n);
  EXPECT_GE(most, 2) << "translation units were not compiled concurrently";

  LoadedLibrary lib(r.library, r.key);
  EXPECT_EQ(lib.function<int(int)>("add_one")(9), 10);
  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  EXPECT_EQ(lib.function<double(const double*, long)>("omp_sum")(x.data(), 1000), 499500.0);
  EXPECT_THROW(lib.symbol("no_such_kernel"), ToolchainError);
  try {
    lib.symbol("no_such_kernel");
  } catch (const ToolchainError& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos);
  }
}

TEST_F(ToolchainTest, CompileErrorThrowsWithDiagnosticsAndSourcePath) {
  const std::string broken = "extern \"C\" int broken() { return undefined_name_xyz; }\n";
  fs::path failed;
  try {
    build_shared_library({kAddOne, broken}, opts_);
    FAIL() << "no exception";
  } catch (const ToolchainError& e) {
    const std::string what = e.what();
    failed = e.source;
    EXPECT_EQ(failed.filename(), "tu1.cpp");
    EXPECT_NE(what.find(failed.string()), std::string::npos) << what;
    EXPECT_NE(what.find("error"), std::string::npos) << what;
    EXPECT_NE(what.find("undefined_name_xyz"), std::string::npos) << what;
    EXPECT_EQ(what.rfind(opts_.compiler + " failed on ", 0), 0u) << what;
  }
  ASSERT_FALSE(failed.empty());
  EXPECT_EQ(slurp(failed), broken);  // kept, so the message's path can be opened
  // Nothing under a final name except the sources and the lock; no temporaries either.
  const auto files = entry_files(failed.parent_path());
  EXPECT_EQ(files, (std::set<std::string>{".lock", "tu0.cpp", "tu1.cpp", "cache_key.cpp"}));
}

TEST_F(ToolchainTest, LinkErrorThrows) {
  // Each unit compiles; together they define add_one twice.
  try {
    build_shared_library({kAddOne, kAddOne + "// second copy\n"}, opts_);
    FAIL() << "no exception";
  } catch (const ToolchainError& e) {
    EXPECT_NE(std::string(e.what()).find("failed to link"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("add_one"), std::string::npos) << e.what();
    const auto files = entry_files(e.source);
    for (const std::string& f : files) {
      EXPECT_TRUE(f.ends_with(".cpp") || f == ".lock") << f << " left behind";
    }
  }
}

TEST_F(ToolchainTest, CorruptedLibraryIsRejectedAndRebuilt) {
  const BuildResult first = build_shared_library({kAddOne}, opts_);
  const auto size = fs::file_size(first.library);

  // Truncated (a killed copy, a full disk): the size no longer matches the .meta.
  fs::resize_file(first.library, size / 2);
  const BuildResult after_truncate = build_shared_library({kAddOne}, opts_);
  EXPECT_FALSE(after_truncate.cache_hit);
  EXPECT_NE(after_truncate.rejected.find("size"), std::string::npos) << after_truncate.rejected;
  EXPECT_EQ(fs::file_size(after_truncate.library), size);

  // Same size, flipped bytes: only the digest notices.
  std::string bytes = slurp(first.library);
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 16; ++i)
    bytes[i] = static_cast<char>(~bytes[i]);
  spit(first.library, bytes);
  ASSERT_EQ(fs::file_size(first.library), size);
  const BuildResult after_flip = build_shared_library({kAddOne}, opts_);
  EXPECT_FALSE(after_flip.cache_hit);
  EXPECT_NE(after_flip.rejected.find("SHA-256"), std::string::npos) << after_flip.rejected;

  EXPECT_TRUE(build_shared_library({kAddOne}, opts_).cache_hit);
  EXPECT_EQ(call_add_one(after_flip, 5), 6);
}

TEST_F(ToolchainTest, EntryWithoutMetaOrWithStaleTemporariesIsRebuilt) {
  const BuildResult first = build_shared_library({kAddOne}, opts_);
  // A build killed between publishing the .so and its .meta, with a half-written temporary left
  // over.
  fs::remove(meta_of(first));
  const fs::path stale = first.library.string() + ".tmp.99999.0";
  spit(stale, "half a library");
  const BuildResult second = build_shared_library({kAddOne}, opts_);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_NE(second.rejected.find(".meta"), std::string::npos) << second.rejected;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(meta_of(second)));

  // A .meta for another key is rejected as well.
  set_meta_field(meta_of(second), "key", std::string(64, '0'));
  const BuildResult third = build_shared_library({kAddOne}, opts_);
  EXPECT_FALSE(third.cache_hit);
  EXPECT_NE(third.rejected.find("key"), std::string::npos) << third.rejected;
  EXPECT_EQ(call_add_one(third, 0), 1);
}

TEST_F(ToolchainTest, ForeignLibraryOverEntryIsRejected) {
  const BuildResult mine = build_shared_library({kAddOne}, opts_);
  const BuildResult other = build_shared_library({kOmpSum}, opts_);
  const fs::path meta = meta_of(mine);

  // Another valid library copied over the entry, with the .meta's size edited to match.
  fs::copy_file(other.library, mine.library, fs::copy_options::overwrite_existing);
  set_meta_field(meta, "size", std::to_string(fs::file_size(other.library)));
  BuildResult r = build_shared_library({kAddOne}, opts_);
  EXPECT_FALSE(r.cache_hit);
  EXPECT_NE(r.rejected.find("SHA-256"), std::string::npos) << r.rejected;

  // Even with the digest forged too, the library lacks this entry's embedded key.
  fs::copy_file(other.library, mine.library, fs::copy_options::overwrite_existing);
  set_meta_field(meta, "size", std::to_string(fs::file_size(other.library)));
  set_meta_field(meta, "sha256", sha256_file_hex(other.library));
  r = build_shared_library({kAddOne}, opts_);
  EXPECT_FALSE(r.cache_hit);
  EXPECT_NE(r.rejected.find("embed"), std::string::npos) << r.rejected;
  EXPECT_EQ(call_add_one(r, 7), 8);

  // And the loader refuses it by the symbol: another crucible library, and a library without the
  // symbol.
  const fs::path foreign = root_ / "foreign.so";
  fs::copy_file(other.library, foreign);
  try {
    LoadedLibrary lib(foreign, mine.key);
    FAIL() << "loaded a library built for another key";
  } catch (const ToolchainError& e) {
    EXPECT_NE(std::string(e.what()).find(other.key), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(mine.key), std::string::npos) << e.what();
  }
  try {
    LoadedLibrary lib(fs::path(CRUCIBLE_TEST_PLUGIN_DIR) / "plain_library.so", mine.key);
    FAIL() << "loaded a library without crucible_cache_key";
  } catch (const ToolchainError& e) {
    EXPECT_NE(std::string(e.what()).find("crucible_cache_key"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoadedLibrary(root_ / "missing.so", mine.key), ToolchainError);
}

// Something the cache never writes, planted in place of one of an entry's files: a FIFO (reading it
// would block forever), a symlink to /dev/zero (reading it never ends), a directory, or a sparse
// file far over any cap (reading it would take 2 GiB).
enum class Planted { kFifo, kDevZero, kDirectory, kOversized };
constexpr uint64_t kOversized = uint64_t{2} << 30;

const char* planted_name(Planted p) {
  switch (p) {
    case Planted::kFifo:
      return "fifo";
    case Planted::kDevZero:
      return "symlink to /dev/zero";
    case Planted::kDirectory:
      return "directory";
    case Planted::kOversized:
      return "oversized file";
  }
  return "";
}

void plant(const fs::path& p, Planted what) {
  fs::remove_all(p);
  switch (what) {
    case Planted::kFifo:
      ASSERT_EQ(mkfifo(p.c_str(), 0600), 0);
      break;
    case Planted::kDevZero:
      fs::create_symlink("/dev/zero", p);
      break;
    case Planted::kDirectory:
      fs::create_directory(p);
      spit(p / "inside", "a file in a directory where a file should be");
      break;
    case Planted::kOversized:
      spit(p, "");
      fs::resize_file(p, kOversized);  // sparse: no disk, no memory
      break;
  }
}

// A failure here must be a test failure, not a hung or swapping machine: a read that never ends
// runs into the address-space limit (bad_alloc), one that blocks into the alarm.
class HostileCacheTest : public ToolchainTest {
 protected:
  void SetUp() override {
    ToolchainTest::SetUp();
    ASSERT_EQ(getrlimit(RLIMIT_AS, &old_as_), 0);
#ifndef CRUCIBLE_SANITIZED
    // A sanitizer's shadow memory takes terabytes of address space; ci/sanitize.sh caps single
    // allocations instead (ASAN_OPTIONS max_allocation_size_mb, allocator_may_return_null).
    rlimit as = old_as_;
    as.rlim_cur = std::min<rlim_t>(old_as_.rlim_max, rlim_t{4} << 30);
    ASSERT_EQ(setrlimit(RLIMIT_AS, &as), 0);
#endif
    alarm(240);
  }
  void TearDown() override {
    alarm(0);
    setrlimit(RLIMIT_AS, &old_as_);
    ToolchainTest::TearDown();
  }
  rlimit old_as_{};
};

TEST_F(HostileCacheTest, BadLibraryOrMetaIsAMissNeverFollowed) {
  const BuildResult first = build_shared_library({kAddOne}, opts_);
  struct stat zero_before;
  ASSERT_EQ(stat("/dev/zero", &zero_before), 0);
  for (const bool library : {true, false}) {
    for (Planted what :
         {Planted::kFifo, Planted::kDevZero, Planted::kDirectory, Planted::kOversized}) {
      SCOPED_TRACE(std::string(library ? ".so" : ".meta") + " replaced by " + planted_name(what));
      const fs::path target = library ? first.library : meta_of(first);
      plant(target, what);
      // An oversized library with a .meta claiming that size: the cap refuses it, unread.
      if (library && what == Planted::kOversized) {
        set_meta_field(meta_of(first), "size", std::to_string(kOversized));
      }
      BuildResult r;
      ASSERT_NO_THROW(r = build_shared_library({kAddOne}, opts_));
      EXPECT_FALSE(r.cache_hit);
      const std::string expected = what == Planted::kFifo        ? "a FIFO"
                                   : what == Planted::kDevZero   ? "a symlink"
                                   : what == Planted::kDirectory ? "a directory"
                                   : library                     ? "more than a cache file may have"
                                             : "more than a cache file may have";
      EXPECT_NE(r.rejected.find(expected), std::string::npos) << r.rejected;
      EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(target))) << target;
      EXPECT_EQ(call_add_one(r, 1), 2);
      EXPECT_TRUE(build_shared_library({kAddOne}, opts_).cache_hit);
    }
  }
  struct stat zero_after;
  ASSERT_EQ(stat("/dev/zero", &zero_after), 0);
  EXPECT_TRUE(S_ISCHR(zero_after.st_mode));
  EXPECT_EQ(zero_after.st_rdev, zero_before.st_rdev);
}

TEST_F(HostileCacheTest, BadSourceObjectOrLockIsReplacedOnRebuild) {
  const BuildResult first = build_shared_library({kAddOne}, opts_);
  const fs::path entry = first.library.parent_path();
  for (const char* name : {"tu0.cpp", "cache_key.cpp", "tu0.o", "cache_key.o", ".lock"}) {
    for (Planted what :
         {Planted::kFifo, Planted::kDevZero, Planted::kDirectory, Planted::kOversized}) {
      SCOPED_TRACE(std::string(name) + " replaced by " + planted_name(what));
      plant(entry / name, what);
      // A good entry is still a hit: none of these files is read then (the lock is opened
      // without following a symlink, and replaced if it is not a regular file).
      BuildResult hit;
      ASSERT_NO_THROW(hit = build_shared_library({kAddOne}, opts_));
      EXPECT_TRUE(hit.cache_hit);
      // Without its .meta the entry is rebuilt, and the planted thing replaced by a real file.
      fs::remove(meta_of(first));
      BuildResult r;
      ASSERT_NO_THROW(r = build_shared_library({kAddOne}, opts_));
      EXPECT_FALSE(r.cache_hit);
      EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(entry / name))) << name;
      if (std::string(name).ends_with(".cpp")) {
        EXPECT_LT(fs::file_size(entry / name), 1u << 20);
      }
      EXPECT_EQ(call_add_one(r, 2), 3);
    }
  }
  EXPECT_TRUE(fs::exists("/dev/zero"));
}

TEST_F(HostileCacheTest, EntryDirectoryIsNeverFollowed) {
  const BuildResult first = build_shared_library({kAddOne}, opts_);
  const fs::path entry = first.library.parent_path();
  // A symlink to a directory holding a valid copy of the entry: still not followed.
  const fs::path elsewhere = root_ / "elsewhere";
  fs::create_directory(elsewhere);
  ASSERT_EQ(chmod(elsewhere.c_str(), 0700), 0);
  for (const auto& f : fs::directory_iterator(entry))
    fs::copy(f.path(), elsewhere / f.path().filename());
  fs::remove_all(entry);
  fs::create_directory_symlink(elsewhere, entry);
  BuildResult r;
  ASSERT_NO_THROW(r = build_shared_library({kAddOne}, opts_));
  EXPECT_FALSE(r.cache_hit);
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(entry)));
  EXPECT_TRUE(fs::exists(elsewhere / (first.key + ".so")));  // the symlink's target is untouched
  EXPECT_EQ(call_add_one(r, 3), 4);
  for (Planted what : {Planted::kFifo, Planted::kDevZero, Planted::kOversized}) {
    SCOPED_TRACE(std::string("entry replaced by ") + planted_name(what));
    plant(entry, what);
    ASSERT_NO_THROW(r = build_shared_library({kAddOne}, opts_));
    EXPECT_FALSE(r.cache_hit);
    EXPECT_TRUE(fs::is_directory(fs::symlink_status(entry)));
    EXPECT_EQ(call_add_one(r, 4), 5);
  }
}

TEST_F(ToolchainTest, SharedWritableCacheDirIsRefused) {
  for (mode_t mode : {0777, 0770, 0702}) {
    const fs::path dir = root_ / fmt::format("shared{:o}", mode);
    fs::create_directory(dir);
    ASSERT_EQ(chmod(dir.c_str(), mode), 0);
    ToolchainOptions o = opts_;
    o.cache_dir = dir;
    try {
      build_shared_library({kAddOne}, o);
      ADD_FAILURE() << "accepted a cache dir with mode " << std::oct << mode;
    } catch (const ToolchainError& e) {
      EXPECT_NE(std::string(e.what()).find("writable"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_empty(dir)) << "wrote into a refused directory";
  }
}

TEST_F(ToolchainTest, CacheDirOwnedBySomeoneElseIsRefused) {
  fs::path dir = root_ / "theirs";
  fs::create_directory(dir);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  if (geteuid() == 0) {
    ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);
  } else {
    dir = "/";  // owned by root, not writable by others: only the owner check can refuse it
  }
  ToolchainOptions o = opts_;
  o.cache_dir = dir;
  try {
    build_shared_library({kAddOne}, o);
    ADD_FAILURE() << "accepted a cache dir owned by another user";
  } catch (const ToolchainError& e) {
    EXPECT_NE(std::string(e.what()).find("owned by uid"), std::string::npos) << e.what();
  }
}

TEST_F(ToolchainTest, CacheDirIsCreatedPrivate) {
  ToolchainOptions o = opts_;
  o.cache_dir = root_ / "deep" / "er" / "kernels";
  const mode_t old =
      umask(0);  // the most permissive umask: the mode must come from us, not from it
  BuildResult r;
  try {
    r = build_shared_library({kAddOne}, o);
  } catch (...) {
    umask(old);
    throw;
  }
  umask(old);
  struct stat st;
  ASSERT_EQ(stat(o.cache_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(stat(r.library.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(stat(r.sources[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
  // An existing private directory is used as it is.
  EXPECT_TRUE(build_shared_library({kAddOne}, o).cache_hit);
}

TEST_F(ToolchainTest, ConcurrentThreadsBuildingOneKeyBothSucceed) {
  BuildResult results[2];
  std::string errors[2];
  auto build = [&](int i) {
    try {
      results[i] = build_shared_library({kAddOne, kOmpSum}, opts_);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  };
  std::thread t0(build, 0), t1(build, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(results[0].library, results[1].library);
  // The entry lock makes the later one wait and take the first one's result instead of compiling
  // again.
  EXPECT_NE(results[0].cache_hit, results[1].cache_hit);
  EXPECT_EQ(call_add_one(results[0], 1), 2);
  EXPECT_FALSE(has_temp_file(results[0].library.parent_path()));
}

TEST_F(ToolchainTest, ConcurrentProcessesBuildingOneKeyBothSucceed) {
  // Exit codes: 10 = built, 11 = hit, 1 = failed.
  pid_t pids[2];
  for (pid_t& pid : pids) {
    pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 1;
      try {
        code = build_shared_library({kAddOne}, opts_).cache_hit ? 11 : 10;
      } catch (...) {
      }
      _exit(code);
    }
  }
  std::multiset<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    codes.insert(WEXITSTATUS(status));
  }
  EXPECT_EQ(codes, (std::multiset<int>{10, 11}));
  const BuildResult r = build_shared_library({kAddOne}, opts_);
  EXPECT_TRUE(r.cache_hit);
  EXPECT_EQ(call_add_one(r, 2), 3);
}

TEST_F(ToolchainTest, CompilerVersionAndBadCompiler) {
  const std::string v = compiler_version(opts_.compiler);
  EXPECT_FALSE(v.empty());
  EXPECT_EQ(v.find('\n'), std::string::npos);
  EXPECT_EQ(compiler_version(opts_.compiler), v);
  EXPECT_THROW(compiler_version("/nonexistent/bin/c++"), ToolchainError);
  ToolchainOptions o = opts_;
  o.compiler = "/nonexistent/bin/c++";
  EXPECT_THROW(build_shared_library({kAddOne}, o), ToolchainError);
}

// Sets an environment variable for the scope, restoring the old value (or its absence) afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ToolchainOptionsTest, DefaultsFollowTheEnvironment) {
  EXPECT_EQ(ToolchainOptions::default_flags(),
            (std::vector<std::string>{"-O3", "-march=native", "-fopenmp", "-shared", "-fPIC",
                                      "-std=c++17"}));
  ToolchainOptions plain;
  EXPECT_EQ(plain.flags, ToolchainOptions::default_flags());
  EXPECT_FALSE(plain.fast_math);
  {
    ScopedEnv cxx("CXX", "clang++");
    EXPECT_EQ(ToolchainOptions::defaults().compiler, "clang++");
  }
  {
    ScopedEnv cxx("CXX", nullptr);
    EXPECT_EQ(ToolchainOptions::defaults().compiler, "c++");
  }
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv dir("CRUCIBLE_CACHE_DIR", "/tmp/cc");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(ToolchainOptions::defaults().cache_dir, fs::path("/tmp/cc"));
  }
  ScopedEnv dir("CRUCIBLE_CACHE_DIR", nullptr);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(ToolchainOptions::defaults().cache_dir, fs::path("/xdg/crucible/kernels"));
  }
  ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(ToolchainOptions::defaults().cache_dir,
            fs::path("/home/someone/.cache/crucible/kernels"));
}

TEST(ContentHashTest, MatchesFipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(sha256_hex(million),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Fed in uneven pieces, the digest is the same.
  Sha256 h;
  for (size_t pos = 0, step = 1; pos < million.size(); pos += step, step = step * 3 % 97 + 1) {
    h.update(std::string_view(million).substr(pos, step));
  }
  EXPECT_EQ(h.hex_digest(), sha256_hex(million));
  // Length-prefixed fields keep ("ab","c") and ("a","bc") apart.
  Sha256 a, b;
  a.update_field("ab");
  a.update_field("c");
  b.update_field("a");
  b.update_field("bc");
  EXPECT_NE(a.hex_digest(), b.hex_digest());
}

TEST(DiagnosticsTest, TrimKeepsTheFirstErrorLines) {
  std::string out;
  for (int i = 0; i < 100; ++i) out += fmt::format("note: noise line {}\n", i);
  out += "In function 'f':\ntu0.cpp:3:5: error: 'y' was not declared\n";
  for (int i = 0; i < 500; ++i) out += fmt::format("tu0.cpp:{}:1: error: more {}\n", i + 4, i);
  const std::string t = detail::trim_diagnostics(out);
  EXPECT_LE(t.size(), 4100u);
  EXPECT_NE(t.find("error: 'y' was not declared"), std::string::npos);
  EXPECT_NE(t.find("In function 'f'"), std::string::npos);
  EXPECT_EQ(t.find("noise line 5\n"), std::string::npos);
  EXPECT_NE(t.find("more lines of compiler output not shown"), std::string::npos);
  EXPECT_EQ(detail::trim_diagnostics("a: error: b\n"), "a: error: b");
}

// The one compiler rule (ToolchainOptions::compiler_for) and the check a run asks before it starts:
// $CXX's first word, a path or on PATH; else c++. A set $CXX that is missing is not replaced.
TEST(MissingCompiler, LooksForCxxThenCxxOnPath) {
  const fs::path dir = fs::temp_directory_path() / ("crucible_cxx_" + std::to_string(::getpid()));
  const fs::path bin = dir / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "c++") << "#!/bin/sh\n";
  std::ofstream(bin / "g++-13") << "#!/bin/sh\n";
  std::ofstream(bin / "not-executable") << "";
  ::chmod((bin / "c++").c_str(), 0755);
  ::chmod((bin / "g++-13").c_str(), 0755);
  const std::string path = "/nonexistent:" + bin.string();
  EXPECT_EQ(ToolchainOptions::compiler_for(nullptr), "c++");
  EXPECT_EQ(ToolchainOptions::compiler_for(" \t"), "c++");
  EXPECT_EQ(ToolchainOptions::compiler_for("ccache g++"), "ccache g++");
  EXPECT_EQ(missing_compiler(nullptr, path.c_str()), "");
  EXPECT_EQ(missing_compiler("g++-13", path.c_str()), "");
  EXPECT_EQ(missing_compiler("  g++-13 -O2", path.c_str()), "");  // its first word
  EXPECT_EQ(missing_compiler((bin / "g++-13").c_str(), ""), "");  // a path
  EXPECT_EQ(missing_compiler(" ", path.c_str()), "");             // blank: c++
  EXPECT_NE(missing_compiler(nullptr, "/nonexistent").find("'c++' is not on PATH"),
            std::string::npos);
  EXPECT_NE(missing_compiler("not-executable", path.c_str())
                .find("codegen: no C++ compiler: $CXX is 'not-executable'"),
            std::string::npos);
  EXPECT_NE(missing_compiler("clang++-99", path.c_str()), "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace crucible::codegen
