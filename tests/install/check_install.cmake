# ctest's install.downstream: installs this build into a fresh prefix, then
# builds and runs a downstream project against it through find_package (both
# library forms) and through pkg-config, and checks the installed tool runs.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DCXX=... -P check_install.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "failed (${rc}): ${command}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(path include/switchyard/version.h include/switchyard/op.def bin/switchyard)
  if(NOT EXISTS ${prefix}/${path})
    message(FATAL_ERROR "the install tree lacks ${path}")
  endif()
endforeach()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/downstream -B ${WORK_DIR}/build -G Ninja
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
foreach(program downstream_shared downstream_static)
  run(${WORK_DIR}/build/${program})
  if(NOT last_output MATCHES "^switchyard [0-9]+\\.[0-9]+\\.[0-9]+: matmul_f32__cpu_")
    message(FATAL_ERROR "${program} printed: ${last_output}")
  endif()
endforeach()

find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  foreach(package switchyard switchyard-static)
    run(${PKG_CONFIG} --cflags --libs ${package})
    separate_arguments(flags UNIX_COMMAND "${last_output}")
    run(${CXX} ${SOURCE_DIR}/tests/install/downstream/main.cpp ${flags} -o
        ${WORK_DIR}/pc_${package})
    run(${WORK_DIR}/pc_${package})
  endforeach()
else()
  message(STATUS "pkg-config not found: the .pc files are installed but not checked")
endif()
run(${prefix}/bin/switchyard coverage --backend cpu)
