// The vertices behind popsnn's popnn subset (host/poplibs/src/NonLinearity.cpp,
// Loss.cpp). Each works on elements of its own tile or, for rows, wherever the
// runtime's exchange brings them.
#include <poplar/Vertex.hpp>

#include <cmath>

using namespace poplar;

namespace popnn {

// In place, element by element. kind: 0 sigmoid, 1 relu, 2 tanh (the host maps
// NonLinearityType to these codes).
template <typename T> class PopsnnNonLinearity : public Vertex {
public:
  InOut<Vector<T>> data;
  unsigned kind;
  bool compute() {
    for (unsigned i = 0; i < data.size(); ++i) {
      const float x = data[i];
      data[i] = kind == 0   ? 1.0f / (1.0f + std::exp(-x))
                : kind == 1 ? (x > 0 ? x : 0.0f)
                            : std::tanh(x);
    }
    return true;
  }
};
template class PopsnnNonLinearity<float>;

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

// Each row's loss and deltas against its label. kind: 0 sum of squares, 1 cross
// entropy. A label outside [0, classes) gives zeros.
template <typename T, typename Label> class PopsnnLoss : public Vertex {
public:
  Vector<Input<Vector<T>>> outputs;
  Input<Vector<Label>> expected;
  Output<Vector<T>> loss;
  Vector<Output<Vector<T>>> deltas;
  unsigned kind;
  bool compute() {
    for (unsigned r = 0; r < outputs.size(); ++r) {
      const unsigned n = outputs[r].size();
      const unsigned label = labelIndex(Label(expected[r]), n);
      const bool valid = label < n;
      float sum = 0;
      for (unsigned i = 0; i < n; ++i) {
        const float target = label == i ? 1.0f : 0.0f;
        const float delta = valid ? float(outputs[r][i]) - target : 0.0f;
        deltas[r][i] = delta;
        sum += kind == 0 ? 0.5f * delta * delta : 0.0f;
      }
      if (kind == 1 && valid)
        sum = -std::log(float(outputs[r][label]) + 1e-7f);
      loss[r] = sum;
    }
    return true;
  }
};
template class PopsnnLoss<float, unsigned int>;
template class PopsnnLoss<float, int>;

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
