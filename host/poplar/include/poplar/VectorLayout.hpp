// popsnn's Poplar-compatible runtime: the memory layouts a Vector or VectorList
// field may ask for. The host runtime stores every layout the same way (pointer
// and size); the layout only changes the vertex-state bytes that the memory
// accounting charges, as on the IPU.
#pragma once

namespace poplar {

enum class VectorLayout { ONE_PTR, SPAN, SCALED_PTR32, SCALED_PTR64, SCALED_PTR128, COMPACT_PTR };

enum class VectorListLayout {
  ONE_PTR,
  SCALED_PTR32,
  SCALED_PTR64,
  DELTAN,
  DELTANELEMENTS,
  COMPACT_DELTAN,
  COMPACT_PTR
};

} // namespace poplar
