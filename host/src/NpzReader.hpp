// NumPy's .npz files read without NumPy: a zip archive of .npy files, as np.savez writes
// them (entries stored) or np.savez_compressed (entries deflated, inflated with zlib).
// The bytes are untrusted: every offset, size and header field is checked against the
// file, every entry's CRC-32 against its data; any problem throws npz::Error naming the
// entry and what is wrong with it. Nothing here knows what the arrays mean.
#pragma once

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace popsnn {
namespace npz {

class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// One array in C (row-major) order, little-endian.
struct Array {
  char kind = 0; // NumPy's dtype kind: 'f' float, 'i' signed, 'u' unsigned, 'b' bool, ...
  unsigned itemSize = 0;
  std::vector<std::size_t> shape;
  std::string bytes; // shape's product * itemSize bytes
  std::size_t size() const { return itemSize ? bytes.size() / itemSize : 0; }
  std::string describe() const; // "float32 [3, 4]"
};

// The archive's arrays by entry name without ".npy".
std::map<std::string, Array> read(const std::string &fileBytes);

// `text` with every byte outside printable ASCII written as \xNN (for messages).
std::string printable(const std::string &text);

// One .npy file's bytes as an array (format versions 1.0, 2.0 and 3.0).
Array parseNpy(const std::string &bytes, const std::string &name);

} // namespace npz
} // namespace popsnn
