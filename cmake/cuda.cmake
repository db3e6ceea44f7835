# The CUDA backend's build switch.
#
#   SWITCHYARD_CUDA=AUTO (default)  built when check_language finds a CUDA compiler
#   SWITCHYARD_CUDA=ON              required: configuring fails without one
#   SWITCHYARD_CUDA=OFF             not built (the sanitizer and fuzz presets)
#
# Sets SWITCHYARD_WITH_CUDA (ON/OFF) for src/CMakeLists.txt, which adds the
# backend_cuda layer and the compile definition that wires it into
# backend_list.def. CMAKE_CUDA_ARCHITECTURES defaults to 90 (Hopper, the H100 and
# H200): one architecture keeps nvcc's time down on CI's two cores; pass another
# (or "90;100") on the command line to build for more.
set(SWITCHYARD_WITH_CUDA OFF)
if(SWITCHYARD_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SWITCHYARD_WITH_CUDA ON)
  else()
    message(STATUS "switchyard: no CUDA compiler found; the CUDA backend is not built")
  endif()
elseif(SWITCHYARD_CUDA)
  set(SWITCHYARD_WITH_CUDA ON)
elseif(NOT SWITCHYARD_CUDA STREQUAL "OFF" AND NOT SWITCHYARD_CUDA STREQUAL "")
  message(FATAL_ERROR "SWITCHYARD_CUDA must be AUTO, ON or OFF, not '${SWITCHYARD_CUDA}'")
endif()

if(SWITCHYARD_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  # The .cu files hold device code and device.h only (Note [Thin .cu files] in
  # src/backends/cuda/device.h), which is C++17; CMake 3.25 knows no C++20 flag
  # for nvcc.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "switchyard: CUDA backend enabled (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  # Warnings for the host side of .cu files as for C++; nvcc's own warnings become
  # errors with SWITCHYARD_WERROR. Host code rounds as written (as -ffp-contract=off
  # does for C++); device code keeps nvcc's default contraction into FMA, which the
  # kernels' precision claims allow for (Note [CUDA precision claims] in
  # src/backends/cuda/registration.cpp).
  set(SWITCHYARD_CUDA_FLAGS -Xcompiler=-Wall,-Wextra,-ffp-contract=off --expt-relaxed-constexpr)
  if(SWITCHYARD_WERROR)
    list(APPEND SWITCHYARD_CUDA_FLAGS --Werror=all-warnings)
  endif()
endif()
