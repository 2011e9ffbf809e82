// popsnn's Poplar-compatible runtime: the exception types Poplar throws. All
// derive from poplar::poplar_error (itself a std::runtime_error), so catching
// that catches every runtime error.
#pragma once
#include <stdexcept>
#include <string>

namespace poplar {

struct poplar_error : std::runtime_error {
  std::string type;
  explicit poplar_error(const std::string &message)
      : std::runtime_error(message), type("poplar_error") {}
  poplar_error(const std::string &message, const char *kind)
      : std::runtime_error(message), type(kind) {}
};

#define POPSNN_POPLAR_ERROR(NAME)                                                                  \
  struct NAME : poplar_error {                                                                     \
    explicit NAME(const std::string &message) : poplar_error(message, #NAME) {}                    \
  };

POPSNN_POPLAR_ERROR(control_program_error)
POPSNN_POPLAR_ERROR(graph_connection_error)
POPSNN_POPLAR_ERROR(graph_cycle_error)
POPSNN_POPLAR_ERROR(graph_memory_allocation_error)
POPSNN_POPLAR_ERROR(graph_program_compilation_error)
POPSNN_POPLAR_ERROR(index_error)
POPSNN_POPLAR_ERROR(invalid_machine_model)
POPSNN_POPLAR_ERROR(invalid_option)
POPSNN_POPLAR_ERROR(invalid_tile_mapping)
POPSNN_POPLAR_ERROR(link_error)
POPSNN_POPLAR_ERROR(missing_cycle_estimate)
POPSNN_POPLAR_ERROR(missing_perf_estimate)
POPSNN_POPLAR_ERROR(no_environment)
POPSNN_POPLAR_ERROR(no_size_specified)
POPSNN_POPLAR_ERROR(overflow_error)
POPSNN_POPLAR_ERROR(parse_error)
POPSNN_POPLAR_ERROR(profiling_disabled)
POPSNN_POPLAR_ERROR(runtime_error)
POPSNN_POPLAR_ERROR(stream_connection_error)
POPSNN_POPLAR_ERROR(stream_memory_allocation_error)
POPSNN_POPLAR_ERROR(symbol_error)
POPSNN_POPLAR_ERROR(tensor_creation_error)
POPSNN_POPLAR_ERROR(tensor_io_state_error)
POPSNN_POPLAR_ERROR(type_error)
POPSNN_POPLAR_ERROR(unknown_field)
POPSNN_POPLAR_ERROR(unknown_vertex_type)
POPSNN_POPLAR_ERROR(unknown_runtime_function)

#undef POPSNN_POPLAR_ERROR

} // namespace poplar
