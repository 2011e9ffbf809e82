// The weight gradient of a direct-current input layer, once per minibatch (the LIF backward,
// LifBackward.cpp, sums dL/dI over the steps for it).
#include <poplar/Vertex.hpp>

#include "DenseKernels.hpp"
#include "InputProducts.hpp"
#include "StoredRows.hpp"

#include <type_traits>

using namespace poplar;
using namespace popsnn::lif;

// dL/dW = x^T . sum_t dL/dI for direct-current input, once per minibatch, each
// weight-gradient row written once. x is stored as `Stored` (float, or half: docs/numerics.md
// section 8); dL/dI and dL/dW are float32 sums either way.
template <class Stored> class DirectWeightGrad : public Vertex {
public:
  Input<Vector<Stored>> x;             // [B, xStride]
  Input<Vector<float>> currentGradSum; // [B, n]
  Output<Vector<float>> gradWeights;   // [numInputs, n]: inputs firstInput.. of x
  // For GROUP inputs at a time, the samples where each is non-zero: [GROUP, B].
  InOut<Vector<unsigned>> nzIndex;
  InOut<Vector<float>> nzValue;
  unsigned batch;
  unsigned numInputs;
  unsigned numNeurons;
  // The inputs of x this vertex covers (a shard's fan-in can be split over several
  // vertices, one per worker): x's row length and the first of them.
  unsigned xStride;
  unsigned firstInput;

  static constexpr unsigned GROUP = SPARSE_INPUT_GROUP; // x read a cache line at a time

  bool compute() {
    if constexpr (std::is_same_v<Stored, float>)
      computeFloat();
    else
      popsnn::stored::inputTransposedProduct(&x[firstInput], xStride, batch, numInputs,
                                             &currentGradSum[0], numNeurons, &gradWeights[0]);
    return true;
  }

private:
  // By the measured density of the slice of x: the blocked dense product (x^T as its left
  // operand), or the sparse row kernel over each input's non-zero samples.
  // A member template: the half vertex's explicit instantiation leaves it out.
  template <class T = Stored> void computeFloat() {
    const unsigned n = numNeurons;
    const float *__restrict xs = &x[firstInput];
    if (popsnn::dense::denseEnough(popsnn::dense::countNonzero(xs, batch, numInputs, xStride),
                                   1ull * batch * numInputs,
                                   popsnn::dense::DENSE_WEIGHT_GRAD_MIN_PER_MILLE))
      popsnn::dense::denseProduct(numInputs, n, batch, xs, 1, xStride, &currentGradSum[0], n,
                                  &gradWeights[0], n);
    else
      sparseInputTransposedProduct(xs, xStride, batch, numInputs, &currentGradSum[0], n,
                                   &nzIndex[0], &nzValue[0], &gradWeights[0]);
  }
};
template class DirectWeightGrad<float>;
template class DirectWeightGrad<half>;
