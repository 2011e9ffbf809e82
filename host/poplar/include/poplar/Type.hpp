// popsnn's Poplar-compatible runtime: poplar::Type, the element types of tensors.
#pragma once
#include <cstddef>
#include <ostream>
#include <string>

namespace poplar {

class Type {
public:
  Type() = default;
  // Internal: the runtime defines the fixed set of types below.
  Type(unsigned id, const char *name, unsigned size) : id_(id), name_(name), size_(size) {}

  std::string toString() const { return name_; }
  bool operator==(const Type &o) const { return id_ == o.id_; }
  bool operator!=(const Type &o) const { return id_ != o.id_; }
  bool operator<(const Type &o) const { return id_ < o.id_; }
  // popsnn extension: size of one element in bytes (Poplar: Target::getTypeSize).
  unsigned sizeInBytes() const { return size_; }
  // popsnn extension: a stable small integer identifying the type.
  unsigned id() const { return id_; }

private:
  unsigned id_ = 0;
  const char *name_ = "<invalid type>";
  unsigned size_ = 0;
};

inline std::ostream &operator<<(std::ostream &os, const Type &t) { return os << t.toString(); }

extern const Type BOOL;
extern const Type CHAR;
extern const Type UNSIGNED_CHAR;
extern const Type SIGNED_CHAR;
extern const Type SHORT;
extern const Type UNSIGNED_SHORT;
extern const Type INT;
extern const Type UNSIGNED_INT;
extern const Type LONGLONG;
extern const Type UNSIGNED_LONGLONG;
extern const Type HALF;
extern const Type FLOAT;

// The poplar::Type for a C++ element type (Poplar: poplar::equivalent_device_type).
template <typename T> struct equivalent_device_type;
template <> struct equivalent_device_type<bool> {
  const Type &value = BOOL;
};
template <> struct equivalent_device_type<char> {
  const Type &value = CHAR;
};
template <> struct equivalent_device_type<unsigned char> {
  const Type &value = UNSIGNED_CHAR;
};
template <> struct equivalent_device_type<signed char> {
  const Type &value = SIGNED_CHAR;
};
template <> struct equivalent_device_type<short> {
  const Type &value = SHORT;
};
template <> struct equivalent_device_type<unsigned short> {
  const Type &value = UNSIGNED_SHORT;
};
template <> struct equivalent_device_type<int> {
  const Type &value = INT;
};
template <> struct equivalent_device_type<unsigned> {
  const Type &value = UNSIGNED_INT;
};
template <> struct equivalent_device_type<long long> {
  const Type &value = LONGLONG;
};
template <> struct equivalent_device_type<unsigned long long> {
  const Type &value = UNSIGNED_LONGLONG;
};
template <> struct equivalent_device_type<float> {
  const Type &value = FLOAT;
};

} // namespace poplar
