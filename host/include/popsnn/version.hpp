#pragma once
#include <string>

namespace popsnn {

/// The version of the popsnn C++ library, e.g. "0.1.0".
std::string version();

} // namespace popsnn
