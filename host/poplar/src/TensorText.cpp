#include "TensorText.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace poplar {
namespace detail {

namespace {

std::string formatValue(double v, bool floatingPoint) {
  char buf[64];
  if (floatingPoint) {
    if (std::isnan(v))
      return "nan";
    if (std::isinf(v))
      return v > 0 ? "inf" : "-inf";
    std::snprintf(buf, sizeof buf, "%.7f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<std::int64_t>(v));
  }
  return buf;
}

// Writes dimension `d` of the block starting at element `first`.
void formatDim(std::string &out, const std::vector<std::size_t> &shape,
               const std::vector<std::size_t> &strides, const std::vector<double> &values, bool fp,
               std::size_t d, std::size_t first) {
  out += '[';
  for (std::size_t i = 0; i < shape[d]; ++i) {
    if (d + 1 == shape.size()) {
      if (i)
        out += ' ';
      out += formatValue(values[first + i], fp);
      continue;
    }
    if (i) {
      // Rows of a matrix on their own lines; a blank line between matrices.
      out += '\n';
      out.append(shape.size() - d - 2, '\n');
      out.append(d + 1, ' ');
    }
    formatDim(out, shape, strides, values, fp, d + 1, first + i * strides[d]);
  }
  out += ']';
}

} // namespace

std::string formatTensor(const std::string &title, const std::vector<std::size_t> &shape,
                         const std::vector<double> &values, bool floatingPoint) {
  std::string out = title + ": ";
  if (shape.empty()) {
    out += formatValue(values.empty() ? 0.0 : values[0], floatingPoint);
  } else {
    std::vector<std::size_t> strides(shape.size(), 1);
    for (std::size_t d = shape.size(); d-- > 1;)
      strides[d - 1] = strides[d] * shape[d];
    formatDim(out, shape, strides, values, floatingPoint, 0, 0);
  }
  return out + "\n";
}

} // namespace detail
} // namespace poplar
