// The plugin seam: the eager plugin loads and reports its ABI; each broken plugin (not a shared
// object, no crucible symbols, no factory, wrong ABI, throwing factory) gives one clear line and
// exit 2.
#include "plugin_loader.h"

#include <gtest/gtest.h>

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
