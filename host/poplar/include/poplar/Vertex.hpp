// popsnn's Poplar-compatible runtime: the vertex side of Poplar. Codelets
// include only this header (and the standard C/C++ headers they need); it has
// no dependency on the host runtime, because graph.addCodelets() compiles
// codelets in a separate translation unit with the host compiler.
//
// Every connectable field (Input/Output/InOut of a scalar, a Vector or a
// VectorList, and plain Vector members) is laid out as one detail::RawSpan,
// which the runtime fills in when the Engine is built.
#pragma once
#include <cstddef>
#include <type_traits>

#include "poplar/VectorLayout.hpp"

// Poplar codelets name IEEE binary16 `half` (a built-in type of popc). Here it is the host
// compiler's _Float16 (GCC >= 12 and Clang on x86-64): 2 bytes, the layout of a HALF tensor.
// Arithmetic on it is promoted to float by the codelet's own casts, as on an IPU's half-rate
// vector unit, whose sums a codelet keeps in float.
#if defined(__FLT16_MAX__)
using half = _Float16;
#endif

namespace poplar {

namespace detail {

// The one layout of every connectable field: data pointer and element count
// (for a VectorList: pointer to `size` RawSpans, one per vector).
struct RawSpan {
  void *ptr = nullptr;
  unsigned size = 0;
};

template <typename T> class SpanView {
public:
  using value_type = T;
  using iterator = T *;
  SpanView(T *p, unsigned n) : ptr_(p), size_(n) {}
  T &operator[](std::size_t i) const { return ptr_[i]; }
  unsigned size() const { return size_; }
  T *begin() const { return ptr_; }
  T *end() const { return ptr_ + size_; }
  T *data() const { return ptr_; }

private:
  T *ptr_;
  unsigned size_;
};

// Whether a Vector of layout L knows its size: SPAN stores a pointer and a size (and
// COMPACT_PTR is given one here); ONE_PTR and SCALED_PTR* store only a pointer, so a
// codelet asking them for size() or end() does not compile, as with popc.
constexpr bool layoutHasSize(VectorLayout L) {
  return L != VectorLayout::ONE_PTR && L != VectorLayout::SCALED_PTR32 &&
         L != VectorLayout::SCALED_PTR64 && L != VectorLayout::SCALED_PTR128;
}

} // namespace detail

// Base of single-worker vertices: `bool compute()` (or `void compute()`).
class Vertex {};

// Base of vertices that run on a tile's supervisor context: `bool compute()`, once per
// compute set (the runtime runs it as a Vertex; see docs/poplar-compatibility.md).
class SupervisorVertex {};

// Base of vertices that run on every worker of a tile: `void compute(unsigned workerId)`.
class MultiVertex {
public:
  // Worker contexts per tile, as on an IPU Mk2 (and Mk1).
  static constexpr unsigned numWorkers() { return 6; }
};

// A vector of T. As a field type argument (Input<Vector<T>>, ...) it names the
// shape of the connection; as a plain member it is vertex state set with
// graph.setInitialValue(v["field"], ArrayRef<T>).
template <typename T, VectorLayout L = VectorLayout::SPAN, unsigned MinAlign = alignof(T),
          bool Interleavable = false>
class Vector {
public:
  using value_type = T;
  using iterator = T *;
  using const_iterator = const T *;
  T &operator[](std::size_t i) { return static_cast<T *>(raw_.ptr)[i]; }
  const T &operator[](std::size_t i) const { return static_cast<const T *>(raw_.ptr)[i]; }
  unsigned size() const {
    static_assert(detail::layoutHasSize(L), "this Vector's VectorLayout (ONE_PTR, SCALED_PTR32/"
                                            "64/128) stores no size: pass it in another field");
    return raw_.size;
  }
  T *begin() { return static_cast<T *>(raw_.ptr); }
  T *end() { return begin() + size(); }
  const T *begin() const { return static_cast<const T *>(raw_.ptr); }
  const T *end() const { return begin() + size(); }
  T *data() { return static_cast<T *>(raw_.ptr); }
  const T *data() const { return static_cast<const T *>(raw_.ptr); }
  detail::RawSpan raw_;
};

// A list of vectors of T, each with its own size (connected from a list of tensors).
template <typename T, VectorListLayout L = VectorListLayout::DELTANELEMENTS,
          unsigned MinAlign = alignof(T), bool Interleavable = false>
class VectorList {};

namespace detail {

// The storage of Input/Output/InOut<X>; `E` is the element type as the vertex
// sees it (const for Input).
template <typename X, typename E> class FieldBase {
public:
  // Scalar access: `*in`, `in` (implicit conversion), `out = v`, `in->member`.
  E &operator*() const { return *static_cast<E *>(raw_.ptr); }
  E *operator->() const { return static_cast<E *>(raw_.ptr); }
  operator E &() const { return *static_cast<E *>(raw_.ptr); }
  RawSpan raw_;
};

template <typename E, VectorLayout L> class VectorFieldBase {
public:
  using value_type = typename std::remove_const<E>::type;
  using iterator = E *;
  E &operator[](std::size_t i) const { return static_cast<E *>(raw_.ptr)[i]; }
  unsigned size() const {
    static_assert(detail::layoutHasSize(L), "this Vector's VectorLayout (ONE_PTR, SCALED_PTR32/"
                                            "64/128) stores no size: pass it in another field");
    return raw_.size;
  }
  E *begin() const { return static_cast<E *>(raw_.ptr); }
  E *end() const { return begin() + size(); }
  E *data() const { return static_cast<E *>(raw_.ptr); }
  RawSpan raw_;
};

template <typename E> class VectorListFieldBase {
public:
  SpanView<E> operator[](std::size_t i) const {
    const RawSpan &s = static_cast<const RawSpan *>(raw_.ptr)[i];
    return SpanView<E>(static_cast<E *>(s.ptr), s.size);
  }
  unsigned size() const { return raw_.size; }
  RawSpan raw_;
};

template <typename X, bool Const> struct FieldStorage {
  using E = typename std::conditional<Const, const X, X>::type;
  using type = FieldBase<X, E>;
};
template <typename T, VectorLayout L, unsigned A, bool I, bool Const>
struct FieldStorage<Vector<T, L, A, I>, Const> {
  using type = VectorFieldBase<typename std::conditional<Const, const T, T>::type, L>;
};
template <typename T, VectorListLayout L, unsigned A, bool I, bool Const>
struct FieldStorage<VectorList<T, L, A, I>, Const> {
  using type = VectorListFieldBase<typename std::conditional<Const, const T, T>::type>;
};

} // namespace detail

// An edge into the vertex: read-only data on the vertex's tile.
template <typename X> class Input : public detail::FieldStorage<X, true>::type {};

// An edge out of the vertex: data on the vertex's tile that it writes.
template <typename X> class Output : public detail::FieldStorage<X, false>::type {
public:
  template <typename V, typename = typename std::enable_if<std::is_assignable<X &, V>::value>::type>
  Output &operator=(const V &v) {
    *static_cast<X *>(this->raw_.ptr) = v;
    return *this;
  }
};

// An edge both read and written by the vertex.
template <typename X> class InOut : public detail::FieldStorage<X, false>::type {
public:
  template <typename V, typename = typename std::enable_if<std::is_assignable<X &, V>::value>::type>
  InOut &operator=(const V &v) {
    *static_cast<X *>(this->raw_.ptr) = v;
    return *this;
  }
};

} // namespace poplar
