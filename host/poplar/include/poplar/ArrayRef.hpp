// popsnn's Poplar-compatible runtime: poplar::ArrayRef, a non-owning view of
// contiguous elements that converts from vectors, arrays and brace lists.
#pragma once
#include <array>
#include <cassert>
#include <cstddef>
#include <initializer_list>
#include <vector>

namespace poplar {

template <typename T> class ArrayRef {
public:
  using value_type = T;
  using const_iterator = const T *;
  using iterator = const T *;

  ArrayRef() = default;
  ArrayRef(const T *data, std::size_t size) : data_(data), size_(size) {}
  ArrayRef(const std::vector<T> &v) : data_(v.data()), size_(v.size()) {}
  template <std::size_t N> ArrayRef(const std::array<T, N> &a) : data_(a.data()), size_(N) {}
  template <std::size_t N> ArrayRef(const T (&a)[N]) : data_(a), size_(N) {}
  // Valid only for the full-expression that holds the brace list, as in Poplar.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  ArrayRef(std::initializer_list<T> list) : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  const T *data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Checked in debug builds, as Poplar's (programs written for it rely on this
  // header bringing <cassert>).
  const T &operator[](std::size_t i) const {
    assert(i < size_);
    return data_[i];
  }
  const T &front() const { return data_[0]; }
  const T &back() const { return data_[size_ - 1]; }
  const T *begin() const { return data_; }
  const T *end() const { return data_ + size_; }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }
  operator std::vector<T>() const { return vec(); }

private:
  const T *data_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace poplar
