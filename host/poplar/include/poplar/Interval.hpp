// popsnn's Poplar-compatible runtime: poplar::Interval, a half-open range [begin, end).
#pragma once
#include <cstddef>
#include <ostream>

namespace poplar {

class Interval {
public:
  Interval() = default;
  Interval(std::size_t begin, std::size_t end) : begin_(begin), end_(end) {}
  std::size_t begin() const { return begin_; }
  std::size_t end() const { return end_; }
  std::size_t size() const { return end_ - begin_; }
  bool operator==(const Interval &o) const { return begin_ == o.begin_ && end_ == o.end_; }
  bool operator!=(const Interval &o) const { return !(*this == o); }
  bool operator<(const Interval &o) const {
    return begin_ < o.begin_ || (begin_ == o.begin_ && end_ < o.end_);
  }

private:
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

inline std::ostream &operator<<(std::ostream &os, const Interval &i) {
  return os << "[" << i.begin() << ", " << i.end() << ")";
}

} // namespace poplar
