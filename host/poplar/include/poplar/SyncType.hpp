#pragma once

namespace poplar {

// INTERNAL: the tiles of one IPU; EXTERNAL/GLOBAL: every IPU and the host.
enum class SyncType { INTERNAL, EXTERNAL, GLOBAL };

} // namespace poplar
