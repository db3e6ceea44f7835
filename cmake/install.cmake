# Note [The installed library]
# Inside this build Switchyard is one static library per layer (layers.cmake).
# What is installed is what a downstream project wants instead: the public
# headers, one library in two forms made of every layer's objects
# (libswitchyard.a and libswitchyard.so), the `switchyard` tool, a CMake package
# (find_package(switchyard CONFIG) gives switchyard::switchyard, the shared
# library, and switchyard::switchyard_static) and a pkg-config file
# (switchyard.pc; switchyard-static.pc for the static form). No public header
# includes a third-party header, so a consumer compiles against the headers
# alone; the static form carries its link dependencies (fmt, threads, OpenBLAS
# and the CUDA runtime when the build has them) in the package and in
# switchyard-static.pc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(switchyard_layers GLOBAL PROPERTY SWITCHYARD_LAYERS)
set(switchyard_objects)
foreach(layer IN LISTS switchyard_layers)
  list(APPEND switchyard_objects $<TARGET_OBJECTS:${layer}>)
endforeach()

# What the layers link beyond each other, for the combined libraries.
set(switchyard_link_deps fmt::fmt Threads::Threads ${CMAKE_DL_LIBS})
set(switchyard_pc_static_libs "-lfmt -pthread")
if(CMAKE_DL_LIBS)  # the kernel-pack loader's dlopen
  string(APPEND switchyard_pc_static_libs " -l${CMAKE_DL_LIBS}")
endif()
if(SWITCHYARD_OPENBLAS_LIBRARY AND SWITCHYARD_CBLAS_INCLUDE)
  list(APPEND switchyard_link_deps ${SWITCHYARD_OPENBLAS_LIBRARY})
  string(APPEND switchyard_pc_static_libs " ${SWITCHYARD_OPENBLAS_LIBRARY}")
endif()
if(SWITCHYARD_WITH_CUDA)
  list(APPEND switchyard_link_deps CUDA::cudart CUDA::cublasLt)
  string(APPEND switchyard_pc_static_libs
         " -L${CUDAToolkit_LIBRARY_DIR} -lcublasLt -lcudart -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR}")
  if(SWITCHYARD_NCCL_INCLUDE_DIR AND SWITCHYARD_NCCL_LIBRARY)  # src/CMakeLists.txt
    list(APPEND switchyard_link_deps ${SWITCHYARD_NCCL_LIBRARY})
    string(APPEND switchyard_pc_static_libs " ${SWITCHYARD_NCCL_LIBRARY}")
  endif()
endif()

foreach(kind IN ITEMS static shared)
  set(target switchyard_${kind}_library)
  string(TOUPPER ${kind} type)
  add_library(${target} ${type} ${switchyard_objects})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME switchyard EXPORT_NAME switchyard_${kind})
  target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${target} INTERFACE cxx_std_20)
endforeach()
# The static form hands its dependencies to the consumer's link; the shared one
# resolves them itself, and finds the CUDA runtime where the build found it.
target_link_libraries(switchyard_static_library INTERFACE ${switchyard_link_deps})
target_link_libraries(switchyard_shared_library PRIVATE ${switchyard_link_deps})
set_target_properties(switchyard_shared_library PROPERTIES
  EXPORT_NAME switchyard
  VERSION ${PROJECT_VERSION}
  # Before 1.0 a minor release may change the ABI (version.h).
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  INSTALL_RPATH "$<$<BOOL:${SWITCHYARD_WITH_CUDA}>:${CUDAToolkit_LIBRARY_DIR}>")

install(DIRECTORY include/switchyard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
set(switchyard_installed switchyard_static_library switchyard_shared_library)
install(TARGETS ${switchyard_installed} EXPORT switchyardTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET switchyard)  # the tool
  install(TARGETS switchyard RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/switchyard)
install(EXPORT switchyardTargets NAMESPACE switchyard:: DESTINATION ${package_dir})
configure_package_config_file(cmake/install/switchyardConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/switchyardConfig.cmake
                              INSTALL_DESTINATION ${package_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/switchyardConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/switchyardConfig.cmake
              ${PROJECT_BINARY_DIR}/switchyardConfigVersion.cmake
        DESTINATION ${package_dir})

file(RELATIVE_PATH switchyard_pc_to_prefix /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(cmake/install/switchyard.pc.in ${PROJECT_BINARY_DIR}/switchyard.pc @ONLY)
configure_file(cmake/install/switchyard-static.pc.in ${PROJECT_BINARY_DIR}/switchyard-static.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/switchyard.pc ${PROJECT_BINARY_DIR}/switchyard-static.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
