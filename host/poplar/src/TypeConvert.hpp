// Internal: element conversions for initial values and predicates.
#pragma once
#include <cstdint>
#include <cstring>

#include "poplar/Type.hpp"

namespace poplar {
namespace detail {

inline std::uint16_t floatToHalf(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  std::int32_t exp = static_cast<std::int32_t>((x >> 23) & 0xFF) - 127 + 15;
  std::uint32_t mant = x & 0x7FFFFFu;
  if (((x >> 23) & 0xFF) == 0xFF)
    return static_cast<std::uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0));
  if (exp >= 31)
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (exp <= 0) {
    if (exp < -10)
      return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    std::uint32_t shift = static_cast<std::uint32_t>(14 - exp);
    std::uint32_t half = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = sign | (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  std::uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
    ++half;
  return static_cast<std::uint16_t>(half);
}

inline float halfToFloat(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FFu, x;
  if (exp == 0) {
    if (mant == 0)
      x = sign;
    else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      x = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
    }
  } else if (exp == 31)
    x = sign | 0x7F800000u | (mant << 13);
  else
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

template <typename T> inline void put(void *dst, double v) {
  T x = static_cast<T>(v);
  std::memcpy(dst, &x, sizeof(T));
}
template <typename T> inline double get(const void *src) {
  T x;
  std::memcpy(&x, src, sizeof(T));
  return static_cast<double>(x);
}

inline void storeAs(const Type &t, double v, void *dst) {
  switch (t.id()) {
  case 1:
    put<bool>(dst, v != 0);
    break;
  case 2:
    put<char>(dst, v);
    break;
  case 3:
    put<unsigned char>(dst, v);
    break;
  case 4:
    put<signed char>(dst, v);
    break;
  case 5:
    put<short>(dst, v);
    break;
  case 6:
    put<unsigned short>(dst, v);
    break;
  case 7:
    put<int>(dst, v);
    break;
  case 8:
    put<unsigned>(dst, v);
    break;
  case 9:
    put<long long>(dst, v);
    break;
  case 10:
    put<unsigned long long>(dst, v);
    break;
  case 11: {
    std::uint16_t h = floatToHalf(static_cast<float>(v));
    std::memcpy(dst, &h, 2);
    break;
  }
  case 12:
    put<float>(dst, v);
    break;
  default:
    break;
  }
}

// Whether values[0, count) all store as zero bytes in type t (-0.0 does not).
inline bool allStoreAsZero(const Type &t, const double *values, std::size_t count) {
  unsigned char bytes[16];
  for (std::size_t i = 0; i < count; ++i) {
    std::memset(bytes, 0, sizeof bytes);
    storeAs(t, values[i], bytes);
    for (unsigned char byte : bytes)
      if (byte != 0)
        return false;
  }
  return true;
}

inline double loadAs(const Type &t, const void *src) {
  switch (t.id()) {
  case 1:
    return get<bool>(src);
  case 2:
    return get<char>(src);
  case 3:
    return get<unsigned char>(src);
  case 4:
    return get<signed char>(src);
  case 5:
    return get<short>(src);
  case 6:
    return get<unsigned short>(src);
  case 7:
    return get<int>(src);
  case 8:
    return get<unsigned>(src);
  case 9:
    return get<long long>(src);
  case 10:
    return get<unsigned long long>(src);
  case 11: {
    std::uint16_t h;
    std::memcpy(&h, src, 2);
    return halfToFloat(h);
  }
  case 12:
    return get<float>(src);
  default:
    return 0;
  }
}

// A Type from a Poplar type name as codelet field tables spell it.
const Type *typeFromName(const char *name);

} // namespace detail
} // namespace poplar
