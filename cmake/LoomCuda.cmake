# The CUDA path of loom: reduction kernels (kernels/cuda/*.cu) and the CUDA device seam
# (src/device/cuda_device.cpp). Included from the top-level CMakeLists.txt before the library's
# targets (cmake/LoomLayers.cmake), so that each is created with CMAKE_CUDA_ARCHITECTURES set
# (the Makefile generator refuses a target that carries CUDA objects without it). It detects
# the toolkit, builds the kernels' object library (part of the kernels layer) and finds NVML's
# header; LoomLayers.cmake gives the CUDA runtime and LOOM_HAVE_CUDA/LOOM_HAVE_NVML to the
# layers that use them.
#
#   LOOM_CUDA=AUTO|ON|OFF   AUTO (default) builds the CUDA path when nvcc and the CUDA toolkit
#                           are found; ON fails the configuration when they are not.
#   LOOM_CUDA_ARCHS="80;90" SM architectures of the fat binary: SASS for each, plus PTX of the
#                           last one (so newer GPUs can JIT it).
#
# Without CUDA (LOOM_CUDA=OFF, or AUTO on a machine without nvcc) the library builds and works
# unchanged; device buffers are then only reachable through the host simulation of the device
# seam, which programs linking the testing library get (LOOM_DEVICE=host-sim,
# cmake/LoomTesting.cmake).
set(LOOM_CUDA "AUTO" CACHE STRING "Build the CUDA path: AUTO (when nvcc is found), ON, OFF")
set_property(CACHE LOOM_CUDA PROPERTY STRINGS AUTO ON OFF)
set(LOOM_CUDA_ARCHS "80;90" CACHE STRING "CUDA SM architectures of the fat binary")
set(LOOM_HAVE_CUDA OFF)

if(NOT LOOM_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "LOOM_CUDA='${LOOM_CUDA}' is not one of AUTO, ON, OFF")
endif()

if(NOT LOOM_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # SASS for every listed architecture, PTX for the last one as well.
    set(_loom_archs "")
    list(LENGTH LOOM_CUDA_ARCHS _loom_narchs)
    math(EXPR _loom_last "${_loom_narchs} - 1")
    foreach(_i RANGE ${_loom_last})
      list(GET LOOM_CUDA_ARCHS ${_i} _arch)
      if(_i EQUAL _loom_last)
        list(APPEND _loom_archs "${_arch}")
      else()
        list(APPEND _loom_archs "${_arch}-real")
      endif()
    endforeach()
    set(CMAKE_CUDA_ARCHITECTURES "${_loom_archs}")
    enable_language(CUDA)
    find_package(CUDAToolkit)
    # CMake 3.25 predates nvcc's C++20 support: tell it the flag (nvcc >= 12 accepts it).
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND
       CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
      set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(LOOM_HAVE_CUDA ON)
  elseif(LOOM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LOOM_CUDA=ON but no CUDA compiler/toolkit was found (set CUDACXX or "
                        "put nvcc on PATH, or configure with -DLOOM_CUDA=OFF)")
  endif()
endif()

# Recorded for tools and tests (tests/process/cuda_fatbin.sh reads it from CMakeCache.txt).
set(LOOM_CUDA_BUILT ${LOOM_HAVE_CUDA} CACHE INTERNAL "Whether this build contains the CUDA path")

if(LOOM_HAVE_CUDA)
  message(STATUS "loom: CUDA path ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
  # Only the kernel translation units go through nvcc; everything else is plain C++ against the
  # CUDA runtime headers, so the CUDA path adds one nvcc compile per .cu file and architecture.
  file(GLOB LOOM_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/cuda/*.cu)
  add_library(loom_cuda_kernels OBJECT ${LOOM_CUDA_SOURCES})
  set_target_properties(loom_cuda_kernels PROPERTIES
    CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
    CUDA_RUNTIME_LIBRARY Static POSITION_INDEPENDENT_CODE ON)
  target_include_directories(loom_cuda_kernels PRIVATE ${PROJECT_SOURCE_DIR}/include
                             ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
  target_compile_options(loom_cuda_kernels PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra>)
  if(LOOM_WERROR)
    # Device code: every nvcc/ptxas/host-compiler warning is an error.
    target_compile_options(loom_cuda_kernels PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
  endif()
  # Every program linking libloom carries the kernels' fat binary: compressed for size (nvcc
  # 12.8+; a driver that runs this CUDA runtime decompresses it), 12x smaller than the default.
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
    target_compile_options(loom_cuda_kernels PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--compress-mode=size>)
  endif()
  # The kernels belong to the kernels layer (cmake/LoomLayers.cmake), so libloom holds them
  # (`cuobjdump libloom.a` lists every arch).
  # Consumers of the installed package (cmake/LoomPackage.cmake) need the CUDA runtime too.
  list(APPEND LOOM_PACKAGE_FIND_DEPS "CUDAToolkit")
  list(APPEND LOOM_PACKAGE_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR}" "-lcudart_static" "-ldl" "-lrt")
  # NVML's header tells NVLink from PCIe (src/device/nvml_reader.cpp); the library itself is
  # loaded at run time. Debian has no NVML header: the toolkit's, or PyPI's nvidia-nvml-dev-cu12
  # (scripts/install-deps.sh installs it).
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(_loom_purelib "")
  if(Python3_Interpreter_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c
                            "import sysconfig; print(sysconfig.get_paths()['purelib'])"
                    OUTPUT_VARIABLE _loom_purelib OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  find_path(LOOM_NVML_INCLUDE_DIR nvml.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_loom_purelib}/nvidia/nvml_dev/include)
  if(LOOM_NVML_INCLUDE_DIR)
    message(STATUS "loom: NVML header ${LOOM_NVML_INCLUDE_DIR}/nvml.h (NVLink detection on)")
    set(LOOM_NVML_BUILT ON CACHE INTERNAL "Whether this build reads NVLinks through NVML")
  else()
    message(STATUS "loom: no nvml.h found; NVLinks show as unknown "
                   "(pip install nvidia-nvml-dev-cu12 and reconfigure)")
    set(LOOM_NVML_BUILT OFF CACHE INTERNAL "Whether this build reads NVLinks through NVML")
  endif()
else()
  message(STATUS "loom: CUDA path OFF (LOOM_CUDA=${LOOM_CUDA}); device buffers only through the "
                 "testing library's LOOM_DEVICE=host-sim")
endif()
