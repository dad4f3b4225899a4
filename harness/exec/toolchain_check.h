// What a backend needs on the machine that runs it, checked before a run starts: codegen compiles
// the C++ it generates with $CXX (else `c++`) on the node its worker runs on, so a compute node or
// container without a compiler would otherwise fail every model one by one as fail_to_compile.
#pragma once

#include <string>
#include <vector>

namespace crucible {

// The one-line reason `backends` cannot run here ("" when they can): codegen among them and its
// compiler not found. `cxx` is $CXX (nullptr when unset), `path` is $PATH; the compiler is the
// first word of $CXX, or `c++`, looked up as execvp would.
std::string missing_toolchain(const std::vector<std::string>& backends, const char* cxx,
                              const char* path);

// Throws Error with missing_toolchain's line for this process's environment, if any.
void check_toolchain(const std::vector<std::string>& backends);

}  // namespace crucible
