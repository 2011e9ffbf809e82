// The vertices behind popsnn's popnn subset (host/poplibs/src/NonLinearity.cpp,
// Loss.cpp). Each works on elements of its own tile or, for rows, wherever the
// runtime's exchange brings them.
#include <poplar/Vertex.hpp>

#include <cmath>

using namespace poplar;

namespace popnn {

// The functions and losses the vertices are templated on, as tag types (the host
// maps NonLinearityType / LossType to these names).
namespace op {
struct Sigmoid {
  static float apply(float x) { return 1.0f / (1.0f + std::exp(-x)); }
};
struct Relu {
  static float apply(float x) { return x > 0 ? x : 0.0f; }
};
struct Tanh {
  static float apply(float x) { return std::tanh(x); }
};
// Sum of squares: half the squared deltas, summed over the row.
struct SumSquared {
  static float rowLoss(float deltaSquares, float, bool) { return 0.5f * deltaSquares; }
};
// Cross entropy of the labelled output (outputs are probabilities).
struct CrossEntropy {
  static float rowLoss(float, float labelled, bool valid) {
    return valid ? -std::log(labelled + 1e-7f) : 0.0f;
  }
};
} // namespace op

// In place, element by element.
template <typename T, typename Op> class PopsnnNonLinearity : public Vertex {
public:
  InOut<Vector<T>> data;
  bool compute() {
    for (unsigned i = 0; i < data.size(); ++i)
      data[i] = Op::apply(float(data[i]));
    return true;
  }
};
template class PopsnnNonLinearity<float, popnn::op::Sigmoid>;
template class PopsnnNonLinearity<float, popnn::op::Relu>;
template class PopsnnNonLinearity<float, popnn::op::Tanh>;

// Softmax of each row in place, its maximum subtracted before the exponentials.
template <typename T> class PopsnnSoftmax : public Vertex {
public:
  Vector<InOut<Vector<T>>> rows;
  bool compute() {
    for (unsigned r = 0; r < rows.size(); ++r) {
      const unsigned n = rows[r].size();
      float top = rows[r][0];
      for (unsigned i = 1; i < n; ++i)
        top = rows[r][i] > top ? float(rows[r][i]) : top;
      float sum = 0;
      for (unsigned i = 0; i < n; ++i) {
        rows[r][i] = std::exp(float(rows[r][i]) - top);
        sum += rows[r][i];
      }
      for (unsigned i = 0; i < n; ++i)
        rows[r][i] = rows[r][i] / sum;
    }
    return true;
  }
};
template class PopsnnSoftmax<float>;

// A row's label as an index into its n outputs; n when it names none (masked).
template <typename Label> unsigned labelIndex(Label label, unsigned n) {
  const long long value = static_cast<long long>(label);
  return value >= 0 && value < static_cast<long long>(n) ? unsigned(value) : n;
}

// Each row's loss and deltas against its label. A label outside [0, classes)
// gives zeros.
template <typename T, typename Label, typename Loss> class PopsnnLoss : public Vertex {
public:
  Vector<Input<Vector<T>>> outputs;
  Input<Vector<Label>> expected;
  Output<Vector<T>> loss;
  Vector<Output<Vector<T>>> deltas;
  bool compute() {
    for (unsigned r = 0; r < outputs.size(); ++r) {
      const unsigned n = outputs[r].size();
      const unsigned label = labelIndex(Label(expected[r]), n);
      const bool valid = label < n;
      float squares = 0;
      for (unsigned i = 0; i < n; ++i) {
        const float target = label == i ? 1.0f : 0.0f;
        const float delta = valid ? float(outputs[r][i]) - target : 0.0f;
        deltas[r][i] = delta;
        squares += delta * delta;
      }
      loss[r] = Loss::rowLoss(squares, valid ? float(outputs[r][label]) : 0.0f, valid);
    }
    return true;
  }
};
template class PopsnnLoss<float, unsigned int, popnn::op::SumSquared>;
template class PopsnnLoss<float, int, popnn::op::SumSquared>;
template class PopsnnLoss<float, unsigned int, popnn::op::CrossEntropy>;
template class PopsnnLoss<float, int, popnn::op::CrossEntropy>;

// numCorrect += the rows whose largest output (the first, on ties) is the label.
template <typename T, typename Label> class PopsnnAccuracy : public Vertex {
public:
  Vector<Input<Vector<T>>> outputs;
  Input<Vector<Label>> expected;
  InOut<unsigned> numCorrect;
  bool compute() {
    unsigned count = numCorrect;
    for (unsigned r = 0; r < outputs.size(); ++r) {
      unsigned best = 0;
      for (unsigned i = 1; i < outputs[r].size(); ++i)
        best = outputs[r][i] > outputs[r][best] ? i : best;
      count += labelIndex(Label(expected[r]), outputs[r].size()) == best;
    }
    numCorrect = count;
    return true;
  }
};
template class PopsnnAccuracy<float, unsigned int>;
template class PopsnnAccuracy<float, int>;

} // namespace popnn
