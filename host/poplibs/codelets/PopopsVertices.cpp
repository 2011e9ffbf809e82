// The vertices behind popsnn's popops subset (host/poplibs/src). Each works on
// the elements of one tile; the host side splits tensors by tile mapping.
#include <poplar/Vertex.hpp>

using namespace poplar;

namespace popops {

template <typename T> class PopsnnFill : public Vertex {
public:
  Output<Vector<T>> out;
  T value;
  bool compute() {
    for (unsigned i = 0; i < out.size(); ++i)
      out[i] = value;
    return true;
  }
};
template class PopsnnFill<float>;
template class PopsnnFill<int>;
template class PopsnnFill<unsigned int>;
template class PopsnnFill<bool>;

template <typename From, typename To> class PopsnnCast : public Vertex {
public:
  Input<Vector<From>> in;
  Output<Vector<To>> out;
  bool compute() {
    for (unsigned i = 0; i < out.size(); ++i)
      out[i] = static_cast<To>(in[i]);
    return true;
  }
};
template class PopsnnCast<float, int>;
template class PopsnnCast<float, unsigned int>;
template class PopsnnCast<float, bool>;
template class PopsnnCast<int, float>;
template class PopsnnCast<int, unsigned int>;
template class PopsnnCast<int, bool>;
template class PopsnnCast<unsigned int, float>;
template class PopsnnCast<unsigned int, int>;
template class PopsnnCast<unsigned int, bool>;
template class PopsnnCast<bool, float>;
template class PopsnnCast<bool, int>;
template class PopsnnCast<bool, unsigned int>;

// kind: 0 add, 1 subtract, 2 multiply, 3 max, 4 min (popops::expr::BinaryOpType order
// is not relied on; the host maps its enum to these codes).
template <typename T> class PopsnnBinary : public Vertex {
public:
  Input<Vector<T>> in1;
  Input<Vector<T>> in2;
  Output<Vector<T>> out;
  unsigned kind;
  bool compute() {
    for (unsigned i = 0; i < out.size(); ++i) {
      const T a = in1[i], b = in2[i];
      switch (kind) {
      case 0:
        out[i] = a + b;
        break;
      case 1:
        out[i] = a - b;
        break;
      case 2:
        out[i] = a * b;
        break;
      case 3:
        out[i] = a > b ? a : b;
        break;
      default:
        out[i] = a < b ? a : b;
        break;
      }
    }
    return true;
  }
};
template class PopsnnBinary<float>;
template class PopsnnBinary<int>;
template class PopsnnBinary<unsigned int>;

// Reduces each of out.size() consecutive rows of rowLength elements of in.
// kind: 0 add, 1 multiply, 2 max, 3 min.
template <typename T> class PopsnnReduce : public Vertex {
public:
  Input<Vector<T>> in;
  Output<Vector<T>> out;
  unsigned rowLength;
  unsigned kind;
  bool compute() {
    for (unsigned r = 0; r < out.size(); ++r) {
      const unsigned base = r * rowLength;
      T acc = in[base];
      for (unsigned i = 1; i < rowLength; ++i) {
        const T x = in[base + i];
        switch (kind) {
        case 0:
          acc = acc + x;
          break;
        case 1:
          acc = acc * x;
          break;
        case 2:
          acc = x > acc ? x : acc;
          break;
        default:
          acc = x < acc ? x : acc;
          break;
        }
      }
      out[r] = acc;
    }
    return true;
  }
};
template class PopsnnReduce<float>;
template class PopsnnReduce<int>;
template class PopsnnReduce<unsigned int>;

// a += scale * b.
template <typename T> class PopsnnScaledAdd : public Vertex {
public:
  InOut<Vector<T>> a;
  Input<Vector<T>> b;
  float scale;
  bool compute() {
    for (unsigned i = 0; i < a.size(); ++i)
      a[i] += scale * b[i];
    return true;
  }
};
template class PopsnnScaledAdd<float>;

} // namespace popops
