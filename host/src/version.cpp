#include "popsnn/version.hpp"

namespace popsnn {

std::string version() { return POPSNN_VERSION; }

} // namespace popsnn
