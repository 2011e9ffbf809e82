# popsnn_add_codelets(<target> OUTPUT <name>.gp SOURCES <codelet.cpp>... [COMPILE_OPTIONS ...])
#
# Builds codelet sources written for Poplar into a loadable codelet object
# (<name>.gp), which graph.addCodelets("<name>.gp") loads with no compiler at
# run time. With popsnn's runtime the .gp is a shared object holding the
# codelets and a generated table of their vertex classes and fields; with
# POPSNN_USE_POPLAR_SDK it is popc's output.
#
# The .gp lands in the target's output directory (CMAKE_CURRENT_BINARY_DIR by
# default); install it with install(FILES $<TARGET_FILE:<target>> ...) or,
# with the SDK, install(FILES <output>).
include_guard(GLOBAL)

function(popsnn_add_codelets target)
  cmake_parse_arguments(ARG "" "OUTPUT" "SOURCES;COMPILE_OPTIONS" ${ARGN})
  if(NOT ARG_OUTPUT OR NOT ARG_SOURCES)
    message(FATAL_ERROR "popsnn_add_codelets(${target}): give OUTPUT <name>.gp and SOURCES <files>")
  endif()
  set(_sources "")
  foreach(_s IN LISTS ARG_SOURCES)
    get_filename_component(_abs "${_s}" ABSOLUTE)
    list(APPEND _sources "${_abs}")
  endforeach()
  get_filename_component(_name "${ARG_OUTPUT}" NAME_WE)

  # popsnn::poplar is an INTERFACE target over Graphcore's SDK when popsnn was
  # configured with POPSNN_USE_POPLAR_SDK=ON: then popc makes the .gp.
  get_target_property(_poplar_type popsnn::poplar TYPE)
  if(_poplar_type STREQUAL "INTERFACE_LIBRARY")
    if(NOT POPC_EXECUTABLE)
      find_program(POPC_EXECUTABLE popc REQUIRED)
    endif()
    set(_out "${CMAKE_CURRENT_BINARY_DIR}/${ARG_OUTPUT}")
    add_custom_command(OUTPUT "${_out}"
      COMMAND "${POPC_EXECUTABLE}" ${ARG_COMPILE_OPTIONS} -O3 ${_sources} -o "${_out}"
      DEPENDS ${_sources}
      COMMENT "popc ${ARG_OUTPUT}")
    add_custom_target(${target} ALL DEPENDS "${_out}")
    return()
  endif()

  set(_prefix "${CMAKE_CURRENT_BINARY_DIR}/${target}_glue")
  set(_glue "${_prefix}.cpp")
  list(LENGTH _sources _n)
  math(EXPR _last "${_n} - 1")
  foreach(_i RANGE ${_last})
    list(APPEND _glue "${_prefix}_part${_i}.cpp")
  endforeach()
  add_custom_command(OUTPUT ${_glue}
    COMMAND $<TARGET_FILE:popsnn::codelet_gen> -o "${_prefix}" ${_sources}
    DEPENDS ${_sources} popsnn::codelet_gen
    COMMENT "popsnn codelet glue for ${ARG_OUTPUT}")
  add_library(${target} MODULE ${_glue})
  target_include_directories(${target} PRIVATE
    $<TARGET_PROPERTY:popsnn::poplar,INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_features(${target} PRIVATE cxx_std_17)
  target_compile_definitions(${target} PRIVATE __POPC__) # as popc defines it for every codelet
  if(ARG_COMPILE_OPTIONS)
    target_compile_options(${target} PRIVATE ${ARG_COMPILE_OPTIONS})
  endif()
  set_target_properties(${target} PROPERTIES PREFIX "" SUFFIX ".gp" OUTPUT_NAME "${_name}"
    CXX_VISIBILITY_PRESET hidden)
endfunction()
