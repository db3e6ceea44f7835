# Optional libraries that kernels use when present. Each is found here once and
# linked to the CPU backend (switchyard_backend_cpu) with a compile definition
# saying it is there.

# OpenBLAS provides a sibling f32 GEMM alternative ("openblas" source).
find_path(SWITCHYARD_CBLAS_INCLUDE cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas
  NO_DEFAULT_PATH)
find_library(SWITCHYARD_OPENBLAS_LIBRARY NAMES openblas)
if(SWITCHYARD_CBLAS_INCLUDE AND SWITCHYARD_OPENBLAS_LIBRARY)
  target_include_directories(switchyard_backend_cpu SYSTEM PRIVATE ${SWITCHYARD_CBLAS_INCLUDE})
  target_link_libraries(switchyard_backend_cpu PRIVATE ${SWITCHYARD_OPENBLAS_LIBRARY})
  target_compile_definitions(switchyard_backend_cpu PRIVATE SWITCHYARD_HAVE_OPENBLAS=1)
  message(STATUS "switchyard: OpenBLAS sibling kernels enabled (${SWITCHYARD_OPENBLAS_LIBRARY})")
else()
  message(STATUS "switchyard: OpenBLAS not found; its sibling kernels are not built")
endif()
