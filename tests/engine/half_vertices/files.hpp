// Raw binary files between the test (NumPy's tofile/fromfile) and the harnesses.
#pragma once

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

inline std::vector<char> readFile(const std::string &path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> data(bytes);
  if (!in.read(data.data(), std::streamsize(bytes)))
    throw std::runtime_error("cannot read " + std::to_string(bytes) + " bytes from " + path);
  return data;
}

inline void writeFile(const std::string &path, const std::vector<char> &data) {
  std::ofstream out(path, std::ios::binary);
  if (!out.write(data.data(), std::streamsize(data.size())))
    throw std::runtime_error("cannot write " + path);
}
