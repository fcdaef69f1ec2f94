#!/usr/bin/env bash
# Installs loom's build and test dependencies from Debian's archive. Idempotent: does nothing
# when everything is already installed.
set -euo pipefail

packages=(
  build-essential ccache cmake ninja-build pkg-config git
  libspdlog-dev libfmt-dev catch2
  libhwloc-dev libfabric-dev libfabric-bin nlohmann-json3-dev
  openmpi-bin libopenmpi-dev libgloo-dev
  procps iproute2 python3 python3-pip
  libssl-dev clang
)

# With the CUDA toolkit present, CI asserts the fat binary with cuobjdump, which the toolkit
# here lacks; PyPI's nvidia-cuda-cuobjdump provides it (best effort: the test skips without it).
install_cuobjdump() {
  command -v nvcc >/dev/null || return 0
  command -v cuobjdump >/dev/null && return 0
  python3 -c 'import nvidia' 2>/dev/null && pip3 show -q nvidia-cuda-cuobjdump >/dev/null 2>&1 && return 0
  command -v pip3 >/dev/null || return 0
  pip3 install -q --break-system-packages nvidia-cuda-cuobjdump >/dev/null 2>&1 ||
    echo "install-deps: could not pip-install nvidia-cuda-cuobjdump (cuobjdump test will skip)" >&2
}
# NVML's header (PyPI's nvidia-nvml-dev-cu12; Debian packages none) lets the CUDA path tell NVLink
# from PCIe; libnvidia-ml itself comes with the GPU driver and is loaded at run time.
install_nvml_header() {
  command -v nvcc >/dev/null || return 0
  command -v pip3 >/dev/null || return 0
  pip3 show -q nvidia-nvml-dev-cu12 >/dev/null 2>&1 && return 0
  pip3 install -q --break-system-packages nvidia-nvml-dev-cu12 >/dev/null 2>&1 ||
    echo "install-deps: could not pip-install nvidia-nvml-dev-cu12 (NVLink shows as unknown)" >&2
}
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  install_cuobjdump
  install_nvml_header
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_cuobjdump
install_nvml_header
