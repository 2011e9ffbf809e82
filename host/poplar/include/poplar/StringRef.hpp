// popsnn's Poplar-compatible runtime: poplar::StringRef, a string argument
// that accepts std::string, C strings and string literals.
#pragma once
#include <cstring>
#include <ostream>
#include <string>

namespace poplar {

class StringRef {
public:
  StringRef() = default;
  StringRef(const char *s) : data_(s ? s : ""), size_(s ? std::strlen(s) : 0) {}
  StringRef(const char *s, std::size_t n) : data_(s), size_(n) {}
  StringRef(const std::string &s) : data_(s.data()), size_(s.size()) {}

  const char *data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string str() const { return std::string(data_, size_); }
  operator std::string() const { return str(); }
  std::string cloneAsString() const { return str(); }
  bool operator==(StringRef o) const {
    return size_ == o.size_ && std::memcmp(data_, o.data_, size_) == 0;
  }
  bool operator!=(StringRef o) const { return !(*this == o); }

private:
  const char *data_ = "";
  std::size_t size_ = 0;
};

inline std::ostream &operator<<(std::ostream &os, StringRef s) {
  return os.write(s.data(), static_cast<std::streamsize>(s.size()));
}

} // namespace poplar
