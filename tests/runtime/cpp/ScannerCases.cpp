// Codelet shapes the scanner must read: attributes, final, several
// declarators, brace and bit-field initialisers, out-of-class compute(),
// nested and anonymous namespaces, templates with several (non-type)
// arguments instantiated inside and outside their namespace.
#include <poplar/Vertex.hpp>

#include <cstdint>

namespace outer::inner {

template <typename T, unsigned N> struct alignas(16) Repeat final : public poplar::MultiVertex {
  poplar::Input<poplar::Vector<T>> a, b; // two fields in one declaration
  poplar::Output<poplar::Vector<T>> out;
  alignas(8) T scale = T(1);
  unsigned flags : 4;
  T table[2] = {T(0), T(0)};

  void compute(unsigned worker) {
    if (worker != 0)
      return;
    for (unsigned i = 0; i < out.size(); ++i)
      out[i] = T(N) * scale * (a[i] + b[i]);
  }
};

template struct Repeat<float, 3>;

} // namespace outer::inner

template struct outer::inner::Repeat<int, 2>;

namespace {
class Hidden : public poplar::Vertex {
public:
  poplar::Output<int> out;
  int value{5};
  bool compute();
};
bool Hidden::compute() {
  *out = value * 2;
  return true;
}
} // namespace
