# Finds the xxHash header (Debian: libxxhash-dev). intfa uses xxHash header-only (XXH_INLINE_ALL),
# so a deployed binary does not depend on libxxhash.so. XXHASH_INCLUDE_DIR may point at a copy.
find_path(XXHASH_INCLUDE_DIR NAMES xxhash.h HINTS ENV XXHASH_ROOT PATH_SUFFIXES include)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(XXHash REQUIRED_VARS XXHASH_INCLUDE_DIR)
if(XXHash_FOUND AND NOT TARGET XXHash::xxhash)
  add_library(XXHash::xxhash INTERFACE IMPORTED)
  set_target_properties(XXHash::xxhash PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${XXHASH_INCLUDE_DIR}"
                                                  INTERFACE_COMPILE_DEFINITIONS XXH_INLINE_ALL)
endif()
mark_as_advanced(XXHASH_INCLUDE_DIR)
