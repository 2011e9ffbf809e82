// popsnn._native: the thin binding of the host library. Everything heavy
// happens in C++; Python sees NumPy arrays in and out.
#include <pybind11/pybind11.h>

#include "popsnn/version.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_native, m) {
  m.doc() = "popsnn native extension (host graph builder and Poplar-compatible runtime)";
  m.def("version", &popsnn::version, "Version of the C++ host library.");
}
