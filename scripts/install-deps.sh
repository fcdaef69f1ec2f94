#!/usr/bin/env bash
# Installs loom's build and test dependencies from Debian's archive. Idempotent: does nothing
# when everything is already installed.
set -euo pipefail

packages=(
  build-essential ccache cmake ninja-build pkg-config git
  libspdlog-dev libfmt-dev catch2
  libhwloc-dev libfabric-dev libfabric-bin nlohmann-json3-dev
  openmpi-bin libopenmpi-dev libgloo-dev
  procps iproute2 python3
  libssl-dev clang
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
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
