// libFuzzer target: -c option strings, one per line, through everything that reads them before a
// worker starts: parse_config, which backend each reaches, and codegen's options.
#include <boost/program_options/errors.hpp>
#include <sstream>

#include "cli.h"
#include "crucible/codegen/codegen_config.h"
#include "crucible/core/error.h"
#include "fuzz_support.h"
#include "run/backend_setup/backend_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in{std::string(crucible::fuzz::as_text(data, size))};
  std::vector<std::string> pairs;
  for (std::string line; std::getline(in, line);) pairs.push_back(line);
  try {
    const auto config = crucible::cli::parse_config(pairs);
    for (const char* b : {"eager", "codegen", "libtorch", "libtorch_jit"})
      crucible::backend_config(config, b);
    crucible::codegen::CodegenConfig::parse(crucible::backend_config(config, "codegen"));
  } catch (const crucible::Error&) {
  } catch (const boost::program_options::error&) {
  }
  return 0;
}
