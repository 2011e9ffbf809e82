// popsnn's Poplar-compatible runtime: the interface between a compiled codelet
// object (a .gp file, or a codelet source compiled by graph.addCodelets) and the
// runtime. The glue translation unit that the codelet scanner generates
// includes the codelet, then this header, and exports one table of vertex
// classes through `popsnn_codelet_table`. Not for use in codelets or host code.
#pragma once
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "poplar/Vertex.hpp"

// Bumped whenever a structure below or the field layout in Vertex.hpp changes.
#define POPSNN_CODELET_ABI_VERSION 2u

namespace poplar {
namespace detail {

enum FieldAccess : unsigned { kFieldInput = 0, kFieldOutput = 1, kFieldInOut = 2, kFieldState = 3 };
enum FieldShape : unsigned {
  kShapeScalar = 0,
  kShapeVector = 1,
  kShapeVectorList = 2,
  kShapeUnsupported = 3,
  kShapeScalarList = 4 // Vector<Input<T>>: one one-element edge per entry
};

template <typename T> struct ElementName {
  static constexpr const char *value = nullptr;
};
#define POPSNN_ELEMENT_NAME(T, NAME)                                                               \
  template <> struct ElementName<T> {                                                              \
    static constexpr const char *value = NAME;                                                     \
  };
POPSNN_ELEMENT_NAME(bool, "bool")
POPSNN_ELEMENT_NAME(char, "char")
POPSNN_ELEMENT_NAME(unsigned char, "unsigned char")
POPSNN_ELEMENT_NAME(signed char, "signed char")
POPSNN_ELEMENT_NAME(short, "short")
POPSNN_ELEMENT_NAME(unsigned short, "unsigned short")
POPSNN_ELEMENT_NAME(int, "int")
POPSNN_ELEMENT_NAME(unsigned int, "unsigned int")
POPSNN_ELEMENT_NAME(long long, "long long")
POPSNN_ELEMENT_NAME(unsigned long long, "unsigned long long")
POPSNN_ELEMENT_NAME(float, "float")
#if defined(__FLT16_MAX__)
POPSNN_ELEMENT_NAME(_Float16, "half")
#endif
#undef POPSNN_ELEMENT_NAME

struct FieldInfo {
  unsigned access;
  unsigned shape;
  const char *element; // Poplar type name, or nullptr if not a Poplar type
  unsigned elementSize;
  unsigned layout; // VectorLayout / VectorListLayout as unsigned, 0 for scalars
};

template <typename T> struct ElementInfo {
  static constexpr const char *name = ElementName<typename std::remove_cv<T>::type>::value;
  static constexpr unsigned size = sizeof(T);
};

template <typename X> struct ShapeOf {
  using element = X;
  static constexpr unsigned shape = std::is_arithmetic<X>::value ? kShapeScalar : kShapeUnsupported;
  static constexpr unsigned layout = 0;
};
template <typename T, VectorLayout L, unsigned A, bool I> struct ShapeOf<Vector<T, L, A, I>> {
  using element = T;
  static constexpr unsigned shape = kShapeVector;
  static constexpr unsigned layout = static_cast<unsigned>(L);
};
template <typename T, VectorListLayout L, unsigned A, bool I>
struct ShapeOf<VectorList<T, L, A, I>> {
  using element = T;
  static constexpr unsigned shape = kShapeVectorList;
  static constexpr unsigned layout = static_cast<unsigned>(L);
};

template <typename F> struct FieldTraits {
  // A plain member: a scalar or Vector constant set with setInitialValue.
  using S = ShapeOf<F>;
  static constexpr unsigned access = kFieldState;
  static constexpr unsigned shape = S::shape == kShapeVectorList ? kShapeUnsupported : S::shape;
  using element = typename S::element;
};
template <typename X> struct FieldTraits<Input<X>> {
  using S = ShapeOf<X>;
  static constexpr unsigned access = kFieldInput;
  static constexpr unsigned shape = S::shape;
  using element = typename S::element;
};
template <typename X> struct FieldTraits<Output<X>> {
  using S = ShapeOf<X>;
  static constexpr unsigned access = kFieldOutput;
  static constexpr unsigned shape = S::shape;
  using element = typename S::element;
};
template <typename X> struct FieldTraits<InOut<X>> {
  using S = ShapeOf<X>;
  static constexpr unsigned access = kFieldInOut;
  static constexpr unsigned shape = S::shape;
  using element = typename S::element;
};

// Vector<Input<X>>, Vector<Output<X>>, Vector<InOut<X>>: Poplar's vector of edges (a
// vector-of-vectors field when X is a Vector), connected entry by entry after
// setFieldSize. Laid out as a VectorList: one RawSpan per edge.
template <typename X, VectorLayout L, unsigned A, bool I, unsigned Access> struct EdgeVectorTraits {
  struct S {
    static constexpr unsigned layout = static_cast<unsigned>(L);
  };
  static constexpr unsigned access = Access;
  static constexpr unsigned shape = ShapeOf<X>::shape == kShapeVector   ? kShapeVectorList
                                    : ShapeOf<X>::shape == kShapeScalar ? kShapeScalarList
                                                                        : kShapeUnsupported;
  using element = typename ShapeOf<X>::element;
};
template <typename X, VectorLayout L, unsigned A, bool I>
struct FieldTraits<Vector<Input<X>, L, A, I>> : EdgeVectorTraits<X, L, A, I, kFieldInput> {};
template <typename X, VectorLayout L, unsigned A, bool I>
struct FieldTraits<Vector<Output<X>, L, A, I>> : EdgeVectorTraits<X, L, A, I, kFieldOutput> {};
template <typename X, VectorLayout L, unsigned A, bool I>
struct FieldTraits<Vector<InOut<X>, L, A, I>> : EdgeVectorTraits<X, L, A, I, kFieldInOut> {};

} // namespace detail
} // namespace poplar

extern "C" {

struct popsnn_field_desc {
  const char *name;
  unsigned access;      // poplar::detail::FieldAccess
  unsigned shape;       // poplar::detail::FieldShape
  const char *element;  // Poplar type name ("float", "unsigned int", ...) or null
  unsigned elementSize; // bytes of one element (of the scalar itself for a plain scalar)
  unsigned layout;
  void *(*address)(void *vertex); // address of the field inside a vertex object
};

struct popsnn_vertex_desc {
  const char *name; // as addressed by addVertex, e.g. "Name" or "ns::Name<float>"
  unsigned size;
  unsigned align;
  unsigned isMultiVertex;
  void (*construct)(void *where);
  void (*destroy)(void *vertex);
  bool (*compute)(void *vertex);                        // Vertex
  void (*computeWorker)(void *vertex, unsigned worker); // MultiVertex
  const popsnn_field_desc *fields;
  unsigned numFields;
};

struct popsnn_codelet_table {
  unsigned abiVersion;
  unsigned numVertices;
  const popsnn_vertex_desc *vertices;
};

typedef const popsnn_codelet_table *(*popsnn_codelet_table_fn)();
}

namespace poplar {
namespace detail {

template <typename C, typename F>
constexpr popsnn_field_desc describeField(const char *name, void *(*address)(void *)) {
  using Tr = FieldTraits<F>;
  using E = typename Tr::element;
  popsnn_field_desc d{};
  d.name = name;
  d.access = Tr::access;
  d.shape = Tr::shape;
  d.element = ElementInfo<E>::name;
  d.elementSize = static_cast<unsigned>(sizeof(E));
  d.layout = Tr::S::layout;
  d.address = address;
  if (Tr::shape != kShapeUnsupported && Tr::access != kFieldState)
    static_assert(sizeof(F) == sizeof(RawSpan) || Tr::access == kFieldState,
                  "popsnn: connectable fields must be laid out as one RawSpan");
  return d;
}

template <typename C> bool computeOnce(void *v) {
  using R = decltype(std::declval<C &>().compute());
  if constexpr (std::is_void<R>::value) {
    static_cast<C *>(v)->compute();
    return true;
  } else {
    return static_cast<bool>(static_cast<C *>(v)->compute());
  }
}

template <typename C> void computeWorker(void *v, unsigned worker) {
  static_cast<C *>(v)->compute(worker);
}

template <typename C>
constexpr popsnn_vertex_desc describeVertex(const char *name, const popsnn_field_desc *fields,
                                            unsigned numFields) {
  static_assert(std::is_default_constructible<C>::value,
                "popsnn: a vertex class must be default-constructible");
  popsnn_vertex_desc d{};
  d.name = name;
  d.size = static_cast<unsigned>(sizeof(C));
  d.align = static_cast<unsigned>(alignof(C));
  d.construct = [](void *where) { new (where) C(); };
  d.destroy = [](void *v) { static_cast<C *>(v)->~C(); };
  if constexpr (std::is_base_of<MultiVertex, C>::value) {
    d.isMultiVertex = 1;
    d.computeWorker = &computeWorker<C>;
  } else {
    d.isMultiVertex = 0;
    d.compute = &computeOnce<C>;
  }
  d.fields = fields;
  d.numFields = numFields;
  return d;
}

} // namespace detail
} // namespace poplar
