// The direct-current input layer's weight gradient x^T . sum_t dL/dI over a slice of x's
// inputs, all rows at once (DirectWeightGrad) or a group of rows at a time for a step that
// updates the weights as their gradient is computed (DirectWeightAdamStep / SgdStep).
#pragma once

#include <cstddef>

#include "../include/popsnn/VertexEnums.hpp"
#include "DenseKernels.hpp"
#include "InputProducts.hpp"

namespace popsnn {
namespace lif {

// x^T . sum_t dL/dI over a slice of x's inputs (float), any rows of it at a time: by the
// measured density of the slice, the blocked dense product (x^T as its left operand) or the
// sparse row kernel over each input's non-zero samples -- one choice for the slice, so rows
// computed a group at a time are the same sums as all at once.
struct WeightGradRows {
  const float *x;
  unsigned xStride, batch, numInputs;
  const float *g; // [B, n]
  unsigned n;
  unsigned *idx; // the sparse kernel's scratch: SPARSE_INPUT_GROUP * batch entries each
  float *val;
  bool dense;

  WeightGradRows(const float *x, unsigned xStride, unsigned batch, unsigned numInputs,
                 const float *g, unsigned n, unsigned *idx, float *val)
      : x(x), xStride(xStride), batch(batch), numInputs(numInputs), g(g), n(n), idx(idx), val(val),
        dense(popsnn::dense::denseEnough(popsnn::dense::countNonzero(x, batch, numInputs, xStride),
                                         1ull * batch * numInputs,
                                         popsnn::dense::DENSE_WEIGHT_GRAD_MIN_PER_MILLE)) {}

  // Rows first.. first + count - 1 of dL/dW into out ([count, n]).
  void rows(unsigned first, unsigned count, float *out) const {
    if (dense)
      popsnn::dense::denseProduct(count, n, batch, x + first, 1, xStride, g, n, out, n);
    else
      sparseInputTransposedProduct(x + first, xStride, batch, count, g, n, idx, val, out);
  }

  // step(offset, size) on each group of FUSED_STEP_ROWS rows once computed into `scratch`:
  // entries offset.. offset + size - 1 of dL/dW, as scratch's first `size`.
  template <class Step> void byGroups(float *scratch, Step step) const {
    constexpr unsigned GROUP = popsnn::codes::FUSED_STEP_ROWS;
    static_assert(GROUP % SPARSE_INPUT_GROUP == 0, "groups of the sparse kernel's groups");
    for (unsigned i0 = 0; i0 < numInputs; i0 += GROUP) {
      const unsigned count = numInputs - i0 < GROUP ? numInputs - i0 : GROUP;
      rows(i0, count, scratch);
      step(std::size_t(i0) * n, count * n);
    }
  }
};

} // namespace lif
} // namespace popsnn
