// Which -c options reach which backend: unscoped ones every backend but eager, BACKEND:key ones
// that backend alone; a malformed scope is refused by the parser in one line.
#include "backend_config.h"

#include <gtest/gtest.h>

#include "cli.h"
#include "cli_util.h"

namespace crucible {
namespace {

TEST(BackendConfig, ScopedOptionsReachTheirBackendAlone) {
  const std::map<std::string, std::string> c = {
      {"fusion", "off"}, {"faulty:fault.mlp", "slower_pct:5"}, {"eager:threads", "1"}};
  EXPECT_EQ(backend_config(c, "codegen"), (std::map<std::string, std::string>{{"fusion", "off"}}));
  EXPECT_EQ(backend_config(c, "faulty"),
            (std::map<std::string, std::string>{{"fusion", "off"}, {"fault.mlp", "slower_pct:5"}}));
  EXPECT_EQ(backend_config(c, "eager"), (std::map<std::string, std::string>{{"threads", "1"}}));
  // A backend whose name is a prefix of another's gets nothing of the other's.
  EXPECT_EQ(backend_config({{"faultyx:k", "v"}}, "faulty"), (std::map<std::string, std::string>{}));
}

TEST(BackendConfig, MalformedScopesAreRefused) {
  for (const std::string bad : {":k=v", "faulty:=v"}) {
    EXPECT_THROW(cli::parse_config({bad}), boost::program_options::error) << bad;
  }
  EXPECT_EQ(cli::parse_config({"faulty:k=a:b"}).at("faulty:k"), "a:b");  // colons in the value
  const auto r = testing::run_crucible("run --suite tutorial -c :fusion=off --dry-run");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("-c expects BACKEND:key=value, got ':fusion=off'"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace crucible
