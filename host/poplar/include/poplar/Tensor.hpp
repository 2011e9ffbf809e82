// popsnn's Poplar-compatible runtime: poplar::Tensor, a view of elements of
// one or more graph variables (row-major), with Poplar's view operations.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "poplar/ArrayRef.hpp"
#include "poplar/Interval.hpp"
#include "poplar/Type.hpp"

namespace poplar {

namespace detail {
// A run of consecutive elements [begin, end) of variable `var`.
struct TensorRegion {
  unsigned var;
  std::size_t begin;
  std::size_t end;
};
// A view's shape and runs; views that only reshape share the runs. Held by pointer so
// copying a Tensor (done constantly while a graph is built) allocates nothing.
struct TensorData {
  std::vector<std::size_t> shape;
  std::shared_ptr<const std::vector<TensorRegion>> regions;
};
} // namespace detail

class Tensor {
public:
  Tensor() = default;

  // Views (no data moves; every view aliases the same variables).
  Tensor operator[](std::size_t i) const;
  Tensor index(ArrayRef<std::size_t> indices) const;
  Tensor slice(std::size_t begin, std::size_t end, unsigned dim = 0) const;
  Tensor slice(const Interval &region, unsigned dim = 0) const;
  Tensor slice(ArrayRef<std::size_t> begin, ArrayRef<std::size_t> end) const;
  std::vector<Tensor> slices(ArrayRef<Interval> intervals, unsigned dim = 0) const;
  Tensor reshape(ArrayRef<std::size_t> shape) const;
  Tensor flatten() const;
  Tensor flatten(unsigned dimBegin, unsigned dimEnd) const;
  Tensor dimShuffle(ArrayRef<unsigned> permutation) const;
  Tensor dimRoll(unsigned dimIdx, unsigned newIdx = 0) const;
  Tensor transpose() const;
  Tensor expand(ArrayRef<std::size_t> indices) const;
  Tensor squeeze(ArrayRef<std::size_t> indices) const;
  Tensor reverse(unsigned dim) const;
  Tensor broadcast(unsigned N, unsigned dim) const;

  std::size_t numElements() const;
  unsigned rank() const { return static_cast<unsigned>(dims().size()); }
  std::size_t dim(unsigned i) const;
  std::vector<std::size_t> shape() const { return dims(); }
  Type elementType() const { return type_; }
  bool valid() const { return data_ != nullptr; }
  // True when the view is one run of consecutive elements of one variable.
  bool isContiguous() const;
  // Intervals of the flattened view that are each consecutive in one variable.
  std::vector<Interval> getContiguousRegions() const;
  std::string shortString() const;

  // popsnn internal: the variable runs the view covers, in view order.
  const std::vector<detail::TensorRegion> &regions() const;
  std::uint64_t graphId() const { return graphId_; }
  Tensor(std::uint64_t graphId, Type type, std::vector<std::size_t> shape,
         std::vector<detail::TensorRegion> regions);

private:
  Tensor withRegions(std::vector<std::size_t> shape,
                     std::vector<detail::TensorRegion> regions) const;
  Tensor withShape(std::vector<std::size_t> shape) const; // same runs
  const std::vector<std::size_t> &dims() const;
  std::uint64_t graphId_ = 0;
  Type type_;
  std::shared_ptr<const detail::TensorData> data_;
};

Tensor concat(ArrayRef<Tensor> ts, unsigned dim = 0);
Tensor concat(const Tensor &first, const Tensor &second, unsigned dim = 0);

std::ostream &operator<<(std::ostream &os, const Tensor &t);

} // namespace poplar
