# shellcheck shell=bash
# env.sh of a GPU bundle (scripts/gpu-bundle.sh copies this file there): source it to run the
# bundle's programs. Puts the bundle's bin/ on PATH and its libraries IN FRONT of
# LD_LIBRARY_PATH, keeping what was there (on a GPU machine that is often the driver's folder:
# libcuda and libnvidia-ml are loaded at run time and never bundled). lib/cxx (the build
# machine's libstdc++ and libgcc_s) joins only where this host's glibc is at least the version
# they need (lib/cxx/GLIBC_NEEDED); else the host's own libstdc++ serves.
_loom_b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_loom_need=$(cat "$_loom_b/lib/cxx/GLIBC_NEEDED" 2>/dev/null || echo 0)
_loom_have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
_loom_libs="$_loom_b/lib"
if [ -n "$_loom_have" ] &&
  [ "$(printf '%s\n%s\n' "$_loom_need" "$_loom_have" | sort -V | head -1)" = "$_loom_need" ]; then
  _loom_libs="$_loom_libs:$_loom_b/lib/cxx"
  GPU_BUNDLE_CXX="bundled (glibc $_loom_have >= $_loom_need)"
else
  GPU_BUNDLE_CXX="the host's (glibc ${_loom_have:-unknown} < $_loom_need, which the bundled one needs)"
fi
export LD_LIBRARY_PATH="$_loom_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$_loom_b/bin:$PATH"
export GPU_BUNDLE="$_loom_b" GPU_BUNDLE_CXX
unset _loom_b _loom_need _loom_have _loom_libs
