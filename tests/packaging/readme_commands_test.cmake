# README.md's two set-up commands ("Set up"): the first builds only what the demo needs (the
# tool's target, not the whole tree with the test suite: on 2 cores that is minutes, not a
# quarter of an hour) and runs it; the second is exactly the test command .ci/run runs.
#   cmake -DSOURCE_DIR=... [-DBINARY_DIR=... -DNINJA=...] -P readme_commands_test.cmake
# With BINARY_DIR (a Ninja build) the demo's target is also checked to build no test.
cmake_minimum_required(VERSION 3.25)

# The commands of the first ```sh block after "## Set up": its lines that are not comments.
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "\n## Set up\n" section)
if(section LESS 0)
  message(FATAL_ERROR "README.md has no section '## Set up'")
endif()
string(SUBSTRING "${readme}" ${section} -1 readme)
string(FIND "${readme}" "```sh\n" block)
if(block LESS 0)
  message(FATAL_ERROR "README.md's 'Set up' has no ```sh block")
endif()
math(EXPR block "${block} + 6")
string(SUBSTRING "${readme}" ${block} -1 readme)
string(FIND "${readme}" "```\n" block_end)
string(SUBSTRING "${readme}" 0 ${block_end} block)
string(REGEX REPLACE "#[^\n]*" "" block "${block}")  # comments, which may hold ';'
string(REGEX MATCHALL "[^\n]+" commands "${block}")
list(LENGTH commands count)
if(NOT count EQUAL 2)
  message(FATAL_ERROR "README.md's 'Set up' block has ${count} commands, not 2: ${commands}")
endif()
list(GET commands 0 demo_command)
list(GET commands 1 test_command)

# 1: one target, the tool, then the demo; a bare `cmake --build build` builds every test.
set(demo_target intfa_cli)
if(NOT demo_command MATCHES "cmake --build build --target ${demo_target} && build/bin/intfa run$")
  message(FATAL_ERROR "README.md's first command does not build only `--target ${demo_target}` "
                      "before `build/bin/intfa run`: ${demo_command}")
endif()

# 2: the set-up script with --tests, then .ci/run's test command, character for character.
file(STRINGS ${SOURCE_DIR}/.ci/run ci_lines)
set(ci_command)
foreach(line IN LISTS ci_lines)
  if(line MATCHES "^cmake --workflow")
    set(ci_command "${line}")
  endif()
endforeach()
if(NOT ci_command)
  message(FATAL_ERROR ".ci/run has no `cmake --workflow` line")
endif()
if(NOT test_command STREQUAL "scripts/setup_deps.sh --tests && ${ci_command}")
  message(FATAL_ERROR "README.md's second command is not `scripts/setup_deps.sh --tests && "
                      "${ci_command}` (what .ci/run runs): ${test_command}")
endif()

# What the demo's target builds (Ninja's commands for it): the tool and the library, no test.
if(BINARY_DIR AND NINJA AND EXISTS ${BINARY_DIR}/build.ninja)
  execute_process(COMMAND ${NINJA} -C ${BINARY_DIR} -t commands ${demo_target}
                  RESULT_VARIABLE status OUTPUT_VARIABLE build_commands ERROR_VARIABLE error)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "ninja -t commands ${demo_target} failed (${status}): ${error}")
  endif()
  foreach(forbidden intfa_tests libgtest "_intfa[.]" fuzz_)
    if(build_commands MATCHES "${forbidden}")
      message(FATAL_ERROR "building ${demo_target} (README's first command) builds ${forbidden}")
    endif()
  endforeach()
  string(REGEX MATCHALL "\n" build_lines "\n${build_commands}")
  list(LENGTH build_lines build_count)
  message(STATUS "--target ${demo_target}: ${build_count} commands, none of a test")
endif()
message(STATUS "README.md's set-up commands: the demo's target alone, then .ci/run's tests")
