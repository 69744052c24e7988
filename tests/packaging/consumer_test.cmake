# One consumer of intfa, as a host project would be (cmake -P; tests/packaging/CMakeLists.txt):
#   MODE=install           cmake --install the build into PREFIX; no installed file names the
#                          source tree (the templates are embedded) and the package files exist
#   MODE=find_package      examples/ against PREFIX: find_package(intfa CONFIG), the shared and
#                          the static library from C++, the shared one from C; each run
#   MODE=pkg_config        examples/attend.c compiled with `pkg-config --cflags --libs intfa`
#                          alone (no rpath of its own), run without LD_LIBRARY_PATH
#   MODE=build_tree        examples/ against the build tree (-Dintfa_DIR=BINARY_DIR)
#   MODE=add_subdirectory  examples/subproject: intfa built from SOURCE_DIR inside a host project
# Without a GPU each example says so and precompiles its kernels, which is what runs here.
cmake_minimum_required(VERSION 3.25)

function(run)
  cmake_parse_arguments(RUN "" "WORKING_DIRECTORY" "COMMAND" ${ARGN})
  if(NOT RUN_WORKING_DIRECTORY)
    set(RUN_WORKING_DIRECTORY ${BINARY_DIR})
  endif()
  list(JOIN RUN_COMMAND " " shown)
  message(STATUS "$ ${shown}")
  execute_process(COMMAND ${RUN_COMMAND} WORKING_DIRECTORY ${RUN_WORKING_DIRECTORY}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  message("${output}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${shown}")
  endif()
  set(last_output "${output}" PARENT_SCOPE)
endfunction()

# Runs an example and checks that it did its work: attention checked on a GPU, or the kernels
# compiled (or found in the cache) without one.
function(run_example program)
  run(COMMAND ${program})
  if(NOT last_output MATCHES "relative L2 [0-9.]+% \\(within 3%\\)"
     AND NOT last_output MATCHES "compiled the [1-9][0-9]* kernels this run would launch")
    message(FATAL_ERROR "${program} neither checked attention nor precompiled its kernels")
  endif()
endfunction()

# A fresh build of the project in `source` with `arguments`, then `cmake --build`.
function(build_project source build)
  file(REMOVE_RECURSE ${build})
  run(COMMAND ${CMAKE_COMMAND} -S ${source} -B ${build} -G ${GENERATOR}
              -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${C_COMPILER}
              -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${ARGN})
  run(COMMAND ${CMAKE_COMMAND} --build ${build})
endfunction()

set(consumers ${BINARY_DIR}/test-consumers)

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${PREFIX})
  foreach(expected include/intfa/intfa.hpp include/intfa/intfa.h include/intfa/precompile.hpp
                   lib/cmake/intfa/intfaConfig.cmake lib/cmake/intfa/intfaConfigVersion.cmake
                   lib/cmake/intfa/intfaTargets.cmake lib/pkgconfig/intfa.pc bin/intfa)
    if(NOT EXISTS ${PREFIX}/${expected})
      message(FATAL_ERROR "the install has no ${expected}")
    endif()
  endforeach()
  file(GLOB shared_libraries ${PREFIX}/lib/libintfa.so*)
  if(NOT EXISTS ${PREFIX}/lib/libintfa.a OR NOT shared_libraries)
    message(FATAL_ERROR "the install lacks libintfa.a or libintfa.so")
  endif()
  if(EXISTS ${PREFIX}/intfa)
    message(FATAL_ERROR "the Python package (component python) was installed by a plain install")
  endif()
  # Text and binaries alike: the source tree may be moved or deleted after installing.
  file(GLOB_RECURSE installed ${PREFIX}/*)
  string(REGEX REPLACE "([][+.*?()^$|\\])" "\\\\\\1" source_pattern "${SOURCE_DIR}/")
  foreach(file ${installed})
    file(STRINGS ${file} mentions REGEX "${source_pattern}")
    if(mentions)
      list(GET mentions 0 first)
      message(FATAL_ERROR "${file} names the source tree: ${first}")
    endif()
  endforeach()
  list(LENGTH installed count)
  message(STATUS "${count} files installed into ${PREFIX}, none names ${SOURCE_DIR}")
  # The installed tool runs (it finds NVRTC through its RUNPATH).
  run(COMMAND ${PREFIX}/bin/intfa info)

elseif(MODE STREQUAL "find_package")
  build_project(${SOURCE_DIR}/examples ${consumers}/find_package -DCMAKE_PREFIX_PATH=${PREFIX})
  foreach(program attend attend_static attend_c)
    run_example(${consumers}/find_package/${program})
  endforeach()

elseif(MODE STREQUAL "pkg_config")
  find_program(PKG_CONFIG pkg-config REQUIRED)
  set(ENV{PKG_CONFIG_PATH} ${PREFIX}/lib/pkgconfig)
  run(COMMAND ${PKG_CONFIG} --cflags --libs intfa)
  string(STRIP "${last_output}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  file(MAKE_DIRECTORY ${consumers}/pkg_config)
  set(program ${consumers}/pkg_config/attend_c)
  # PREFIX is not a system prefix: the program finds libintfa.so.0.3 there through the rpath that
  # intfa.pc's Libs carries, with no -Wl,-rpath and no LD_LIBRARY_PATH of the user's. (The
  # CUDA runtime is the example's own dependency, not intfa's: its flags are the example's.)
  run(COMMAND ${C_COMPILER} -std=c99 -o ${program} ${SOURCE_DIR}/examples/attend.c ${flags}
              -L${CUDA_LIBRARY_DIR} -Wl,-rpath,${CUDA_LIBRARY_DIR} -lcudart -lm)
  unset(ENV{LD_LIBRARY_PATH})
  run_example(${program})

elseif(MODE STREQUAL "build_tree")
  build_project(${SOURCE_DIR}/examples ${consumers}/build_tree -Dintfa_DIR=${BINARY_DIR})
  run_example(${consumers}/build_tree/attend)

elseif(MODE STREQUAL "add_subdirectory")
  build_project(${SOURCE_DIR}/examples/subproject ${consumers}/add_subdirectory
                -DINTFA_SOURCE_DIR=${SOURCE_DIR})
  run_example(${consumers}/add_subdirectory/attend)

else()
  message(FATAL_ERROR "MODE must be install, find_package, pkg_config, build_tree or "
                      "add_subdirectory (given '${MODE}')")
endif()
