// The plan of a matrix product C[m, n] = A[m, k] . B[k, n]: C cut into
// rowBlocks x colBlocks blocks, block (i, j) on tile i * colBlocks + j. A pure
// function of the shapes, the element sizes and the tile count, apart from the
// graph it will be built on.
#ifndef POPSNN_POPLIBS_MATMULPLAN_HPP
#define POPSNN_POPLIBS_MATMULPLAN_HPP

#include <cstddef>
#include <cstdint>

namespace poplin {
namespace detail {

struct MatMulPlan {
  std::size_t m = 0, k = 0, n = 0;
  std::size_t rowBlocks = 1, colBlocks = 1;
  bool halfInput = false;

  std::size_t rowsPerBlock() const { return (m + rowBlocks - 1) / rowBlocks; }
  std::size_t colsPerBlock() const { return (n + colBlocks - 1) / colBlocks; }
  std::size_t rowBegin(std::size_t i) const { return clamp(i * rowsPerBlock(), m); }
  std::size_t colBegin(std::size_t j) const { return clamp(j * colsPerBlock(), n); }
  unsigned tile(std::size_t i, std::size_t j) const { return unsigned(i * colBlocks + j); }
  std::size_t tilesUsed() const { return rowBlocks * colBlocks; }

private:
  static std::size_t clamp(std::size_t v, std::size_t hi) { return v < hi ? v : hi; }
};

// The split that minimises one tile's estimated cycles: its multiply-adds plus
// the bytes of A's rows and B's columns it receives.
MatMulPlan planMatMul(std::size_t m, std::size_t k, std::size_t n, unsigned tiles, bool halfInput);

// Cycle estimate of one block's vertex (rows x cols outputs over k): a row op
// over cols per (row, k) at two floats (or four halves) per cycle.
std::uint64_t blockCycles(std::size_t rows, std::size_t k, std::size_t cols, bool halfInput);

} // namespace detail
} // namespace poplin

#endif
