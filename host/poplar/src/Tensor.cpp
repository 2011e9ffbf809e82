// Tensor views: every operation maps ranges of the view's row-major element
// order onto runs of variable elements; no data is touched.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "poplar/Tensor.hpp"
#include "poplar/exceptions.hpp"

namespace poplar {

namespace {

using detail::TensorRegion;
using Regions = std::vector<TensorRegion>;

std::size_t product(const std::vector<std::size_t> &s, std::size_t from = 0,
                    std::size_t to = ~std::size_t(0)) {
  std::size_t n = 1;
  for (std::size_t i = from; i < s.size() && i < to; ++i)
    n *= s[i];
  return n;
}

std::string shapeString(const std::vector<std::size_t> &s) {
  std::ostringstream os;
  os << "{";
  for (std::size_t i = 0; i < s.size(); ++i)
    os << (i ? "," : "") << s[i];
  os << "}";
  return os.str();
}

void append(Regions &out, unsigned var, std::size_t b, std::size_t e) {
  if (b == e)
    return;
  if (!out.empty() && out.back().var == var && out.back().end == b) {
    out.back().end = e;
    return;
  }
  out.push_back({var, b, e});
}

// Maps view ranges [a, b) (in order) onto the variable runs of `regions`. Views of a few
// runs (almost every slice while a graph is built) are scanned without allocating; long
// lists (concatenations of many shards) get a prefix table for binary search.
class RangeMapper {
public:
  explicit RangeMapper(const Regions &r) : regions_(r) {
    if (r.size() <= kScanRuns)
      return;
    starts_.assign(r.size() + 1, 0);
    for (std::size_t i = 0; i < r.size(); ++i)
      starts_[i + 1] = starts_[i] + (r[i].end - r[i].begin);
  }
  void map(std::size_t a, std::size_t b, Regions &out) const {
    if (a >= b)
      return;
    std::size_t i = 0, start = 0;
    locate(a, i, start);
    while (a < b) {
      const TensorRegion &r = regions_[i];
      const std::size_t off = a - start, len = r.end - r.begin;
      const std::size_t take = std::min(b - a, len - off);
      append(out, r.var, r.begin + off, r.begin + off + take);
      a += take;
      start += len;
      ++i;
    }
  }
  // Maps a list of single view indices, coalescing consecutive ones.
  void mapIndices(const std::vector<std::size_t> &idx, Regions &out) const {
    std::size_t i = 0;
    while (i < idx.size()) {
      std::size_t j = i + 1;
      while (j < idx.size() && idx[j] == idx[j - 1] + 1)
        ++j;
      map(idx[i], idx[j - 1] + 1, out);
      i = j;
    }
  }

private:
  static constexpr std::size_t kScanRuns = 8;
  // The run holding view element `a` and the view index where that run starts.
  void locate(std::size_t a, std::size_t &i, std::size_t &start) const {
    if (starts_.empty()) {
      for (; start + (regions_[i].end - regions_[i].begin) <= a; ++i)
        start += regions_[i].end - regions_[i].begin;
      return;
    }
    i = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), a) -
                                 starts_.begin()) -
        1;
    start = starts_[i];
  }
  const Regions &regions_;
  std::vector<std::size_t> starts_;
};

void requireValid(const Tensor &t, const char *op) {
  if (!t.valid())
    throw poplar_error(std::string("Tensor::") + op +
                       ": the tensor is empty (default-constructed); create it with "
                       "graph.addVariable or addConstant first");
}

} // namespace

Tensor::Tensor(std::uint64_t graphId, Type type, std::vector<std::size_t> shape,
               std::vector<TensorRegion> regions)
    : graphId_(graphId), type_(type),
      data_(std::make_shared<const detail::TensorData>(detail::TensorData{
          std::move(shape), std::make_shared<const Regions>(std::move(regions))})) {}

Tensor Tensor::withRegions(std::vector<std::size_t> shape, Regions regions) const {
  return Tensor(graphId_, type_, std::move(shape), std::move(regions));
}

Tensor Tensor::withShape(std::vector<std::size_t> shape) const {
  Tensor t = *this;
  t.data_ = std::make_shared<const detail::TensorData>(
      detail::TensorData{std::move(shape), data_->regions});
  return t;
}

const std::vector<TensorRegion> &Tensor::regions() const {
  static const Regions empty;
  return data_ ? *data_->regions : empty;
}

const std::vector<std::size_t> &Tensor::dims() const {
  static const std::vector<std::size_t> empty;
  return data_ ? data_->shape : empty;
}

std::size_t Tensor::numElements() const { return valid() ? product(dims()) : 0; }

std::size_t Tensor::dim(unsigned i) const {
  if (i >= dims().size())
    throw index_error("Tensor::dim(" + std::to_string(i) + "): the tensor has rank " +
                      std::to_string(dims().size()));
  return dims()[i];
}

Tensor Tensor::slice(ArrayRef<std::size_t> begin, ArrayRef<std::size_t> end) const {
  requireValid(*this, "slice");
  const std::size_t r = dims().size();
  if (begin.size() != r || end.size() != r)
    throw index_error("Tensor::slice: begin and end need " + std::to_string(r) +
                      " coordinates (the tensor's rank), got " + std::to_string(begin.size()) +
                      " and " + std::to_string(end.size()));
  std::vector<std::size_t> newShape(r);
  for (std::size_t d = 0; d < r; ++d) {
    if (begin[d] > end[d] || end[d] > dims()[d])
      throw index_error("Tensor::slice: dimension " + std::to_string(d) + " range [" +
                        std::to_string(begin[d]) + ", " + std::to_string(end[d]) +
                        ") is not inside [0, " + std::to_string(dims()[d]) + ") of shape " +
                        shapeString(dims()));
    newShape[d] = end[d] - begin[d];
  }
  Regions out;
  if (r == 0)
    return *this;
  if (product(newShape) == 0)
    return withRegions(newShape, {});
  RangeMapper mapper(regions());
  std::vector<std::size_t> strides(r, 1);
  for (std::size_t d = r - 1; d > 0; --d)
    strides[d - 1] = strides[d] * dims()[d];
  std::vector<std::size_t> idx(begin.begin(), begin.end());
  for (;;) {
    std::size_t off = 0;
    for (std::size_t d = 0; d + 1 < r; ++d)
      off += idx[d] * strides[d];
    mapper.map(off + begin[r - 1], off + end[r - 1], out);
    if (r == 1)
      break;
    // Next combination of the outer indices (dimensions 0 .. r-2).
    bool done = true;
    for (std::size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < end[d]) {
        done = false;
        break;
      }
      idx[d] = begin[d];
    }
    if (done)
      break;
  }
  return withRegions(newShape, std::move(out));
}

Tensor Tensor::slice(std::size_t begin, std::size_t end, unsigned dimension) const {
  requireValid(*this, "slice");
  if (dimension >= dims().size())
    throw index_error("Tensor::slice: dimension " + std::to_string(dimension) +
                      " does not exist in a tensor of shape " + shapeString(dims()));
  // Every dimension before `dimension` of size 1: the slice is one range of the view.
  if (std::all_of(dims().begin(), dims().begin() + dimension,
                  [](std::size_t n) { return n == 1; }) &&
      begin <= end && end <= dims()[dimension]) {
    const std::size_t inner = product(dims(), dimension + 1);
    std::vector<std::size_t> newShape = dims();
    newShape[dimension] = end - begin;
    Regions out;
    RangeMapper(regions()).map(begin * inner, end * inner, out);
    return withRegions(std::move(newShape), std::move(out));
  }
  std::vector<std::size_t> b(dims().size(), 0), e = dims();
  b[dimension] = begin;
  e[dimension] = end;
  return slice(ArrayRef<std::size_t>(b), ArrayRef<std::size_t>(e));
}

Tensor Tensor::slice(const Interval &region, unsigned dimension) const {
  return slice(region.begin(), region.end(), dimension);
}

std::vector<Tensor> Tensor::slices(ArrayRef<Interval> intervals, unsigned dimension) const {
  std::vector<Tensor> out;
  for (const auto &i : intervals)
    out.push_back(slice(i, dimension));
  return out;
}

Tensor Tensor::operator[](std::size_t i) const {
  requireValid(*this, "operator[]");
  if (dims().empty())
    throw index_error("Tensor::operator[]: a scalar (rank 0) tensor cannot be indexed");
  if (i >= dims()[0])
    throw index_error("Tensor::operator[]: index " + std::to_string(i) +
                      " is out of range for dimension 0 of shape " + shapeString(dims()));
  Tensor s = slice(i, i + 1, 0);
  return s.withShape(std::vector<std::size_t>(dims().begin() + 1, dims().end()));
}

Tensor Tensor::index(ArrayRef<std::size_t> indices) const {
  Tensor t = *this;
  for (auto i : indices)
    t = t[i];
  return t;
}

Tensor Tensor::reshape(ArrayRef<std::size_t> shape) const {
  requireValid(*this, "reshape");
  std::vector<std::size_t> s(shape.begin(), shape.end());
  if (product(s) != numElements())
    throw poplar_error("Tensor::reshape: shape " + shapeString(s) + " has " +
                       std::to_string(product(s)) + " elements but the tensor of shape " +
                       shapeString(dims()) + " has " + std::to_string(numElements()));
  return withShape(std::move(s));
}

Tensor Tensor::flatten() const {
  std::size_t n = numElements();
  return reshape({n});
}

Tensor Tensor::flatten(unsigned dimBegin, unsigned dimEnd) const {
  if (dimBegin >= dimEnd || dimEnd > dims().size())
    throw index_error("Tensor::flatten(" + std::to_string(dimBegin) + ", " +
                      std::to_string(dimEnd) + "): need dimBegin < dimEnd <= rank " +
                      std::to_string(dims().size()));
  std::vector<std::size_t> s(dims().begin(), dims().begin() + dimBegin);
  s.push_back(product(dims(), dimBegin, dimEnd));
  s.insert(s.end(), dims().begin() + dimEnd, dims().end());
  return reshape(s);
}

Tensor Tensor::dimShuffle(ArrayRef<unsigned> permutation) const {
  requireValid(*this, "dimShuffle");
  const std::size_t r = dims().size();
  std::vector<unsigned> p(permutation.begin(), permutation.end());
  std::vector<unsigned> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  bool ok = p.size() == r;
  for (std::size_t i = 0; ok && i < r; ++i)
    ok = sorted[i] == i;
  if (!ok)
    throw index_error("Tensor::dimShuffle: the permutation must list each of the " +
                      std::to_string(r) + " dimensions exactly once");
  std::vector<std::size_t> newShape(r), strides(r, 1);
  for (std::size_t d = r; d-- > 1;)
    strides[d - 1] = strides[d] * dims()[d];
  for (std::size_t d = 0; d < r; ++d)
    newShape[d] = dims()[p[d]];
  const std::size_t n = numElements();
  std::vector<std::size_t> src;
  src.reserve(n);
  std::vector<std::size_t> idx(r, 0);
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t off = 0;
    for (std::size_t d = 0; d < r; ++d)
      off += idx[d] * strides[p[d]];
    src.push_back(off);
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < newShape[d])
        break;
      idx[d] = 0;
    }
  }
  Regions out;
  RangeMapper(regions()).mapIndices(src, out);
  return withRegions(newShape, std::move(out));
}

Tensor Tensor::dimRoll(unsigned dimIdx, unsigned newIdx) const {
  const unsigned r = rank();
  if (dimIdx >= r || newIdx >= r)
    throw index_error("Tensor::dimRoll: dimensions must be below the rank " + std::to_string(r));
  std::vector<unsigned> p;
  for (unsigned d = 0; d < r; ++d)
    if (d != dimIdx)
      p.push_back(d);
  p.insert(p.begin() + newIdx, dimIdx);
  return dimShuffle(p);
}

Tensor Tensor::transpose() const {
  if (rank() != 2)
    throw poplar_error("Tensor::transpose: needs a rank-2 tensor, this one has shape " +
                       shapeString(dims()) + "; use dimShuffle for other ranks");
  return dimShuffle({1, 0});
}

Tensor Tensor::expand(ArrayRef<std::size_t> indices) const {
  std::vector<std::size_t> idx(indices.begin(), indices.end());
  std::sort(idx.begin(), idx.end());
  std::vector<std::size_t> s = dims();
  for (std::size_t k = 0; k < idx.size(); ++k) {
    std::size_t at = idx[k] + k;
    if (at > s.size())
      throw index_error("Tensor::expand: index " + std::to_string(idx[k]) + " is beyond the rank " +
                        std::to_string(dims().size()));
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), 1);
  }
  return reshape(s);
}

Tensor Tensor::squeeze(ArrayRef<std::size_t> indices) const {
  std::vector<bool> drop(dims().size(), false);
  for (auto i : indices) {
    if (i >= dims().size() || dims()[i] != 1)
      throw index_error("Tensor::squeeze: dimension " + std::to_string(i) +
                        " is not a size-1 dimension of shape " + shapeString(dims()));
    drop[i] = true;
  }
  std::vector<std::size_t> s;
  for (std::size_t d = 0; d < dims().size(); ++d)
    if (!drop[d])
      s.push_back(dims()[d]);
  return reshape(s);
}

Tensor Tensor::reverse(unsigned dimension) const {
  requireValid(*this, "reverse");
  if (dimension >= rank())
    throw index_error("Tensor::reverse: dimension " + std::to_string(dimension) +
                      " does not exist in shape " + shapeString(dims()));
  const std::size_t outer = product(dims(), 0, dimension), n = dims()[dimension],
                    inner = product(dims(), dimension + 1);
  Regions out;
  RangeMapper m(regions());
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t k = n; k-- > 0;) {
      std::size_t base = (o * n + k) * inner;
      m.map(base, base + inner, out);
    }
  return withRegions(dims(), std::move(out));
}

Tensor Tensor::broadcast(unsigned N, unsigned dimension) const {
  std::vector<Tensor> copies(N, *this);
  return concat(copies, dimension);
}

bool Tensor::isContiguous() const { return regions().size() <= 1; }

std::vector<Interval> Tensor::getContiguousRegions() const {
  std::vector<Interval> out;
  std::size_t pos = 0;
  for (const auto &r : regions()) {
    out.emplace_back(pos, pos + (r.end - r.begin));
    pos += r.end - r.begin;
  }
  return out;
}

std::string Tensor::shortString() const { return type_.toString() + shapeString(dims()); }

Tensor concat(ArrayRef<Tensor> ts, unsigned dimension) {
  if (ts.empty())
    throw poplar_error("concat: needs at least one tensor");
  const Tensor &first = ts[0];
  for (const auto &t : ts)
    if (!t.valid())
      throw poplar_error("concat: a tensor in the list is empty (default-constructed)");
  std::vector<std::size_t> shape = first.shape();
  if (dimension >= shape.size())
    throw index_error("concat: dimension " + std::to_string(dimension) +
                      " does not exist in tensors of rank " + std::to_string(shape.size()));
  std::size_t total = 0;
  for (std::size_t k = 0; k < ts.size(); ++k) {
    const Tensor &t = ts[k];
    bool same = t.rank() == shape.size() && t.elementType() == first.elementType() &&
                t.graphId() == first.graphId();
    for (unsigned d = 0; same && d < t.rank(); ++d)
      same = d == dimension || t.dim(d) == shape[d];
    if (!same)
      throw poplar_error("concat: tensor " + std::to_string(k) + " (" + t.shortString() +
                         ") does not match tensor 0 (" + first.shortString() +
                         ") in element type, graph, or every dimension but " +
                         std::to_string(dimension));
    total += t.dim(dimension);
  }
  std::size_t outer = 1;
  for (unsigned d = 0; d < dimension; ++d)
    outer *= shape[d];
  std::vector<RangeMapper> mappers;
  std::vector<std::size_t> slab;
  mappers.reserve(ts.size());
  for (const auto &t : ts) {
    mappers.emplace_back(t.regions());
    std::size_t inner = 1;
    for (unsigned d = dimension; d < t.rank(); ++d)
      inner *= t.dim(d);
    slab.push_back(inner);
  }
  Regions out;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t k = 0; k < ts.size(); ++k)
      mappers[k].map(o * slab[k], (o + 1) * slab[k], out);
  shape[dimension] = total;
  return Tensor(first.graphId(), first.elementType(), shape, std::move(out));
}

Tensor concat(const Tensor &a, const Tensor &b, unsigned dimension) {
  std::vector<Tensor> v{a, b};
  return concat(v, dimension);
}

std::ostream &operator<<(std::ostream &os, const Tensor &t) { return os << t.shortString(); }

} // namespace poplar
