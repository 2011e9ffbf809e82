// Internal: the text PrintTensor writes, in Poplar's format.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace poplar {
namespace detail {

// "title: [1 2 3]"; higher ranks nest brackets NumPy-style, one row per line
// ("[[1 2]\n [3 4]]"); floating-point values in fixed notation with 7 decimals
// ("1.5000000"), integers and booleans as integers.
std::string formatTensor(const std::string &title, const std::vector<std::size_t> &shape,
                         const std::vector<double> &values, bool floatingPoint);

} // namespace detail
} // namespace poplar
