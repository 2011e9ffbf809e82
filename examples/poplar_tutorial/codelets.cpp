// Vertices of the tutorial, written for Poplar: nothing in this file is
// specific to popsnn, so the same file builds with popc for a real IPU.
#include <poplar/Vertex.hpp>

using namespace poplar;

// Sums a vector into a scalar.
class SumVertex : public Vertex {
public:
  Input<Vector<float>> in;
  Output<float> out;

  bool compute() {
    float sum = 0;
    for (unsigned i = 0; i < in.size(); ++i)
      sum += in[i];
    *out = sum;
    return true;
  }
};

// y = a * x + y, elements split over the tile's worker threads.
class Axpy : public MultiVertex {
public:
  Input<Vector<float, VectorLayout::SPAN, 8>> x;
  InOut<Vector<float, VectorLayout::SPAN, 8>> y;
  float a; // vertex state, set with graph.setInitialValue

  void compute(unsigned workerId) {
    for (unsigned i = workerId; i < y.size(); i += numWorkers())
      y[i] += a * x[i];
  }
};

// Scales every vector of a list in place: a templated vertex, addressed as "Scale<float>".
template <typename T> class Scale : public Vertex {
public:
  InOut<VectorList<T, VectorListLayout::DELTANELEMENTS>> data;
  T factor;

  bool compute() {
    for (unsigned v = 0; v < data.size(); ++v)
      for (auto &e : data[v])
        e *= factor;
    return true;
  }
};

template class Scale<float>;
template class Scale<int>;
