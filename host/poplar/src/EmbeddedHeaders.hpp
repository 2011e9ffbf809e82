#pragma once

namespace poplar {
namespace detail {

struct EmbeddedHeader {
  const char *path; // relative to the include directory, e.g. "poplar/Vertex.hpp"
  const char *content;
};

extern const EmbeddedHeader kEmbeddedHeaders[];
extern const unsigned kNumEmbeddedHeaders;

} // namespace detail
} // namespace poplar
