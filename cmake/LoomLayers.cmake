# The library's layers (docs/architecture.md), one OBJECT library each, bottom up in the order of
# scripts/check_layers.py's LAYERS. A layer links only the layers below it that it uses, and its
# own external dependencies. `loom` (libloom.a) and `loom_shared` (libloom.so) are the union of
# the layers' objects; the layers themselves are never installed.
#
# The rule is enforced at link time: loom_layer_check (built by default with LOOM_BUILD_TESTS,
# and by ctest's process.layer_link) links, for each layer, a shared library from its objects
# and those of the layers it declares below it (transitively), with --no-undefined. A call from
# a layer into one above it (or into one it does not declare) fails that link, naming the symbol.
#
# Included from the top-level CMakeLists.txt after LoomCuda.cmake (so that every target here is
# created with CMAKE_CUDA_ARCHITECTURES set) and before LoomTesting.cmake and LoomPackage.cmake.

# What every layer is compiled with: LOOM_OPT_FLAGS (-O3 unless set), the warnings, PIC from
# CMAKE_POSITION_INDEPENDENT_CODE and the library's include path.
add_library(loom_layer_flags INTERFACE)
target_include_directories(loom_layer_flags INTERFACE ${PROJECT_SOURCE_DIR}/include
                           ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
separate_arguments(_loom_opt_flags UNIX_COMMAND "${LOOM_OPT_FLAGS}")
target_compile_options(loom_layer_flags INTERFACE ${_loom_opt_flags})
target_link_libraries(loom_layer_flags INTERFACE loom_warnings)

set_property(GLOBAL PROPERTY LOOM_LAYERS "")
set_property(GLOBAL PROPERTY LOOM_LAYER_SOURCES "")

# loom_layer(NAME
#            [DIRS dir...]       folders (from the repository root) whose *.cpp, recursively, are
#                                the layer's sources
#            [FILES glob...]     further sources, as non-recursive globs
#            [EXCLUDE regex]     sources to leave out (they belong to another target)
#            [USES layer...]     the layers below it that its code includes or calls (each
#                                declared before it)
#            [PUBLIC lib...]     external dependencies its headers need (propagate upwards)
#            [PRIVATE lib...]    external dependencies of its sources only (linked, not compiled
#                                against, by the layers above)
#            [DEFINES def...]    public compile definitions
#            [OBJECTS target...] further object libraries that are part of the layer (the CUDA
#                                kernels)
# Defines loom_NAME: an OBJECT library, or an INTERFACE one while the layer is headers only.
function(loom_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 L "" "EXCLUDE"
                        "DIRS;FILES;USES;PUBLIC;PRIVATE;DEFINES;OBJECTS")
  set(globs "")
  foreach(dir IN LISTS L_DIRS)
    file(GLOB_RECURSE found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.cpp)
    list(APPEND globs ${found})
  endforeach()
  foreach(pattern IN LISTS L_FILES)
    file(GLOB found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${pattern})
    list(APPEND globs ${found})
  endforeach()
  if(L_EXCLUDE)
    list(FILTER globs EXCLUDE REGEX "${L_EXCLUDE}")
  endif()
  get_property(layers GLOBAL PROPERTY LOOM_LAYERS)
  set(closure "")
  foreach(dep IN LISTS L_USES)
    if(NOT dep IN_LIST layers)
      message(FATAL_ERROR "layer ${name} uses '${dep}', which is not a layer declared below it "
                          "(cmake/LoomLayers.cmake declares them bottom up)")
    endif()
    get_property(dep_closure GLOBAL PROPERTY LOOM_LAYER_CLOSURE_${dep})
    list(APPEND closure ${dep} ${dep_closure})
  endforeach()
  list(REMOVE_DUPLICATES closure)

  set(target loom_${name})
  list(TRANSFORM L_USES PREPEND loom_ OUTPUT_VARIABLE uses)
  if(globs)
    add_library(${target} OBJECT ${globs})
    target_link_libraries(${target} PUBLIC ${uses} ${L_PUBLIC}
                          PRIVATE loom_layer_flags ${L_PRIVATE})
    target_compile_definitions(${target} PUBLIC ${L_DEFINES})
    set(objects ${target} ${L_OBJECTS})
  else()  # headers only, for now: its usage requirements, nothing to link
    add_library(${target} INTERFACE)
    target_link_libraries(${target} INTERFACE ${uses} ${L_PUBLIC} ${L_PRIVATE})
    target_compile_definitions(${target} INTERFACE ${L_DEFINES})
    set(objects ${L_OBJECTS})
  endif()

  set_property(GLOBAL APPEND PROPERTY LOOM_LAYERS ${name})
  set_property(GLOBAL APPEND PROPERTY LOOM_LAYER_SOURCES ${globs})
  set_property(GLOBAL PROPERTY LOOM_LAYER_CLOSURE_${name} ${closure})
  set_property(GLOBAL PROPERTY LOOM_LAYER_OBJECTS_${name} ${objects})
  set_property(GLOBAL PROPERTY LOOM_LAYER_TARGETS_${name} ${target} ${L_OBJECTS})
endfunction()

# The targets of layer NAME and of every layer it declares below it.
function(loom_layer_targets name out)
  get_property(closure GLOBAL PROPERTY LOOM_LAYER_CLOSURE_${name})
  set(targets "")
  foreach(layer IN ITEMS ${name} ${closure})
    get_property(own GLOBAL PROPERTY LOOM_LAYER_TARGETS_${layer})
    list(APPEND targets ${own})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# loom_layer_link_check(TARGET LAYER [EXCLUDE_FROM_ALL] [SOURCES src...]): a shared library of
# LAYER's objects, those of the layers below it that it declares, and SOURCES (a planted call,
# in tests), linked with --no-undefined: every symbol must be defined in them or in their
# external libraries.
function(loom_layer_link_check target layer)
  cmake_parse_arguments(PARSE_ARGV 2 C "EXCLUDE_FROM_ALL" "" "SOURCES")
  loom_layer_targets(${layer} targets)
  set(all "")
  if(C_EXCLUDE_FROM_ALL)
    set(all EXCLUDE_FROM_ALL)
  endif()
  add_library(${target} SHARED ${all} ${C_SOURCES})
  # Linking the object libraries directly puts their objects in the link, and their external
  # libraries (PUBLIC and PRIVATE) on the link line.
  target_link_libraries(${target} PRIVATE ${targets} loom_layer_flags)
  target_link_options(${target} PRIVATE LINKER:--no-undefined)
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX
                        LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/layer-check)
endfunction()

# --- the layers, bottom up ----------------------------------------------------------------------
set(_loom_cuda_kernels "")
set(_loom_cuda_link "")
set(_loom_cuda_device "")
set(_loom_cuda_defines "")
if(LOOM_HAVE_CUDA)
  set(_loom_cuda_kernels loom_cuda_kernels)
  set(_loom_cuda_link $<LINK_ONLY:CUDA::cudart_static>)
  set(_loom_cuda_device CUDA::cudart_static)
  set(_loom_cuda_defines LOOM_HAVE_CUDA=1)
endif()
set(_loom_nvml "")
if(LOOM_HAVE_CUDA AND LOOM_NVML_INCLUDE_DIR)
  set(_loom_nvml ${CMAKE_DL_LIBS})
endif()

loom_layer(common DIRS src/common PUBLIC Threads::Threads fmt::fmt PRIVATE OpenSSL::Crypto)
loom_layer(config DIRS src/config USES common)
# Each transport declares its settings in its own folder (transports/NAME/NAME_settings.inc, data
# only: rows of the one registry); settings.cpp includes this generated list of them, so adding a
# transport's settings is adding its file.
file(GLOB _loom_settings_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/transports/*/*_settings.inc)
list(SORT _loom_settings_files)
set(_loom_settings_text "// Generated by cmake/LoomLayers.cmake: every transport's settings rows.\n")
foreach(_file IN LISTS _loom_settings_files)
  string(APPEND _loom_settings_text "#include \"${_file}\"\n")
endforeach()
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/generated/loom_transport_settings.inc
     CONTENT "${_loom_settings_text}")
target_include_directories(loom_config PRIVATE ${PROJECT_BINARY_DIR}/generated)
loom_layer(log DIRS src/log USES common config PUBLIC spdlog::spdlog)
loom_layer(vocabulary DIRS src/collective USES common)
loom_layer(bootstrap DIRS src/bootstrap USES common log)
loom_layer(topology DIRS src/topology USES common config log
           PRIVATE PkgConfig::HWLOC nlohmann_json::nlohmann_json)
# kernels/cuda (nvcc, cmake/LoomCuda.cmake) is part of this layer.
loom_layer(kernels DIRS kernels/host OBJECTS ${_loom_cuda_kernels} PRIVATE ${_loom_cuda_link})
loom_layer(algorithms DIRS src/algorithms USES vocabulary)
loom_layer(device_api DIRS src/device_api USES common vocabulary bootstrap
           DEFINES ${_loom_cuda_defines})
# The transports: their interface (transports/*.hpp: Transport, Connection; headers only), one
# target per transport, then the registry (transports/*.cpp), which registers them all.
loom_layer(transport_interface USES common vocabulary)
loom_layer(transport_shm DIRS transports/shm
           USES common config log vocabulary bootstrap kernels transport_interface)
loom_layer(transport_tcp DIRS transports/tcp USES common config log transport_interface)
# Several rails (NICs) under one Connection, for the transports that stripe over endpoints.
loom_layer(transport_striped DIRS transports/striped USES common transport_interface)
loom_layer(transport_ofi DIRS transports/ofi
           USES common config log bootstrap transport_interface transport_striped
           PRIVATE ${CMAKE_DL_LIBS})
target_include_directories(loom_transport_ofi SYSTEM PRIVATE ${LIBFABRIC_INCLUDE_DIRS})
loom_layer(transport_cuda_ipc DIRS transports/cuda_ipc
           USES common log vocabulary bootstrap device_api transport_interface transport_shm)
loom_layer(transports FILES transports/*.cpp
           USES common config bootstrap transport_interface transport_shm transport_tcp
                transport_striped transport_ofi transport_cuda_ipc)
loom_layer(selector DIRS src/selector USES common config vocabulary algorithms)
loom_layer(executor DIRS src/executor
           USES common log vocabulary kernels algorithms transport_interface)
# host_sim_* is the testing library's (cmake/LoomTesting.cmake).
loom_layer(device DIRS src/device EXCLUDE "/src/device/host_sim_[^/]*\\.cpp$"
           USES common log vocabulary kernels algorithms device_api transport_interface
                transports executor
           PRIVATE ${_loom_cuda_device} ${_loom_nvml})
if(_loom_nvml)
  target_include_directories(loom_device SYSTEM PRIVATE ${LOOM_NVML_INCLUDE_DIR})
  target_compile_definitions(loom_device PRIVATE LOOM_HAVE_NVML=1)
endif()
loom_layer(launch DIRS src/launch USES common config log)
loom_layer(core DIRS src/core
           USES common config log vocabulary bootstrap topology kernels algorithms device_api
                transport_interface transports selector executor device launch
           PRIVATE nlohmann_json::nlohmann_json)

# Every library source belongs to one layer (a new folder needs its line above, and its place in
# scripts/check_layers.py).
file(GLOB_RECURSE _loom_all_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cpp
     ${PROJECT_SOURCE_DIR}/kernels/host/*.cpp ${PROJECT_SOURCE_DIR}/transports/*.cpp)
list(FILTER _loom_all_sources EXCLUDE REGEX "/src/device/host_sim_[^/]*\\.cpp$")
get_property(_loom_layer_sources GLOBAL PROPERTY LOOM_LAYER_SOURCES)
list(REMOVE_ITEM _loom_all_sources ${_loom_layer_sources})
if(_loom_all_sources)
  message(FATAL_ERROR "loom: these sources are in no layer of cmake/LoomLayers.cmake (give their "
                      "folder a layer there and in scripts/check_layers.py): ${_loom_all_sources}")
endif()

# --- the library: every layer's objects -------------------------------------------------------
get_property(_loom_layers GLOBAL PROPERTY LOOM_LAYERS)
set(LOOM_LIBRARY_OBJECTS "")
foreach(_layer IN LISTS _loom_layers)
  get_property(_objects GLOBAL PROPERTY LOOM_LAYER_OBJECTS_${_layer})
  foreach(_object IN LISTS _objects)
    list(APPEND LOOM_LIBRARY_OBJECTS $<TARGET_OBJECTS:${_object}>)
  endforeach()
endforeach()

add_library(loom STATIC ${LOOM_LIBRARY_OBJECTS})
set_target_properties(loom PROPERTIES LINKER_LANGUAGE CXX)
# In this tree (and in a project that adds it with add_subdirectory) loom::loom is the static
# library; the installed package's loom::loom is the shared one (cmake/LoomPackage.cmake).
add_library(loom::loom ALIAS loom)
add_library(loom::loom_static ALIAS loom)
target_include_directories(loom PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                       $<INSTALL_INTERFACE:include>)
# The layers' external dependencies, for programs linking the library.
target_link_libraries(loom PUBLIC Threads::Threads PRIVATE spdlog::spdlog fmt::fmt
                      PkgConfig::HWLOC nlohmann_json::nlohmann_json OpenSSL::Crypto
                      ${CMAKE_DL_LIBS})
if(LOOM_HAVE_CUDA)
  target_link_libraries(loom PUBLIC CUDA::cudart_static)
endif()

# Internal headers for tests, tools and benchmarks built in this tree.
add_library(loom_internal INTERFACE)
target_include_directories(loom_internal INTERFACE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
target_link_libraries(loom_internal INTERFACE loom spdlog::spdlog fmt::fmt loom_warnings)
if(LOOM_HAVE_CUDA)
  target_compile_definitions(loom_internal INTERFACE LOOM_HAVE_CUDA=1)
endif()

# --- the link check -----------------------------------------------------------------------------
set(_loom_all "")
if(LOOM_BUILD_TESTS)
  set(_loom_all ALL)
endif()
add_custom_target(loom_layer_check ${_loom_all})
foreach(_layer IN LISTS _loom_layers)
  get_property(_objects GLOBAL PROPERTY LOOM_LAYER_OBJECTS_${_layer})
  if(_objects)
    loom_layer_link_check(loom_layer_check_${_layer} ${_layer} EXCLUDE_FROM_ALL)
    add_dependencies(loom_layer_check loom_layer_check_${_layer})
  endif()
endforeach()
