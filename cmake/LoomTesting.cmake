# loom_testing: code that loom's tests, tools and benchmarks use and the library does not ship.
# Included from the top-level CMakeLists.txt after `loom` and `loom_internal` exist.
#
# Today it holds the host-simulated device (src/device/host_sim_*, docs/gpu.md): device memory
# in host memory, streams as threads, the CUDA kernels' logic on the CPU. A program that links
# loom_testing can run device collectives with LOOM_DEVICE=host-sim; libloom.a and libloom.so
# do not contain it, and a program linking only them is told "host-sim is a test device: link
# loom_testing". Linked by loom-tests, loom-info, loom-perf, loom-kernel-bench and
# loom-stream-check; never installed.
set(LOOM_TESTING_SOURCES
    ${PROJECT_SOURCE_DIR}/src/device/host_sim_device.cpp
    ${PROJECT_SOURCE_DIR}/src/device/host_sim_kernels.cpp)
add_library(loom_testing STATIC ${LOOM_TESTING_SOURCES})
target_link_libraries(loom_testing PUBLIC loom_internal)
target_compile_options(loom_testing PRIVATE ${_loom_opt_flags})
# host-sim enters the device-runtime registry (src/device/device.hpp) from a static object in
# host_sim_device.cpp. Programs such as loom-info reach host-sim only through LOOM_DEVICE, never
# by a call, so a static link would drop that object: naming its registration function as
# undefined makes the linker keep it in every program that links loom_testing.
target_link_options(loom_testing INTERFACE "LINKER:--undefined=loom_testing_register_host_sim")
