#include "MatMulPlan.hpp"

#include <algorithm>

namespace poplin {
namespace detail {

std::uint64_t blockCycles(std::size_t rows, std::size_t k, std::size_t cols, bool halfInput) {
  const std::uint64_t perCycle = halfInput ? 4 : 2;
  const std::uint64_t rowOp = 4 + (cols + perCycle - 1) / perCycle;
  return 20 + std::uint64_t(rows) * k * (2 + rowOp);
}

MatMulPlan planMatMul(std::size_t m, std::size_t k, std::size_t n, unsigned tiles, bool halfInput) {
  MatMulPlan best;
  best.m = m, best.k = k, best.n = n, best.halfInput = halfInput;
  const std::uint64_t elementBytes = halfInput ? 2 : 4;
  std::uint64_t bestCost = ~std::uint64_t(0);
  const std::size_t maxRows = std::min<std::size_t>(m, std::max(1u, tiles));
  for (std::size_t rowBlocks = 1; rowBlocks <= maxRows; ++rowBlocks) {
    MatMulPlan p = best;
    p.rowBlocks = rowBlocks;
    p.colBlocks = std::max<std::size_t>(1, std::min<std::size_t>(n, tiles / rowBlocks));
    // Blocks are ceil-sized: drop the empty ones a rounded split leaves.
    p.rowBlocks = (m + p.rowsPerBlock() - 1) / p.rowsPerBlock();
    p.colBlocks = (n + p.colsPerBlock() - 1) / p.colsPerBlock();
    const std::size_t rows = p.rowsPerBlock(), cols = p.colsPerBlock();
    const std::uint64_t cost =
        blockCycles(rows, k, cols, halfInput) + elementBytes * k * (rows + cols) / 4;
    if (cost < bestCost)
      bestCost = cost, best = p;
  }
  return best;
}

} // namespace detail
} // namespace poplin
