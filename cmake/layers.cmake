# switchyard_add_layer(): one static library per architectural layer, which sees
# only its own headers and those of the layers it links.
#
# Note [Layers the compiler enforces]
# All public headers live in one folder, include/switchyard/, so that users write
# `#include "switchyard/plan.h"` whatever layer a header belongs to. If every layer
# were given that folder as its include path, any file could include any header and
# an upward edge (dispatch including the planner, say) would build and link
# quietly, because the final program links every layer anyway. So no target gets
# include/ itself. Each layer gets a folder of its own under the build tree,
# holding links to just the headers it owns, and passes that folder on to the
# layers that link it (PUBLIC). A layer's include path is therefore exactly its own
# headers plus those of the layers below it, and an upward include fails to
# compile with "switchyard/<header>: No such file or directory". Private headers
# work the same way: a layer sees `src/<its folder>/` and nothing else of src/.
# This is the "virtual includes" idea of build systems with layering checks,
# done with symbolic links at configure time.
#
# Usage
#   switchyard_add_layer(<name>
#     SOURCES_DIR <folder under src/>   # sources: *.cpp and *.cu there (RECURSE: and
#                                       # below); only src/backends/cuda/ has .cu files
#     [RECURSE]
#     [HEADERS <file in include/switchyard/>...]
#     [DEPENDS <layer>...])
# creates target switchyard_<name>, alias switchyard::<name>.

set(SWITCHYARD_LAYER_INCLUDE_ROOT ${PROJECT_BINARY_DIR}/layer_include)

# SIMD kernels are named by the instruction set they need and only those files are
# compiled for it; the code that calls them checks the running CPU for exactly
# that set first:
#   *_avx2.cpp        AVX2, FMA, F16C
#   *_avxvnni.cpp     those and AVX-VNNI (the VEX vpdpbusd, without AVX-512)
#   *_avx512.cpp      those and AVX-512 F/BW/VL/DQ
#   *_avx512vnni.cpp  those and AVX512_VNNI
#   *_avx512bf16.cpp  those and AVX512_BF16
#   *_amx.cpp         AVX-512 F/BW/VL/DQ, AMX-TILE and AMX-INT8
#   *_amxbf16.cpp     AVX-512 F/BW/VL/DQ and BF16, AMX-TILE and AMX-BF16
# A file is never compiled for an extension its callers do not check, because the
# compiler may use any enabled instruction anywhere in it (scripts/check_isa.sh
# checks the objects).
set(SWITCHYARD_AVX2_FLAGS -mavx2 -mfma -mf16c)
set(SWITCHYARD_AVX512_FLAGS ${SWITCHYARD_AVX2_FLAGS} -mavx512f -mavx512bw -mavx512vl -mavx512dq)
function(switchyard_set_isa_flags)
  foreach(source IN LISTS ARGN)
    if(source MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${source} PROPERTIES COMPILE_OPTIONS "${SWITCHYARD_AVX2_FLAGS}")
    elseif(source MATCHES "_avxvnni\\.cpp$")
      set_source_files_properties(${source} PROPERTIES COMPILE_OPTIONS
                                  "${SWITCHYARD_AVX2_FLAGS};-mavxvnni")
    elseif(source MATCHES "_avx512(vnni|bf16)?\\.cpp$")
      set(flags ${SWITCHYARD_AVX512_FLAGS})
      if(CMAKE_MATCH_1)
        list(APPEND flags -mavx512${CMAKE_MATCH_1})
      endif()
      set_source_files_properties(${source} PROPERTIES COMPILE_OPTIONS "${flags}")
    elseif(source MATCHES "_amx\\.cpp$")
      set_source_files_properties(${source} PROPERTIES COMPILE_OPTIONS
                                  "${SWITCHYARD_AVX512_FLAGS};-mamx-tile;-mamx-int8")
    elseif(source MATCHES "_amxbf16\\.cpp$")
      set_source_files_properties(
        ${source} PROPERTIES COMPILE_OPTIONS
                             "${SWITCHYARD_AVX512_FLAGS};-mavx512bf16;-mamx-tile;-mamx-bf16")
    endif()
  endforeach()
endfunction()

# Replaces `dir` by a folder of links: <dir>/<link> -> <target> per pair.
function(switchyard_link_folder dir)
  file(REMOVE_RECURSE ${dir})
  set(pairs ${ARGN})
  while(pairs)
    list(POP_FRONT pairs link target)
    get_filename_component(parent ${dir}/${link} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${target} ${dir}/${link} SYMBOLIC)
  endwhile()
endfunction()

function(switchyard_add_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "RECURSE" "SOURCES_DIR" "HEADERS;DEPENDS")
  set(src ${PROJECT_SOURCE_DIR}/src/${arg_SOURCES_DIR})
  if(arg_RECURSE)
    file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${src}/*.cpp ${src}/*.cu)
  else()
    file(GLOB sources CONFIGURE_DEPENDS ${src}/*.cpp ${src}/*.cu)
  endif()
  switchyard_set_isa_flags(${sources})

  set(target switchyard_${name})
  add_library(${target} STATIC ${sources})
  add_library(switchyard::${name} ALIAS ${target})

  # The layer's own public headers, and its private folder.
  set(public_pairs)
  foreach(header IN LISTS arg_HEADERS)
    set(path ${PROJECT_SOURCE_DIR}/include/switchyard/${header})
    if(NOT EXISTS ${path})
      message(FATAL_ERROR "switchyard layer ${name}: no header include/switchyard/${header}")
    endif()
    list(APPEND public_pairs switchyard/${header} ${path})
  endforeach()
  set(public_dir ${SWITCHYARD_LAYER_INCLUDE_ROOT}/${name}/public)
  set(private_dir ${SWITCHYARD_LAYER_INCLUDE_ROOT}/${name}/private)
  switchyard_link_folder(${public_dir} ${public_pairs})
  switchyard_link_folder(${private_dir} ${arg_SOURCES_DIR} ${src})

  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${public_dir}>
                             PRIVATE ${private_dir})
  list(TRANSFORM arg_DEPENDS PREPEND switchyard:: OUTPUT_VARIABLE deps)
  target_link_libraries(${target} PUBLIC ${deps} PRIVATE switchyard_options)
  if(sources MATCHES "\\.cu(;|$)")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${SWITCHYARD_CUDA_FLAGS}>)
  endif()
  set_property(GLOBAL APPEND PROPERTY SWITCHYARD_LAYERS ${target})
  set_property(GLOBAL APPEND PROPERTY SWITCHYARD_LAYER_HEADERS ${arg_HEADERS})
endfunction()

# After every layer: each header of include/switchyard/ must belong to exactly one
# layer, or no target could include it.
function(switchyard_check_layer_headers)
  get_property(owned GLOBAL PROPERTY SWITCHYARD_LAYER_HEADERS)
  file(GLOB headers RELATIVE ${PROJECT_SOURCE_DIR}/include/switchyard
       CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/switchyard/*)
  foreach(header IN LISTS headers)
    list(FIND owned ${header} at)
    if(at EQUAL -1)
      message(FATAL_ERROR "include/switchyard/${header} belongs to no layer: add it to the "
                          "HEADERS of its layer in src/CMakeLists.txt")
    endif()
  endforeach()
  set(seen)
  foreach(header IN LISTS owned)
    if(header IN_LIST seen)
      message(FATAL_ERROR "include/switchyard/${header} is claimed by two layers")
    endif()
    list(APPEND seen ${header})
  endforeach()
endfunction()
