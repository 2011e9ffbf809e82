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

// The operations the vertices are templated on, as tag types (the host maps its
// BinaryOpType / Operation enums to these names).
namespace op {
struct Add {
  template <typename T> static T apply(T a, T b) { return a + b; }
};
struct Subtract {
  template <typename T> static T apply(T a, T b) { return a - b; }
};
struct Multiply {
  template <typename T> static T apply(T a, T b) { return a * b; }
};
struct Maximum {
  template <typename T> static T apply(T a, T b) { return a > b ? a : b; }
};
struct Minimum {
  template <typename T> static T apply(T a, T b) { return a < b ? a : b; }
};
} // namespace op

template <typename T, typename Op> class PopsnnBinary : public Vertex {
public:
  Input<Vector<T>> in1;
  Input<Vector<T>> in2;
  Output<Vector<T>> out;
  bool compute() {
    for (unsigned i = 0; i < out.size(); ++i)
      out[i] = Op::apply(T(in1[i]), T(in2[i]));
    return true;
  }
};
template class PopsnnBinary<float, popops::op::Add>;
template class PopsnnBinary<float, popops::op::Subtract>;
template class PopsnnBinary<float, popops::op::Multiply>;
template class PopsnnBinary<float, popops::op::Maximum>;
template class PopsnnBinary<float, popops::op::Minimum>;
template class PopsnnBinary<int, popops::op::Add>;
template class PopsnnBinary<int, popops::op::Subtract>;
template class PopsnnBinary<int, popops::op::Multiply>;
template class PopsnnBinary<int, popops::op::Maximum>;
template class PopsnnBinary<int, popops::op::Minimum>;
template class PopsnnBinary<unsigned int, popops::op::Add>;
template class PopsnnBinary<unsigned int, popops::op::Subtract>;
template class PopsnnBinary<unsigned int, popops::op::Multiply>;
template class PopsnnBinary<unsigned int, popops::op::Maximum>;
template class PopsnnBinary<unsigned int, popops::op::Minimum>;

// Reduces each of out.size() consecutive rows of rowLength elements of in.
template <typename T, typename Op> class PopsnnReduce : public Vertex {
public:
  Input<Vector<T>> in;
  Output<Vector<T>> out;
  unsigned rowLength;
  bool compute() {
    for (unsigned r = 0; r < out.size(); ++r) {
      const unsigned base = r * rowLength;
      T acc = in[base];
      for (unsigned i = 1; i < rowLength; ++i)
        acc = Op::apply(acc, T(in[base + i]));
      out[r] = acc;
    }
    return true;
  }
};
template class PopsnnReduce<float, popops::op::Add>;
template class PopsnnReduce<float, popops::op::Multiply>;
template class PopsnnReduce<float, popops::op::Maximum>;
template class PopsnnReduce<float, popops::op::Minimum>;
template class PopsnnReduce<int, popops::op::Add>;
template class PopsnnReduce<int, popops::op::Multiply>;
template class PopsnnReduce<int, popops::op::Maximum>;
template class PopsnnReduce<int, popops::op::Minimum>;
template class PopsnnReduce<unsigned int, popops::op::Add>;
template class PopsnnReduce<unsigned int, popops::op::Multiply>;
template class PopsnnReduce<unsigned int, popops::op::Maximum>;
template class PopsnnReduce<unsigned int, popops::op::Minimum>;

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
