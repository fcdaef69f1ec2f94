// NVLink detection: the pure classification, and the NVML reader (dlopen) against a fake
// libnvidia-ml (tests/fakes/fake_nvml.cpp) when this build has NVML's header.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "device/nvlink.hpp"

using loom::device::canonical_bus_id;
using loom::device::classify_link;
using loom::device::NvLink;

TEST_CASE("nvlink: PCI addresses in NVML's and CUDA's forms compare equal", "[device][nvlink]") {
  CHECK(canonical_bus_id("00000000:3B:00.0") == "0000:3b:00.0");
  CHECK(canonical_bus_id("0000:3b:00.0") == "0000:3b:00.0");
  CHECK(canonical_bus_id("0001:c1:1f.7") == "0001:c1:1f.7");
  CHECK(canonical_bus_id("").empty());
  CHECK(canonical_bus_id("3b:00.0").empty());        // no domain
  CHECK(canonical_bus_id("0000:3b:00.0x").empty());  // trailing text
  CHECK(canonical_bus_id("0000:100:00.0").empty());  // bus > 0xff
  CHECK(canonical_bus_id("0000:3b:20.0").empty());   // device > 0x1f
  CHECK(canonical_bus_id("0000:3b:00.8").empty());   // function > 7
}

TEST_CASE("nvlink: links are counted per peer, NVSwitch fabrics and PCIe told apart",
          "[device][nvlink]") {
  const NvLink to_b{true, "0000:11:00.0", false};
  const NvLink down{false, "", false};
  const NvLink to_switch{true, "0000:80:00.0", true};
  const std::vector<NvLink> a = {to_b, to_b, down, to_b};
  const std::vector<NvLink> b = {{true, "0000:10:00.0", false}};
  CHECK(classify_link(a, "00000000:11:00.0", b) == "nvlink x3");
  CHECK(classify_link(a, "0000:12:00.0", {}) == "pcie");
  CHECK(classify_link({to_switch}, "0000:13:00.0", {to_switch}) == "nvlink (nvswitch)");
  CHECK(classify_link({to_switch}, "0000:13:00.0", {}) == "pcie");  // peer not on the fabric
  CHECK(classify_link({down}, "0000:11:00.0", {down}) == "pcie");   // nothing active
  CHECK(classify_link({to_b}, "garbage", {}) == "pcie");
}

TEST_CASE("nvlink: the NVML reader fails clearly without NVML", "[device][nvlink]") {
  auto r = loom::device::nvml_links("libloom-no-such-nvml.so.1", "0000:10:00.0");
  REQUIRE_FALSE(r.is_ok());
#if defined(LOOM_HAVE_NVML)
  CHECK_THAT(r.status().message(),
             Catch::Contains("cannot load NVML") && Catch::Contains("libloom-no-such-nvml.so.1"));
#else
  CHECK_THAT(r.status().message(), Catch::Contains("no NVML support"));
#endif
}

#if defined(LOOM_FAKE_NVML)
TEST_CASE("nvlink: the NVML reader reads a driver's NVLink table (fake libnvidia-ml)",
          "[device][nvlink]") {
  // A bundle run elsewhere (scripts/gpu-bundle.sh) says where its copy of the library is.
  const char* env = std::getenv("LOOM_TEST_FAKE_NVML");
  const std::string lib = env && *env ? env : LOOM_FAKE_NVML;
  auto links = [&](const char* bus) {
    auto r = loom::device::nvml_links(lib, bus);
    INFO(bus << ": " << (r.is_ok() ? "" : r.status().message()));
    REQUIRE(r.is_ok());
    return *r;
  };
  const std::vector<NvLink> g10 = links("0000:10:00.0");
  REQUIRE(g10.size() == 18);  // NVML_NVLINK_MAX_LINKS; past the GPU's links: inactive
  CHECK(g10[0].active);
  CHECK(g10[0].remote_bus_id == "0000:11:00.0");
  CHECK_FALSE(g10[4].active);
  CHECK_FALSE(g10[17].active);
  const auto g11 = links("0000:11:00.0");
  const auto g12 = links("0000:12:00.0");
  const auto g13 = links("0000:13:00.0");
  CHECK(g12[0].remote_is_switch);
  CHECK(classify_link(g10, "0000:11:00.0", g11) == "nvlink x4");
  CHECK(classify_link(g12, "0000:13:00.0", g13) == "nvlink (nvswitch)");
  CHECK(classify_link(g10, "0000:12:00.0", g12) == "pcie");
  auto missing = loom::device::nvml_links(lib, "0000:42:00.0");
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(),
             Catch::Contains("NVML knows no GPU at 0000:42:00.0") && Catch::Contains("Not Found"));
}
#endif
