// The .npz reader (NpzReader.hpp): the zip container (end-of-central-directory record, its
// zip64 form, the central directory, local headers) and NumPy's .npy format (magic, version,
// a Python-literal header dict, the raw data); docs/checkpoint-format.md describes both.
#include "NpzReader.hpp"

#include <zlib.h>

#include <cctype>
#include <cstdint>
#include <limits>
#include <set>

namespace popsnn {
namespace npz {

std::string printable(const std::string &text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      const char *hex = "0123456789abcdef";
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    }
  }
  return out;
}

namespace {

[[noreturn]] void fail(const std::string &what) { throw Error(printable(what)); }

// Little-endian fields at an offset already checked to be inside the buffer.
std::uint64_t le(const std::string &b, std::size_t at, unsigned bytes) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < bytes; ++i)
    v |= std::uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

void need(const std::string &b, std::uint64_t at, std::uint64_t size, const std::string &what) {
  if (at > b.size() || size > b.size() - at)
    fail(what + " runs past the end of the file (truncated?)");
}

// ---------------------------------------------------------------------------------------
// The zip container

constexpr std::uint32_t kEndSig = 0x06054b50, kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50,
                        kCentralSig = 0x02014b50, kLocalSig = 0x04034b50;

struct Directory {
  std::uint64_t entries = 0, size = 0, offset = 0;
};

Directory findDirectory(const std::string &b) {
  if (b.size() < 22)
    fail("the file is too short to be a zip archive (" + std::to_string(b.size()) + " bytes)");
  // The end record is the last 22 bytes plus a comment of up to 65,535 bytes.
  std::size_t at = b.size() - 22;
  const std::size_t lowest = b.size() - 22 > 65535 ? b.size() - 22 - 65535 : 0;
  while (le(b, at, 4) != kEndSig || at + 22 + le(b, at + 20, 2) != b.size()) {
    if (at == lowest)
      fail("no zip end-of-directory record (not a zip archive, or truncated)");
    --at;
  }
  if (le(b, at + 4, 2) != 0 || le(b, at + 6, 2) != 0)
    fail("the archive spans several disks, which an .npz never does");
  Directory d{le(b, at + 10, 2), le(b, at + 12, 4), le(b, at + 16, 4)};
  if (d.entries != 0xFFFF && d.size != 0xFFFFFFFF && d.offset != 0xFFFFFFFF) {
    if (le(b, at + 8, 2) != d.entries)
      fail("the end record's two entry counts differ");
    return d;
  }
  // zip64: a locator just before the end record points at the 64-bit end record.
  if (at < 20 || le(b, at - 20, 4) != kLocator64Sig)
    fail("a zip64 archive without its zip64 locator");
  const std::uint64_t end64 = le(b, at - 12, 8);
  need(b, end64, 56, "the zip64 end record");
  if (le(b, end64, 4) != kEnd64Sig)
    fail("the zip64 locator does not point at a zip64 end record");
  return Directory{le(b, end64 + 32, 8), le(b, end64 + 40, 8), le(b, end64 + 48, 8)};
}

struct Entry {
  std::string name;
  unsigned method = 0, flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t packed = 0, unpacked = 0, localOffset = 0;
};

// The zip64 extra field replaces the 32-bit fields that hold 0xFFFFFFFF, in this order.
void readZip64Extra(const std::string &b, std::size_t at, std::size_t end, Entry &e) {
  while (at + 4 <= end) {
    const unsigned id = unsigned(le(b, at, 2)), size = unsigned(le(b, at + 2, 2));
    if (at + 4 + size > end)
      fail("entry '" + e.name + "' has a malformed extra field");
    if (id == 0x0001) {
      std::size_t p = at + 4;
      for (std::uint64_t *field : {&e.unpacked, &e.packed, &e.localOffset}) {
        if (*field != 0xFFFFFFFF)
          continue;
        if (p + 8 > at + 4 + size)
          fail("entry '" + e.name + "' has a short zip64 extra field");
        *field = le(b, p, 8);
        p += 8;
      }
    }
    at += 4 + size;
  }
}

std::vector<Entry> readDirectory(const std::string &b, const Directory &d) {
  need(b, d.offset, d.size, "the central directory");
  if (d.entries > d.size / 46)
    fail("the central directory is too small for its " + std::to_string(d.entries) + " entries");
  std::vector<Entry> entries;
  std::size_t at = std::size_t(d.offset);
  const std::size_t end = std::size_t(d.offset + d.size);
  for (std::uint64_t i = 0; i < d.entries; ++i) {
    if (at + 46 > end || le(b, at, 4) != kCentralSig)
      fail("central directory entry " + std::to_string(i) + " is damaged");
    Entry e;
    e.flags = unsigned(le(b, at + 8, 2));
    e.method = unsigned(le(b, at + 10, 2));
    e.crc = std::uint32_t(le(b, at + 16, 4));
    e.packed = le(b, at + 20, 4);
    e.unpacked = le(b, at + 24, 4);
    e.localOffset = le(b, at + 42, 4);
    const std::size_t nameLen = le(b, at + 28, 2), extraLen = le(b, at + 30, 2),
                      commentLen = le(b, at + 32, 2);
    if (at + 46 + nameLen + extraLen + commentLen > end)
      fail("central directory entry " + std::to_string(i) + " runs past the directory");
    e.name = b.substr(at + 46, nameLen);
    readZip64Extra(b, at + 46 + nameLen, at + 46 + nameLen + extraLen, e);
    entries.push_back(e);
    at += 46 + nameLen + extraLen + commentLen;
  }
  return entries;
}

std::string inflateRaw(const std::string &packed, std::uint64_t unpacked, const std::string &name) {
  // Deflate cannot expand data more than ~1032 times: a larger claim is a lie (or a bomb).
  if (unpacked > 1032 * std::uint64_t(packed.size()) + 1024)
    fail("entry '" + name + "' claims an impossible uncompressed size");
  std::string out(std::size_t(unpacked), '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
    fail("zlib could not start inflating entry '" + name + "'");
  z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(packed.data()));
  z.avail_in = uInt(packed.size());
  z.next_out = reinterpret_cast<Bytef *>(&out[0]);
  z.avail_out = uInt(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const bool whole = rc == Z_STREAM_END && z.total_out == unpacked;
  inflateEnd(&z);
  if (!whole)
    fail("entry '" + name + "' does not inflate to its stated size (damaged)");
  return out;
}

std::string entryData(const std::string &b, const Entry &e) {
  const std::string what = "entry '" + e.name + "'";
  if (e.flags & 0x1)
    fail(what + " is encrypted");
  if (e.method != 0 && e.method != 8)
    fail(what + " uses compression method " + std::to_string(e.method) +
         " (an .npz is stored or deflated)");
  if (e.packed > std::numeric_limits<uInt>::max() || e.unpacked > std::numeric_limits<uInt>::max())
    fail(what + " is larger than 4 GiB");
  need(b, e.localOffset, 30, what + "'s local header");
  if (le(b, e.localOffset, 4) != kLocalSig)
    fail(what + "'s local header is missing");
  const std::size_t nameLen = le(b, e.localOffset + 26, 2), extraLen = le(b, e.localOffset + 28, 2);
  need(b, e.localOffset + 30, nameLen + extraLen, what + "'s local header");
  if (b.compare(std::size_t(e.localOffset + 30), nameLen, e.name) != 0)
    fail(what + "'s local header names another file");
  const std::uint64_t start = e.localOffset + 30 + nameLen + extraLen;
  need(b, start, e.packed, what + "'s data");
  std::string data = b.substr(std::size_t(start), std::size_t(e.packed));
  if (e.method == 0 && e.packed != e.unpacked)
    fail(what + " is stored but its two sizes differ");
  if (e.method == 8)
    data = inflateRaw(data, e.unpacked, e.name);
  const uLong crc =
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef *>(data.data()), uInt(data.size()));
  if (crc != e.crc)
    fail(what + " fails its CRC-32 check (damaged)");
  return data;
}

// ---------------------------------------------------------------------------------------
// The .npy header: "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"

struct Literal {
  const std::string &text;
  const std::string &name;
  std::size_t at = 0;

  [[noreturn]] void bad(const std::string &what) const {
    fail("array '" + name + "' has a malformed .npy header (" + what + ")");
  }
  void space() {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
  }
  bool take(char c) {
    space();
    if (at < text.size() && text[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c))
      bad(std::string("expected '") + c + "'");
  }
  std::string string() {
    space();
    if (at >= text.size() || (text[at] != '\'' && text[at] != '"'))
      bad("expected a string");
    const char quote = text[at++];
    const std::size_t end = text.find(quote, at);
    if (end == std::string::npos)
      bad("unterminated string");
    std::string s = text.substr(at, end - at);
    at = end + 1;
    return s;
  }
  bool boolean() {
    space();
    for (const auto &word : {std::make_pair("True", true), std::make_pair("False", false)}) {
      const std::string w = word.first;
      if (text.compare(at, w.size(), w) == 0) {
        at += w.size();
        return word.second;
      }
    }
    bad("fortran_order must be True or False");
  }
  std::vector<std::size_t> shape() {
    expect('(');
    std::vector<std::size_t> dims;
    while (!take(')')) {
      space();
      std::size_t v = 0, digits = 0;
      while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
        if (++digits > 15)
          bad("a dimension is too large");
        v = v * 10 + std::size_t(text[at++] - '0');
      }
      if (digits == 0 || dims.size() >= 32)
        bad("shape must be a tuple of at most 32 integers");
      dims.push_back(v);
      if (!take(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
};

// C order from Fortran order: element (i0, ..., ik) sits at sum(i_j * stride_j), stride_0 = 1.
std::string toCOrder(const Array &a) {
  std::string out(a.bytes.size(), '\0');
  const std::size_t n = a.size(), rank = a.shape.size();
  std::vector<std::size_t> index(rank, 0), stride(rank, 1);
  for (std::size_t j = 1; j < rank; ++j)
    stride[j] = stride[j - 1] * a.shape[j - 1];
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t from = 0;
    for (std::size_t j = 0; j < rank; ++j)
      from += index[j] * stride[j];
    out.replace(i * a.itemSize, a.itemSize, a.bytes, from * a.itemSize, a.itemSize);
    for (std::size_t j = rank; j-- > 0;) { // next C-order index: the last axis runs fastest
      if (++index[j] < a.shape[j])
        break;
      index[j] = 0;
    }
  }
  return out;
}

} // namespace

std::string Array::describe() const {
  std::string s = (kind == 'f'   ? "float"
                   : kind == 'i' ? "int"
                   : kind == 'u' ? "uint"
                                 : "kind ") +
                  std::to_string(8 * itemSize) + " [";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Array parseNpy(const std::string &bytes, const std::string &name) {
  const std::string what = "array '" + name + "'";
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    fail(what + " is not a .npy file");
  const unsigned major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    fail(what + " has .npy format version " + std::to_string(major) + " (1 to 3 are known)");
  const unsigned lenBytes = major == 1 ? 2 : 4;
  need(bytes, 8, lenBytes, what + "'s header");
  const std::uint64_t headerLen = le(bytes, 8, lenBytes);
  need(bytes, 8 + lenBytes, headerLen, what + "'s header");
  const std::string header = bytes.substr(8 + lenBytes, std::size_t(headerLen));

  Literal lit{header, name};
  Array a;
  std::string descr;
  bool fortran = false;
  std::set<std::string> seen;
  lit.expect('{');
  while (!lit.take('}')) {
    const std::string key = lit.string();
    lit.expect(':');
    if (!seen.insert(key).second)
      lit.bad("'" + key + "' given twice");
    if (key == "descr")
      descr = lit.string();
    else if (key == "fortran_order")
      fortran = lit.boolean();
    else if (key == "shape")
      a.shape = lit.shape();
    else
      lit.bad("unknown key '" + key + "'");
    if (!lit.take(',')) {
      lit.expect('}');
      break;
    }
  }
  if (seen.size() != 3)
    lit.bad("it needs descr, fortran_order and shape");
  // '<' little-endian, '|' byte-sized; then the kind and the item size: '<f4', '|u1'.
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|') ||
      descr.find_first_not_of("0123456789", 2) != std::string::npos || descr.size() > 4)
    fail(what + " has dtype '" + descr + "'; popsnn reads little-endian numbers only");
  a.kind = descr[1];
  a.itemSize = unsigned(std::stoul(descr.substr(2)));
  if (a.itemSize == 0 || (descr[0] == '|' && a.itemSize != 1))
    fail(what + " has dtype '" + descr + "'; popsnn reads little-endian numbers only");
  std::uint64_t count = 1;
  for (std::size_t d : a.shape) {
    if (d != 0 && count > (std::uint64_t(1) << 40) / d)
      fail(what + " is too large");
    count *= d;
  }
  const std::uint64_t dataAt = 8 + lenBytes + headerLen;
  if (bytes.size() - dataAt != count * a.itemSize)
    fail(what + " holds " + std::to_string(bytes.size() - dataAt) + " data bytes, its header (" +
         a.describe() + ") says " + std::to_string(count * a.itemSize));
  a.bytes = bytes.substr(std::size_t(dataAt));
  if (fortran)
    a.bytes = toCOrder(a);
  return a;
}

std::map<std::string, Array> read(const std::string &fileBytes) {
  std::map<std::string, Array> arrays;
  for (const Entry &e : readDirectory(fileBytes, findDirectory(fileBytes))) {
    const std::string suffix = ".npy";
    if (e.name.size() <= suffix.size() ||
        e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      fail("entry '" + e.name + "' is not a .npy file");
    const std::string key = e.name.substr(0, e.name.size() - suffix.size());
    if (arrays.count(key))
      fail("entry '" + e.name + "' appears twice");
    arrays.emplace(key, parseNpy(entryData(fileBytes, e), key));
  }
  return arrays;
}

} // namespace npz
} // namespace popsnn
