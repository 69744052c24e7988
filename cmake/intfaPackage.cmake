# Install rules, the exported CMake package and the pkg-config file. A host application uses
#   find_package(intfa CONFIG REQUIRED)  # with CMAKE_PREFIX_PATH=<prefix>, or -Dintfa_DIR=<build>
#   target_link_libraries(app PRIVATE intfa::intfa)  # or intfa::intfa_static
# from an install prefix (cmake --install build --prefix P) or from the build tree itself; or
# pkg-config --cflags --libs intfa. Nothing installed refers to the source tree: the kernel
# templates are embedded in the libraries.
include(CMakePackageConfigHelpers)

set(INTFA_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/intfa)
set(intfa_exported_targets intfa intfa_shared)
if(TARGET intfa_cli)
  set_target_properties(intfa_cli PROPERTIES EXPORT_NAME cli)
  # The installed tool finds the toolkit's NVRTC it was linked against; not in the toolkit-free
  # wheel (INTFA_PYTHON_NVRTC=pypi: python/CMakeLists.txt), whose tool must take PyPI's.
  if(NOT INTFA_PYTHON_NVRTC STREQUAL "pypi")
    set_target_properties(intfa_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  endif()
  list(APPEND intfa_exported_targets intfa_cli)
endif()
install(TARGETS ${intfa_exported_targets} EXPORT intfaTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT intfa
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT intfa
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT intfa
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/intfa ${INTFA_PUBLIC_GENERATED_DIR}/intfa
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT intfa)

# The package in the install prefix...
install(EXPORT intfaTargets NAMESPACE intfa:: DESTINATION ${INTFA_CMAKE_INSTALL_DIR}
        COMPONENT intfa)
configure_package_config_file(cmake/intfaConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/intfaConfig.cmake
                              INSTALL_DESTINATION ${INTFA_CMAKE_INSTALL_DIR})
# 0.x: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/intfaConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/intfaConfig.cmake
              ${PROJECT_BINARY_DIR}/package/intfaConfigVersion.cmake
              cmake/intfaCudaToolkit.cmake
        DESTINATION ${INTFA_CMAKE_INSTALL_DIR} COMPONENT intfa)

# ... and in the build tree (-Dintfa_DIR=<build>), whose targets point at the build's files.
export(EXPORT intfaTargets NAMESPACE intfa:: FILE ${PROJECT_BINARY_DIR}/intfaTargets.cmake)
configure_package_config_file(cmake/intfaConfig.cmake.in ${PROJECT_BINARY_DIR}/intfaConfig.cmake
                              INSTALL_DESTINATION ${PROJECT_BINARY_DIR}
                              INSTALL_PREFIX ${PROJECT_BINARY_DIR})
configure_file(${PROJECT_BINARY_DIR}/package/intfaConfigVersion.cmake
               ${PROJECT_BINARY_DIR}/intfaConfigVersion.cmake COPYONLY)
configure_file(cmake/intfaCudaToolkit.cmake ${PROJECT_BINARY_DIR}/intfaCudaToolkit.cmake COPYONLY)

# pkg-config: relative to the .pc file, so that the prefix can move.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "intfa's pkg-config file needs a relative CMAKE_INSTALL_LIBDIR "
                      "(given ${CMAKE_INSTALL_LIBDIR})")
endif()
file(RELATIVE_PATH INTFA_PC_PREFIX_FROM_PCFILEDIR /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(INTFA_PC_CUDA_INCLUDE_DIR ${intfa_cuda_include_dir})
configure_file(cmake/intfa.pc.in ${PROJECT_BINARY_DIR}/package/intfa.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/intfa.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT intfa)
