// The host's list of a [T, B, N_in] batch's non-zero inputs (NetworkSpec::inputActivity),
// one per chunk of samples in the layout the first layer's vertices read
// (codes::inputListStarts): built once per batch, in the same pass that counts NaN and inf,
// so the input is read once on the host and only its non-zeros cross onto the tiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace popsnn {

struct InputLists {
  // Chunk m's list at m * (T*Bc + 1 + capacity): starts, then ids; values at m * capacity.
  std::vector<int> lists;
  std::vector<float> values;
  std::size_t mostNeeded = 0; // the largest chunk's non-zero entries (stored up to capacity)
  std::size_t nonFinite = 0;  // NaN and inf values seen
};

// x is [T, B, nIn] with B = chunks * chunkBatch, a chunk's samples one contiguous run per step.
// Entries beyond `capacity` are counted (mostNeeded), not stored: the caller grows and rebuilds.
void buildInputLists(const float *x, unsigned steps, unsigned chunks, unsigned chunkBatch,
                     unsigned nIn, std::size_t capacity, InputLists &out);
// The same for a batch of bytes (spikes or small counts, 0..255): a quarter of the float
// batch's memory to read, and nothing to count as NaN or inf.
void buildInputLists(const std::uint8_t *x, unsigned steps, unsigned chunks, unsigned chunkBatch,
                     unsigned nIn, std::size_t capacity, InputLists &out);

// The fraction of T x B x N_in entries a list needs for `needed` entries, with the headroom a
// grown list gets (as Overflow.cpp grows the traces), at most 1.
float grownInputActivity(std::size_t needed, std::size_t entries);

} // namespace popsnn
