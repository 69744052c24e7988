# README.md's C++ snippet ("Using it from C++") is examples/attend.cpp between its lines
# "// [README: Using it]" and "// [README: end]", verbatim, so that what the README shows is code
# that compiles and runs (the Consumers.* tests build the example). cmake -DSOURCE_DIR=... -P
cmake_minimum_required(VERSION 3.25)

file(READ ${SOURCE_DIR}/examples/attend.cpp example)
string(FIND "${example}" "// [README: Using it]\n" begin)
string(FIND "${example}" "// [README: end]\n" end)
if(begin LESS 0 OR end LESS begin)
  message(FATAL_ERROR "examples/attend.cpp lacks the lines // [README: Using it] ... // [README: end]")
endif()
string(LENGTH "// [README: Using it]\n" marker_length)
math(EXPR begin "${begin} + ${marker_length}")
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${example}" ${begin} ${length} excerpt)

# In the README, the first ```cpp block after the comment that names the example.
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "<!-- examples/attend.cpp" comment)
if(comment LESS 0)
  message(FATAL_ERROR "README.md lacks the comment <!-- examples/attend.cpp ... --> before its C++ snippet")
endif()
string(SUBSTRING "${readme}" ${comment} -1 readme)
string(FIND "${readme}" "```cpp\n" block)
if(block LESS 0)
  message(FATAL_ERROR "README.md has no ```cpp block after <!-- examples/attend.cpp ... -->")
endif()
math(EXPR block "${block} + 7")
string(SUBSTRING "${readme}" ${block} -1 readme)
string(FIND "${readme}" "```\n" block_end)
string(SUBSTRING "${readme}" 0 ${block_end} snippet)

if(NOT snippet STREQUAL excerpt)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/readme-snippet.cpp "${snippet}")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/example-excerpt.cpp "${excerpt}")
  message(FATAL_ERROR "README.md's C++ snippet differs from examples/attend.cpp's excerpt: compare "
                      "${CMAKE_CURRENT_BINARY_DIR}/readme-snippet.cpp and example-excerpt.cpp; "
                      "copy the excerpt into the README")
endif()
string(REGEX MATCHALL "\n" lines "${excerpt}")
list(LENGTH lines count)
message(STATUS "README.md's C++ snippet is examples/attend.cpp's ${count}-line excerpt")
