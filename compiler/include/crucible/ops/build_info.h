// Versions of the libraries the compiler library was built against, for run records.
#pragma once

#include <string>

namespace crucible {

// e.g. "oneDNN 2.6.3; fmt 9.1.0"
std::string library_versions();

}  // namespace crucible
