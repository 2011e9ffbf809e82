// Test vertices for popsnn's Poplar runtime, written for Poplar: nothing here
// is popsnn-specific. The tests load this file both as a source
// (graph.addCodelets("TestVertices.cpp")) and as a prebuilt .gp object.
#include <poplar/Vertex.hpp>

#include <cmath>

using namespace poplar;

static constexpr auto ONE_PTR = VectorLayout::ONE_PTR;

// Scalars: out = a * in + offset; count += 1.
class Scalars : public Vertex {
public:
  Input<float> in;
  Output<float> out;
  InOut<int> count;
  float a;
  int offset = 7; // kept unless setInitialValue overrides it

  bool compute() {
    *out = a * in + offset;
    count = count + 1;
    return true;
  }
};

/* A comment that mentions class Fake : public Vertex { Input<float> x; }; is ignored. */
class AddVectors : public Vertex {
public:
  Input<Vector<float>> a;
  Input<Vector<float, ONE_PTR>> b;
  Output<Vector<float, VectorLayout::SPAN, 8>> out;

  bool compute() {
    const char *text = "class NotAVertex : public Vertex {};";
    (void)text;
    for (unsigned i = 0; i < out.size(); ++i)
      out[i] = a[i] + b[i];
    return true;
  }
};

class Increment : public Vertex {
public:
  InOut<Vector<int>> v;
  bool compute() {
    for (auto &x : v)
      x += 1;
    return true;
  }
};

// Element i gets the id of the worker that wrote it.
class WorkerIds : public MultiVertex {
public:
  Output<Vector<unsigned>> ids;
  void compute(unsigned workerId) {
    for (unsigned i = workerId; i < ids.size(); i += numWorkers())
      ids[i] = workerId;
  }
};

class ListSums : public Vertex {
public:
  Input<VectorList<float, VectorListLayout::DELTANELEMENTS>> in;
  Output<Vector<float>> sums;
  bool compute() {
    for (unsigned v = 0; v < in.size(); ++v) {
      float s = 0;
      for (unsigned i = 0; i < in[v].size(); ++i)
        s += in[v][i];
      sums[v] = s;
    }
    return true;
  }
};

// y = c0 + c1 x + c2 x^2 + ... with the coefficients as vertex state.
class Poly : public Vertex {
public:
  Vector<float> coeffs;
  Input<Vector<float>> x;
  Output<Vector<float>> y;
  unsigned calls = 0, unused[2];

  float eval(float v) const {
    float acc = 0, p = 1;
    for (unsigned k = 0; k < coeffs.size(); ++k, p *= v)
      acc += coeffs[k] * p;
    return acc;
  }
  bool compute() {
    struct Local {
      int k;
    } local{0};
    (void)local;
    for (unsigned i = 0; i < x.size(); ++i)
      y[i] = eval(x[i]);
    ++calls;
    return true;
  }
};

template <typename T> class Fill : public Vertex {
public:
  Output<Vector<T>> out;
  T value;
  bool compute() {
    for (unsigned i = 0; i < out.size(); ++i)
      out.data()[i] = value + T(i);
    return true;
  }
};
template class Fill<float>;
template class Fill<int>;
template class Fill<unsigned int>;

class Fails : public Vertex {
public:
  bool compute() { return false; }
};

// n -= 1; positive = n > 0 (a loop condition for RepeatWhileTrue).
class CountDown : public Vertex {
public:
  InOut<int> n;
  Output<bool> positive;
  bool compute() {
    *n = *n - 1;
    *positive = *n > 0;
    return true;
  }
};

namespace testns {
// A namespaced vertex with `void compute()`.
struct Answer : public Vertex {
  Output<int> out;
  static constexpr int kAnswer = 42;
  void compute() { *out = kAnswer; }
};
} // namespace testns

// y = a * x + y in half storage with a float sum (Poplar codelets' `half`).
class HalfAxpy : public Vertex {
public:
  Input<Vector<half>> x;
  InOut<Vector<half>> y;
  Output<float> total; // sum of the new y, accumulated in float
  float a;

  bool compute() {
    float sum = 0.0f;
    for (unsigned i = 0; i < y.size(); ++i) {
      y[i] = static_cast<half>(a * static_cast<float>(x[i]) + static_cast<float>(y[i]));
      sum += static_cast<float>(y[i]);
    }
    *total = sum;
    return true;
  }
};
