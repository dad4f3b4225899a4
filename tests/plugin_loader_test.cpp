// The plugin seam: eager loads and reports its ABI; every broken plugin (truncated, foreign, not a
// file, no symbols, wrong ABI, throwing factory) is one line naming it, never a crash or a hang.
#include "crucible/plugin_loader.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstring>
#include <fstream>

#include "cli_util.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::count_lines;
using testing::run_crucible;

const fs::path kTestPlugins = CRUCIBLE_TEST_PLUGIN_DIR;

std::string load_error(const fs::path& p) {
  try {
    load_plugin(p);
  } catch (const PluginError& e) {
    return e.what();
  }
  return "(loaded without error)";
}

TEST(PluginLoader, FindsAndLoadsEagerBesideTheBinary) {
  fs::path p = find_plugin("eager", plugin_search_path({}));
  EXPECT_EQ(p.filename(), "crucible_backend_eager.so");
  auto loaded = load_plugin(p);
  auto info = loaded->backend().info();
  EXPECT_EQ(info.name, "eager");
  EXPECT_EQ(info.abi, plugin::kAbiVersion);
}

TEST(PluginLoader, UnknownBackendNamesWhereItLooked) {
  std::string msg;
  try {
    find_plugin("nosuch", {"/tmp/a", "/tmp/b"});
  } catch (const PluginError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("backend 'nosuch': no crucible_backend_nosuch.so in /tmp/a, /tmp/b"),
            std::string::npos)
      << msg;
}

TEST(PluginLoader, PluginPathAndEnvironmentAreSearchedFirst) {
  auto dirs = plugin_search_path({"/x:/y", "/z"});
  ASSERT_GE(dirs.size(), 4u);
  EXPECT_EQ(dirs[0], "/x");
  EXPECT_EQ(dirs[1], "/y");
  EXPECT_EQ(dirs[2], "/z");
}

TEST(PluginLoader, NotASharedObject) {
  std::string msg = load_error(kTestPlugins / "not_a_library.so");
  EXPECT_NE(msg.find("not_a_library.so: not a loadable shared library"), std::string::npos) << msg;
}

TEST(PluginLoader, LibraryWithoutCrucibleSymbols) {
  std::string msg = load_error(kTestPlugins / "plain_library.so");
  EXPECT_NE(msg.find("not a crucible plugin (no crucible_plugin_abi symbol)"), std::string::npos)
      << msg;
}

TEST(PluginLoader, LibraryWithoutFactory) {
  std::string msg = load_error(kTestPlugins / "no_factory_plugin.so");
  EXPECT_NE(msg.find("exports no backend factory (crucible_create_backend)"), std::string::npos)
      << msg;
}

TEST(PluginLoader, AbiMismatchNamesBothVersions) {
  std::string msg = load_error(kTestPlugins / "wrong_abi_plugin.so");
  EXPECT_NE(msg.find("plugin ABI version 999 does not match this crucible's ABI version " +
                     std::to_string(plugin::kAbiVersion)),
            std::string::npos)
      << msg;
}

TEST(PluginLoader, ThrowingFactory) {
  std::string msg = load_error(kTestPlugins / "throwing_factory_plugin.so");
  EXPECT_NE(msg.find("backend factory failed: cannot reach the license server"), std::string::npos)
      << msg;
}

// The same cases through the CLI: exit status 2, exactly one line on stderr, nothing on stdout.
class BrokenPluginCli : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(BrokenPluginCli, OneLineAndExitTwo) {
  const auto& [file, expected] = GetParam();
  std::string graph = std::string(CRUCIBLE_SOURCE_DIR) + "/suites/tutorial/sin_cos.graph";
  auto r = run_crucible("run-graph " + graph + " --backend " + (kTestPlugins / file).string());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BrokenPluginCli,
    ::testing::Values(std::make_pair("not_a_library.so", "not a loadable shared library"),
                      std::make_pair("plain_library.so", "not a crucible plugin"),
                      std::make_pair("no_factory_plugin.so", "exports no backend factory"),
                      std::make_pair("wrong_abi_plugin.so", "plugin ABI version 999"),
                      std::make_pair("throwing_factory_plugin.so", "backend factory failed"),
                      std::make_pair("missing_plugin.so", "plugin file does not exist")),
    [](const auto& info) {
      std::string name = info.param.first;
      return name.substr(0, name.find('.'));
    });

// A real built plugin cut short, made foreign or replaced by something that is no file at all.
class HostilePluginFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_test_dir("crucible_hostile");
    real_ = testing::read_all(find_plugin("eager", plugin_search_path({})));
    ASSERT_GT(real_.size(), sizeof(Elf64_Ehdr));
    std::memcpy(&eh_, real_.data(), sizeof eh_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  fs::path truncated(const std::string& name, size_t size) {
    return write(name, real_.substr(0, size));
  }
  std::vector<Elf64_Phdr> phdrs() const {
    std::vector<Elf64_Phdr> out(eh_.e_phnum);
    std::memcpy(out.data(), real_.data() + eh_.e_phoff, out.size() * sizeof(Elf64_Phdr));
    return out;
  }
  // The middle of the largest PT_LOAD segment's file bytes.
  size_t mid_segment() const {
    Elf64_Phdr best{};
    for (const auto& ph : phdrs()) {
      if (ph.p_type == PT_LOAD && ph.p_filesz > best.p_filesz) best = ph;
    }
    return best.p_offset + best.p_filesz / 2;
  }
  // The end of the last PT_LOAD segment's file bytes: everything dlopen maps is there.
  size_t end_of_segments() const {
    size_t end = 0;
    for (const auto& ph : phdrs()) {
      if (ph.p_type == PT_LOAD) end = std::max<size_t>(end, ph.p_offset + ph.p_filesz);
    }
    return end;
  }

  fs::path dir_;
  std::string real_;
  Elf64_Ehdr eh_{};
};

TEST_F(HostilePluginFile, TruncatedAtEveryStructureIsRefusedByName) {
  const struct {
    const char* name;
    size_t size;
    const char* expected;
  } cases[] = {
      {"two_bytes.so", 2, "not an ELF file"},
      {"magic_only.so", 4, "shorter than an ELF header"},
      {"in_ident.so", 10, "shorter than an ELF header"},
      {"in_header.so", sizeof(Elf64_Ehdr) - 1, "shorter than the 64-byte ELF header"},
      {"header_only.so", sizeof(Elf64_Ehdr), "truncated"},
      {"in_phdrs.so", eh_.e_phoff + sizeof(Elf64_Phdr) + 7, "program header table"},
      {"mid_segment.so", mid_segment(), "segment"},
      {"after_segments.so", end_of_segments(), "truncated"},
      {"before_shdrs.so", eh_.e_shoff, "section header table"},
      {"in_shdrs.so", eh_.e_shoff + sizeof(Elf64_Shdr) * 2 + 3, "section header table"},
      {"one_byte_short.so", real_.size() - 1, "truncated"},
  };
  for (const auto& c : cases) {
    ASSERT_LT(c.size, real_.size()) << c.name;
    const fs::path p = truncated(c.name, c.size);
    const std::string msg = load_error(p);
    EXPECT_EQ(msg.rfind(p.string() + ": not a loadable shared library (", 0), 0u)
        << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.name << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST_F(HostilePluginFile, GarbageAndForeignFilesAreRefused) {
  auto patched = [&](const std::string& name, size_t offset, const void* bytes, size_t n) {
    std::string b = real_;
    std::memcpy(b.data() + offset, bytes, n);
    return write(name, b);
  };
  const uint16_t aarch64 = EM_AARCH64, rel = ET_REL;
  const unsigned char class32 = ELFCLASS32, big = ELFDATA2MSB;
  const struct {
    fs::path file;
    const char* expected;
  } cases[] = {
      {write("zeros.so", std::string(8192, '\0')), "not an ELF file"},
      {write("empty.so", ""), "empty file"},
      {write("text.so", "#!/bin/sh\necho not a library\n"), "not an ELF file"},
      {patched("aarch64.so", offsetof(Elf64_Ehdr, e_machine), &aarch64, 2),
       "built for AArch64, this host is x86-64"},
      {patched("elf32.so", EI_CLASS, &class32, 1), "32-bit ELF file, this crucible is 64-bit"},
      {patched("bigendian.so", EI_DATA, &big, 1), "big-endian ELF file"},
      {patched("object.so", offsetof(Elf64_Ehdr, e_type), &rel, 2), "object file (.o)"},
  };
  for (const auto& c : cases) {
    const std::string msg = load_error(c.file);
    EXPECT_EQ(msg.rfind(c.file.string() + ": not a loadable shared library (", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
}

TEST_F(HostilePluginFile, SymlinksDirectoriesAndFifosSayWhatTheyAre) {
  const fs::path dangling = dir_ / "dangling.so", loop_a = dir_ / "loop_a.so",
                 loop_b = dir_ / "loop_b.so", directory = dir_ / "directory.so",
                 fifo = dir_ / "fifo.so", good_link = dir_ / "good_link.so";
  fs::create_symlink(dir_ / "gone" / "target.so", dangling);
  fs::create_symlink(loop_b, loop_a);
  fs::create_symlink(loop_a, loop_b);
  fs::create_directory(directory);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink(find_plugin("eager", plugin_search_path({})), good_link);

  EXPECT_EQ(load_error(dangling), dangling.string() + ": dangling symlink to " +
                                      (dir_ / "gone" / "target.so").string() +
                                      " (the target does not exist)");
  EXPECT_NE(load_error(loop_a).find("loop_a.so: symlink loop"), std::string::npos);
  EXPECT_EQ(load_error(directory),
            directory.string() + ": is a directory, not a plugin (a shared library file)");
  // Nobody writes to the FIFO: opening it for reading would block forever.
  EXPECT_EQ(load_error(fifo),
            fifo.string() + ": is a FIFO (named pipe), not a plugin (a shared library file)");
  // A symlink to a good plugin is just that plugin.
  EXPECT_EQ(load_error(good_link), "(loaded without error)");

  // find_plugin reports a dangling symlink as found, so the load says "dangling", not "missing".
  EXPECT_EQ(find_plugin(dangling.string(), {}), dangling);
  fs::create_symlink(dir_ / "nowhere.so", dir_ / "crucible_backend_ghost.so");
  const fs::path later = dir_ / "later";
  fs::create_directory(later);
  fs::copy_file(find_plugin("eager", plugin_search_path({})), later / "crucible_backend_ghost.so");
  EXPECT_EQ(find_plugin("ghost", {dir_, later}), dir_ / "crucible_backend_ghost.so");
  EXPECT_THROW(find_plugin((dir_ / "missing.so").string(), {}), PluginError);
}

TEST_F(HostilePluginFile, ControlCharactersInNamesAreEscaped) {
  const std::string name = (dir_ / "evil\n\x1b[2Jname.so").string();
  std::string msg;
  try {
    find_plugin(name, {});
  } catch (const PluginError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("evil\\n\\x1b[2Jname.so: plugin file does not exist"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_EQ(msg.find('\x1b'), std::string::npos);
  // Through the CLI too: one line on stderr.
  auto r = run_crucible("run-graph " + std::string(CRUCIBLE_SOURCE_DIR) +
                        "/suites/tutorial/sin_cos.graph --backend \"$(printf '" + dir_.string() +
                        "/x\\033y\\nz.so')\"");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("x\\x1by\\nz.so: plugin file does not exist"), std::string::npos) << r.err;
}

// Through the CLI: run-graph exits 2 with one line naming the file; list backends survives every
// broken entry, names it, and still lists the good plugins.
TEST_F(HostilePluginFile, CliRunGraphAndListBackendsNeverCrash) {
  const std::string graph = std::string(CRUCIBLE_SOURCE_DIR) + "/suites/tutorial/sin_cos.graph";
  const fs::path plugins = dir_ / "plugins";
  fs::create_directory(plugins);
  std::vector<fs::path> broken = {
      plugins / "crucible_backend_midseg.so", plugins / "crucible_backend_phdrs.so",
      plugins / "crucible_backend_shdrs.so",  plugins / "crucible_backend_zeros.so",
      plugins / "crucible_backend_dangle.so", plugins / "crucible_backend_fifo.so",
      plugins / "crucible_backend_dir.so"};
  std::ofstream(broken[0], std::ios::binary) << real_.substr(0, mid_segment());
  std::ofstream(broken[1], std::ios::binary) << real_.substr(0, eh_.e_phoff + 100);
  std::ofstream(broken[2], std::ios::binary) << real_.substr(0, eh_.e_shoff);
  std::ofstream(broken[3], std::ios::binary) << std::string(4096, '\0');
  fs::create_symlink(plugins / "vanished.so", broken[4]);
  ASSERT_EQ(::mkfifo(broken[5].c_str(), 0600), 0);
  fs::create_directory(broken[6]);
  for (const fs::path& p : broken) {
    auto r = run_crucible("run-graph " + graph + " --backend " + p.string());
    EXPECT_EQ(r.status, 2) << p << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("crucible run-graph: " + p.string() + ": ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // By name through --plugin-path: the dangling symlink is reported as such, not as missing.
  auto by_name =
      run_crucible("run-graph " + graph + " --backend dangle --plugin-path " + plugins.string());
  EXPECT_EQ(by_name.status, 2);
  EXPECT_NE(by_name.err.find("dangling symlink to " + (plugins / "vanished.so").string()),
            std::string::npos)
      << by_name.err;

  auto list = run_crucible("list backends --plugin-path " + plugins.string());
  EXPECT_EQ(list.status, 1) << list.err;  // broken plugins were found: the listing reports them
  for (const fs::path& p : broken) {
    // Listed under the name --backends takes, the file's path in the reason.
    const std::string name = p.stem().string().substr(std::string("crucible_backend_").size());
    EXPECT_NE(list.out.find(name + " "), std::string::npos) << list.out;
    EXPECT_NE(list.out.find(" broken: " + p.string() + ": "), std::string::npos) << p << "\n"
                                                                                 << list.out;
  }
  EXPECT_NE(list.out.find("crucible_backend_eager.so"), std::string::npos) << list.out;
  // Every broken file, and every backend built beside crucible (eager, codegen, libtorch...).
  int built = 0;
  for (const auto& e :
       fs::directory_iterator(fs::path(CRUCIBLE_BIN_DIR) / ".." / "lib" / "crucible"))
    built += e.path().filename().string().rfind("crucible_backend_", 0) == 0 ? 1 : 0;
  EXPECT_GE(built, 2);
  EXPECT_EQ(count_lines(list.out), static_cast<int>(broken.size()) + built) << list.out;
}

TEST(PluginCli, ListBackendsShowsEager) {
  auto r = run_crucible("list backends");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("eager"), std::string::npos) << r.out;
}

TEST(PluginCli, PluginPathEnvironmentVariableIsSearched) {
  // A broken plugin found through CRUCIBLE_PLUGIN_PATH by name proves the directory was searched.
  fs::path dir = fs::temp_directory_path() / ("crucible_pp_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(kTestPlugins / "wrong_abi_plugin.so", dir / "crucible_backend_future.so",
                fs::copy_options::overwrite_existing);
  std::string graph = std::string(CRUCIBLE_SOURCE_DIR) + "/suites/tutorial/sin_cos.graph";
  auto r = run_crucible("run-graph " + graph + " --backend future",
                        "CRUCIBLE_PLUGIN_PATH=" + dir.string());
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("crucible_backend_future.so: plugin ABI version 999"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace crucible
