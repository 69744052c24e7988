# CUDA::nvrtc without the driver library. FindCUDAToolkit makes CUDA::nvrtc drag the driver
# (stubs/libcuda.so) along; a linker that keeps unused libraries (clang's, on Debian) would then
# make every binary need libcuda.so.1 just to start, which is exactly what opening the driver at
# run time avoids. Included by intfa's build after find_package(CUDAToolkit), and by the installed
# intfaConfig.cmake after find_dependency(CUDAToolkit), so that a host application linking
# intfa::intfa_static starts without a driver too.
if(TARGET CUDA::nvrtc)
  get_target_property(_intfa_nvrtc_dependencies CUDA::nvrtc INTERFACE_LINK_LIBRARIES)
  if(_intfa_nvrtc_dependencies)
    list(REMOVE_ITEM _intfa_nvrtc_dependencies CUDA::cuda_driver)
    set_property(TARGET CUDA::nvrtc PROPERTY INTERFACE_LINK_LIBRARIES "${_intfa_nvrtc_dependencies}")
  endif()
  unset(_intfa_nvrtc_dependencies)
endif()
