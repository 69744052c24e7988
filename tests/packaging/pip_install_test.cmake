# `pip install .` into a fresh venv (scikit-build-core and pybind11 come from PyPI), then the
# wheel's `intfa` console script: `intfa info` must run, as must `import intfa` in that venv.
# cmake -DSOURCE_DIR=... -DWORK_DIR=... -DPYTHON=... -P
cmake_minimum_required(VERSION 3.25)

function(run)
  list(JOIN ARGN " " shown)
  message(STATUS "$ ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output
                  ERROR_VARIABLE output)
  message("${output}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${shown}")
  endif()
  set(last_output "${output}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(venv ${WORK_DIR}/venv)
run(${PYTHON} -m venv ${venv})
# The wheel's build tree goes next to the venv, not into the source tree (pyproject's build-dir).
set(ENV{PIP_DISABLE_PIP_VERSION_CHECK} 1)
run(${venv}/bin/python -m pip install --quiet --config-settings=build-dir=${WORK_DIR}/build
    ${SOURCE_DIR})
run(${venv}/bin/intfa info)
if(NOT last_output MATCHES "intfa +[0-9]+\\.[0-9]+\\.[0-9]+" OR NOT last_output MATCHES "NVRTC")
  message(FATAL_ERROR "`intfa info` of the wheel did not report intfa's and NVRTC's versions")
endif()
# ... and where NVRTC came from (this build links the toolkit's; the wheel of build_wheel.sh,
# PyPI's: wheel_test.sh).
if(NOT last_output MATCHES "\nNVRTC +[0-9.]+, /[^\n]*libnvrtc[^\n]* \\(CUDA toolkit\\)\n")
  message(FATAL_ERROR "`intfa info` of `pip install .` does not name the toolkit's NVRTC")
endif()
run(${venv}/bin/intfa precompile --help)
# (No ';' in the program: CMake would split the argument there.)
run(${venv}/bin/python -c "import intfa\nprint(intfa.__version__, intfa.cache_info()['nvrtc_version'])")
if(NOT last_output MATCHES "^[0-9.]+ [0-9]+\\.[0-9]+")
  message(FATAL_ERROR "import intfa in the venv did not report its and NVRTC's versions")
endif()
