#!/usr/bin/env bash
# The CUDA build is a fat binary: `cuobjdump` of libloom.a lists SASS for every architecture of
# LOOM_CUDA_ARCHS (default 80;90, so sm_80 and sm_90) and PTX for the last one.
# Usage: bash cuda_fatbin.sh BIN_DIR. Skips (exit 77) when the build has no CUDA path or no
# cuobjdump is available (pip install nvidia-cuda-cuobjdump provides one).
set -u
BIN_DIR=${1:?usage: cuda_fatbin.sh BIN_DIR}
BUILD_DIR=$(cd "$BIN_DIR/.." && pwd)
CACHE=$BUILD_DIR/CMakeCache.txt
LIB=$BUILD_DIR/lib/libloom.a

if ! grep -q '^LOOM_CUDA_BUILT:INTERNAL=ON$' "$CACHE" 2>/dev/null; then
  echo "SKIP: this build has no CUDA path (LOOM_CUDA=OFF or no nvcc)"
  exit 77
fi

find_cuobjdump() {
  command -v cuobjdump && return 0
  for c in /usr/local/cuda/bin/cuobjdump; do [[ -x $c ]] && { echo "$c"; return 0; }; done
  local sites
  sites=$(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null) || return 1
  for s in $sites; do
    for c in "$s"/nvidia/cu*/bin/cuobjdump "$s"/nvidia/cuda_cuobjdump/bin/cuobjdump; do
      [[ -f $c ]] && { chmod +x "$c" 2>/dev/null; echo "$c"; return 0; }
    done
  done
  return 1
}
CUOBJDUMP=$(find_cuobjdump) || { echo "SKIP: no cuobjdump (pip install nvidia-cuda-cuobjdump)"; exit 77; }

[[ -f $LIB ]] || { echo "FAIL: $LIB is missing" >&2; exit 1; }
archs=$(sed -n 's/^LOOM_CUDA_ARCHS:[A-Z]*=//p' "$CACHE")
archs=${archs:-80;90}
elf=$("$CUOBJDUMP" --list-elf "$LIB" 2>&1) || { echo "FAIL: cuobjdump --list-elf failed: $elf" >&2; exit 1; }
ptx=$("$CUOBJDUMP" --list-ptx "$LIB" 2>&1) || { echo "FAIL: cuobjdump --list-ptx failed: $ptx" >&2; exit 1; }
failures=0
last=""
IFS=';' read -ra list <<<"$archs"
for a in "${list[@]}"; do
  last=$a
  if grep -q "sm_${a}\.cubin" <<<"$elf"; then
    echo "ok: sm_${a} SASS in libloom.a"
  else
    echo "FAIL: no sm_${a} SASS in libloom.a; cuobjdump --list-elf says:" >&2
    echo "$elf" >&2
    failures=$((failures + 1))
  fi
done
if grep -q "sm_${last}\.ptx" <<<"$ptx"; then
  echo "ok: compute_${last} PTX in libloom.a"
else
  echo "FAIL: no PTX for ${last} in libloom.a; cuobjdump --list-ptx says:" >&2
  echo "$ptx" >&2
  failures=$((failures + 1))
fi
exit $((failures > 0))
