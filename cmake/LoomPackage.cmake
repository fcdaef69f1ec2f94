# The shared library, and (with LOOM_INSTALL, on by default when loom is the top-level project)
# installation and packaging: `cmake --install build --prefix PREFIX` puts
#   PREFIX/include/loom/*.hpp            public headers
#   PREFIX/lib/libloom.so (+ soname)     shared library   -> loom::loom        (find_package)
#   PREFIX/lib/libloom.a                 static library   -> loom::loom_static (find_package)
#   PREFIX/bin/loomrun, loom-info, loom-perf, loom-trace
#   PREFIX/lib/cmake/loom/               loomConfig.cmake, loomConfigVersion.cmake, targets
#   PREFIX/lib/pkgconfig/loom.pc         pkg-config (--static adds the private dependencies)
#
# The shared library is linked from the static library's objects (compiled once, with -fPIC),
# so the two are the same code. Private dependencies of the static library must be found by
# consumers; they are listed ONCE here:
#
#   * A dependency found with find_package(X) and linked as X::x: append "X" (plus any extra
#     find_package arguments, e.g. "OpenSSL COMPONENTS Crypto") to LOOM_PACKAGE_FIND_DEPS and
#     its pkg-config module name(s) to LOOM_PACKAGE_PC_REQUIRES_PRIVATE. Example for OpenSSL:
#         list(APPEND LOOM_PACKAGE_FIND_DEPS "OpenSSL")
#         list(APPEND LOOM_PACKAGE_PC_REQUIRES_PRIVATE "libssl" "libcrypto")
#   * An optional one (CUDA): the same two lines inside `if(LOOM_WITH_CUDA)`, e.g.
#         list(APPEND LOOM_PACKAGE_FIND_DEPS "CUDAToolkit")
#         list(APPEND LOOM_PACKAGE_PC_LIBS_PRIVATE "-lcudart")
#   * A pkg-config-only dependency linked as PkgConfig::NAME: append "NAME:module" to
#     LOOM_PACKAGE_PKGCONFIG_DEPS (hwloc below is one).
# Other modules may append to these lists before this file is included, or after it as long
# as they do so before the end of the top-level CMakeLists.txt (generation is deferred).

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

list(APPEND LOOM_PACKAGE_FIND_DEPS "Threads" "fmt" "spdlog" "nlohmann_json" "OpenSSL")
list(APPEND LOOM_PACKAGE_PKGCONFIG_DEPS "HWLOC:hwloc")
list(APPEND LOOM_PACKAGE_PC_REQUIRES_PRIVATE "spdlog" "fmt" "libcrypto")
# hwloc as plain -l: `pkg-config --static hwloc` would demand hwloc's own static dependencies
# (libudev, ...), while libloom.a links the shared libhwloc like the CMake target. libfabric is
# not linked at all: loom loads libfabric.so.1 at run time (transports/ofi/fabric_loader.cpp).
list(APPEND LOOM_PACKAGE_PC_LIBS_PRIVATE "-lhwloc" "-ldl" "-pthread")

# The shared library, from the static library's objects (the layers', cmake/LoomLayers.cmake).
add_library(loom_shared SHARED ${LOOM_LIBRARY_OBJECTS})
set_target_properties(loom_shared PROPERTIES OUTPUT_NAME loom EXPORT_NAME loom LINKER_LANGUAGE CXX
                      VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
target_include_directories(loom_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(loom_shared PUBLIC Threads::Threads)
set_target_properties(loom PROPERTIES EXPORT_NAME loom_static)
target_compile_features(loom PUBLIC cxx_std_20)
target_compile_features(loom_shared PUBLIC cxx_std_20)

if(LOOM_INSTALL)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/loom DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.hpp")
  install(TARGETS loom loom_shared EXPORT loomTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT loomTargets NAMESPACE loom:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loom)
endif()

# Tools, when they are part of this build (loom-perf only with LOOM_BUILD_BENCHMARKS). The
# deferred call sees targets defined in subdirectories added after this file.
function(loom_install_tools)
  foreach(tool loomrun loom-info loom-perf loom-train loom-trace)
    if(TARGET ${tool})
      install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
    endif()
  endforeach()
endfunction()

# Config files, generated at the end of configuration so that later modules' dependencies count.
function(loom_write_package_files)
  # The shared library links what the static one links (read at the end, so that dependencies
  # added to `loom` anywhere in the tree count).
  get_target_property(static_libs loom LINK_LIBRARIES)
  target_link_libraries(loom_shared PRIVATE ${static_libs})
  if(NOT LOOM_INSTALL)
    return()
  endif()
  set(deps "")
  foreach(dep IN LISTS LOOM_PACKAGE_FIND_DEPS)
    string(APPEND deps "find_dependency(${dep})\n")
  endforeach()
  foreach(entry IN LISTS LOOM_PACKAGE_PKGCONFIG_DEPS)
    string(REPLACE ":" ";" parts "${entry}")
    list(GET parts 0 prefix)
    list(GET parts 1 module)
    string(APPEND deps "if(NOT TARGET PkgConfig::${prefix})\n"
           "  pkg_check_modules(${prefix} REQUIRED QUIET IMPORTED_TARGET ${module})\nendif()\n")
  endforeach()
  set(LOOM_PACKAGE_DEPENDENCY_LINES "${deps}")
  set(dir ${PROJECT_BINARY_DIR}/package)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/loomConfig.cmake.in
                                ${dir}/loomConfig.cmake
                                INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loom)
  write_basic_package_version_file(${dir}/loomConfigVersion.cmake
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  list(JOIN LOOM_PACKAGE_PC_REQUIRES_PRIVATE " " LOOM_PC_REQUIRES_PRIVATE)
  list(JOIN LOOM_PACKAGE_PC_LIBS_PRIVATE " " LOOM_PC_LIBS_PRIVATE)
  # Relocatable: the prefix is found from the .pc file's own place (install --prefix works).
  file(RELATIVE_PATH LOOM_PC_PREFIX_FROM_PCFILEDIR /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" LOOM_PC_PREFIX_FROM_PCFILEDIR "${LOOM_PC_PREFIX_FROM_PCFILEDIR}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/loom.pc.in ${dir}/loom.pc @ONLY)
  install(FILES ${dir}/loomConfig.cmake ${dir}/loomConfigVersion.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loom)
  install(FILES ${dir}/loom.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  loom_install_tools()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL loom_write_package_files)
