// The vertices behind popsnn's poplin subset (host/poplibs/src/MatMul.cpp): one
// block of C = A . B per vertex, sums in float whatever the stored types.
#include <poplar/Vertex.hpp>

using namespace poplar;

namespace poplin {

// Calls emit(r, c, sum) for every output of the block: sum over k of
// a[r * K + k] * b[k][c], K = b.size(), a row op over up to 16 columns at a time.
template <typename A, typename B, typename Emit>
void blockProducts(const A &a, const B &b, unsigned rows, unsigned cols, Emit emit) {
  const unsigned K = b.size();
  constexpr unsigned kWidth = 16;
  for (unsigned r = 0; r < rows; ++r)
    for (unsigned c0 = 0; c0 < cols; c0 += kWidth) {
      const unsigned width = cols - c0 < kWidth ? cols - c0 : kWidth;
      float sums[kWidth] = {};
      for (unsigned k = 0; k < K; ++k) {
        const float x = float(a[r * K + k]);
        for (unsigned j = 0; j < width; ++j)
          sums[j] += x * float(b[k][c0 + j]);
      }
      for (unsigned j = 0; j < width; ++j)
        emit(r, c0 + j, sums[j]);
    }
}

// out = a . b for one block: a holds the block's rows of A (row-major), b the
// block's columns of B (one edge per row of B), out one edge per row of C.
template <typename InType, typename OutType> class MatMulBlock : public Vertex {
public:
  Input<Vector<InType>> a;
  Vector<Input<Vector<InType>>> b;
  Vector<Output<Vector<OutType>>> out;
  bool compute() {
    const unsigned rows = out.size(), cols = rows ? out[0].size() : 0;
    blockProducts(a, b, rows, cols,
                  [this](unsigned r, unsigned c, float sum) { out[r][c] = OutType(sum); });
    return true;
  }
};
template class MatMulBlock<float, float>;
template class MatMulBlock<float, half>;
template class MatMulBlock<half, half>;
template class MatMulBlock<half, float>;

// out += scale * a . b, as MatMulBlock.
template <typename T> class MatMulBlockAcc : public Vertex {
public:
  Input<Vector<T>> a;
  Vector<Input<Vector<T>>> b;
  Vector<InOut<Vector<T>>> out;
  float scale;
  bool compute() {
    const unsigned rows = out.size(), cols = rows ? out[0].size() : 0;
    blockProducts(a, b, rows, cols, [this](unsigned r, unsigned c, float sum) {
      out[r][c] = T(float(out[r][c]) + scale * sum);
    });
    return true;
  }
};
template class MatMulBlockAcc<float>;
template class MatMulBlockAcc<half>;

} // namespace poplin
