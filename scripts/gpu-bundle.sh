#!/usr/bin/env bash
# gpu-bundle.sh: builds loom with the CUDA path and packs, into one folder, everything a GPU
# machine without loom's Debian libraries needs to run first light (docs/gpu.md, "Running first
# light"). The folder is git-ignored and travels to the GPU machine as a device-tool "carry".
#
#   scripts/gpu-bundle.sh [DIR] [--build-dir BUILD] [--no-build] [--check-only]
#
#   DIR           the bundle (default gpu-bundle/ at the repository root); replaced entirely
#   --build-dir   the CUDA build to pack (default build-gpu/, configured here with LOOM_CUDA=ON,
#                 LOOM_CUDA_ARCHS="80;90": sm_80 and sm_90 SASS plus compute_90 PTX, the CUDA
#                 runtime linked statically); an existing build must contain the CUDA path
#                 with sm_90 in its LOOM_CUDA_ARCHS
#   --no-build    pack BUILD as it is (it must hold every program below)
#   --check-only  only check an existing DIR (step 3 below)
#
# 1. builds loom-perf, loom-kernel-bench, loom-stream-check, loom-ipc-probe, loomrun, loom-info,
#    loom-tests;
# 2. packs DIR: bin/ (those programs, debug info stripped, symbols kept), lib/ (every shared
#    library they load, found with ldd, plus libfabric.so.1, which loom dlopens, and its own),
#    lib/cxx/ (this machine's libstdc++ and libgcc_s: env.sh uses them only where the host's
#    glibc is at least the version they need, recorded in lib/cxx/GLIBC_NEEDED, else the
#    host's own), env.sh (prepends lib/ to LD_LIBRARY_PATH, keeping the driver's path),
#    run-first-light.sh (the GPU machine's entry point), gpu-first-light.sh and loom-gpu-check
#    (copies of scripts/), torch/ and run-torch-cuda.sh (the torch backend's CUDA tests, built
#    there against the GPU machine's torch), MANIFEST (commit, nvcc, architectures, glibc
#    needed, sizes);
# 3. checks DIR: with only DIR's libraries on LD_LIBRARY_PATH and a clean environment, ldd of
#    every program and library resolves every dependency inside DIR, except glibc's own
#    libraries (libc, libm, libpthread, libdl, librt, the loader) -- the CUDA driver (libcuda,
#    libnvidia-ml) is never linked, only loaded at run time -- and every program starts
#    (loom-info --version). Prints DIR's size.
# Exit status: 0 ok; 1 a check failed; 2 usage or build error.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

dir=""
build_dir=build-gpu
do_build=1
check_only=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --check-only) check_only=1; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "gpu-bundle: unknown option '$1'" >&2; exit 2 ;;
    *) [[ -z $dir ]] || { echo "gpu-bundle: one DIR only" >&2; exit 2; }; dir=$1; shift ;;
  esac
done
dir=${dir:-$root/gpu-bundle}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

programs=(loom-perf loom-kernel-bench loom-stream-check loom-ipc-probe loomrun loom-info loom-tests)
# glibc's own libraries: every Linux machine has them (and must: they come with its loader).
glibc_re='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-x86-64\.so\.2|libresolv\.so\.2|libutil\.so\.1)$'
cxx_re='^(libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'

log() { printf 'gpu-bundle: %s\n' "$*"; }
die() { printf 'gpu-bundle: %s\n' "$*" >&2; exit "${2:-2}"; }

# The highest GLIBC_x.y symbol version the ELF files need.
glibc_needed() {
  objdump -T "$@" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV |
    tail -1
}

check_bundle() {
  local failed=0 f line name path
  local -a elves=("$dir"/bin/* "$dir"/lib/*.so* "$dir"/lib/cxx/*.so*)
  for f in "${elves[@]}"; do
    [[ -f $f ]] || continue
    while IFS= read -r line; do
      [[ $line =~ ^[[:space:]]*([^[:space:]]+)[[:space:]]+=\>[[:space:]]+(.*)$ ]] || continue
      name=${BASH_REMATCH[1]}
      path=${BASH_REMATCH[2]% (0x*}
      [[ $name =~ $glibc_re ]] && continue
      if [[ $path == "not found" ]]; then
        echo "gpu-bundle: CHECK FAILED: ${f#"$dir"/} needs $name, which is not in the bundle" >&2
        failed=1
      elif [[ $path != "$dir"/* ]]; then
        echo "gpu-bundle: CHECK FAILED: ${f#"$dir"/} loads $name from $path, outside the bundle" >&2
        failed=1
      fi
    done < <(env -i LD_LIBRARY_PATH="$dir/lib:$dir/lib/cxx" ldd "$f" 2>&1)
  done
  [[ -f $dir/lib/libfabric.so.1 ]] || { echo "gpu-bundle: CHECK FAILED: lib/libfabric.so.1 is missing" >&2; failed=1; }
  for f in "${programs[@]}"; do
    [[ -x $dir/bin/$f ]] || { echo "gpu-bundle: CHECK FAILED: bin/$f is missing" >&2; failed=1; }
  done
  if [[ -x $dir/bin/loom-info ]] &&
    ! out=$(env -i PATH=/usr/bin:/bin bash -c "source '$dir/env.sh' && loom-info --version" 2>&1); then
    echo "gpu-bundle: CHECK FAILED: loom-info --version from a clean environment: $out" >&2
    failed=1
  fi
  if [[ $failed -ne 0 ]]; then
    return 1
  fi
  log "check ok: every program and library of $dir resolves its libraries inside it (outside: glibc only); loom-info starts from a clean environment"
  log "size: $(du -sh "$dir" | cut -f1) ($(du -sb "$dir" | cut -f1) bytes)"
}

if [[ $check_only -eq 1 ]]; then
  check_bundle || exit 1
  exit 0
fi

# 1. Build.
case $build_dir in /*) ;; *) build_dir=$root/$build_dir ;; esac
cache=$build_dir/CMakeCache.txt
if [[ $do_build -eq 1 && ! -f $cache ]]; then
  log "configuring $build_dir (LOOM_CUDA=ON, LOOM_CUDA_ARCHS=80;90)"
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  command -v ccache >/dev/null &&
    gen+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -S "$root" -B "$build_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLOOM_CUDA=ON -DLOOM_CUDA_ARCHS="80;90" -DLOOM_WERROR=ON -DLOOM_BUILD_TESTS=ON ||
    die "cmake configure failed"
fi
[[ -f $cache ]] || die "$build_dir is not a configured build (no CMakeCache.txt)"
grep -q '^LOOM_CUDA_BUILT:INTERNAL=ON$' "$cache" ||
  die "$build_dir has no CUDA path (LOOM_CUDA_BUILT is not ON): the bundle is for a GPU"
archs=$(sed -n 's/^LOOM_CUDA_ARCHS:[A-Z]*=//p' "$cache")
[[ ";$archs;" == *";90;"* ]] || die "$build_dir's LOOM_CUDA_ARCHS ($archs) lacks 90 (Hopper)"
if [[ $do_build -eq 1 ]]; then
  log "building ${programs[*]} in $build_dir"
  # plus what `cmake --install` copies for the torch makings (pack_torch)
  cmake --build "$build_dir" --parallel "$(nproc)" --target "${programs[@]}" loom loom_shared \
    loom-train loom-trace ||
    die "build failed"
fi
bin=$build_dir/bin
for p in "${programs[@]}"; do [[ -x $bin/$p ]] || die "$bin/$p is missing (build it first)"; done

# The torch backend's makings (torch/, packed in step 2): the GPU machine has python3 with its own torch but no
# loom, no Debian libraries and no package registry, so the extension is compiled there
# (run-torch-cuda.sh) against an installed loom from here: headers, libloom.a and the CUDA
# runtime's static library (gzipped, debug info stripped), a loom.pc that needs no other .pc
# file (and that python/setup.py reads itself where pkg-config is missing), the bundle's shared
# libraries that the link needs by their link-time names (lib/dev/LINKS: no symbolic links
# travel), python/ and the CUDA tests.
pack_torch() {
  local t=$dir/torch prefix=$dir/torch/prefix name so cudart
  mkdir -p "$prefix/lib/pkgconfig" "$prefix/lib/dev" "$t/tests"
  cmake --install "$build_dir" --prefix "$t/install.tmp" >/dev/null ||
    die "cmake --install $build_dir failed"
  cp -r "$t/install.tmp/include" "$prefix/"
  strip --strip-debug -o "$prefix/lib/libloom.a" "$t/install.tmp/lib/libloom.a"
  rm -rf "$t/install.tmp"
  cudart=$(sed -n 's/^CUDA_cudart_static_LIBRARY:[A-Z]*=//p' "$cache")
  [[ -f $cudart ]] || die "no libcudart_static.a in $build_dir's cache (CUDA_cudart_static_LIBRARY)"
  # in lib/dev, which the .pc's Libs.private names (setup.py drops lib/ from the link's search
  # path: libloom.a goes in by name)
  cp "$cudart" "$prefix/lib/dev/libcudart_static.a"
  gzip -9 "$prefix/lib/libloom.a" "$prefix/lib/dev/libcudart_static.a"
  for name in hwloc spdlog fmt crypto; do
    so=$(cd "$dir/lib" && ls "lib$name.so."* 2>/dev/null | head -1)
    [[ -n $so ]] || die "lib$name.so.* is not in $dir/lib (needed to link the torch extension)"
    echo "$so" >>"$prefix/lib/dev/LINKS"  # run-torch-cuda.sh links lib$name.so to it there
  done
  cat >"$prefix/lib/pkgconfig/loom.pc" <<'PC'
prefix=${pcfiledir}/../..
libdir=${prefix}/lib
includedir=${prefix}/include

Name: loom
Description: loom, as the GPU bundle carries it (scripts/gpu-bundle.sh)
Version: 0.1.0
Libs: -L${libdir} -lloom
Libs.private: -L${libdir}/dev -lcudart_static -ldl -lrt -lhwloc -lspdlog -lfmt -lcrypto -pthread
Cflags: -I${includedir}
PC
  mkdir -p "$t/python"
  cp -r python/setup.py python/csrc python/loom "$t/python/"
  find "$t/python" -name '__pycache__' -prune -exec rm -rf {} +
  cp tests/torch/test_backend_cuda.py tests/torch/cuda_scenarios.py tests/torch/scenarios.py \
    tests/torch/ranks.py tests/torch/run_dist_suite.py tests/torch/ci_subset_cuda.txt "$t/tests/"
  # PyTorch's test helpers import expecttest (pure Python, from PyPI), which a GPU machine's torch
  # may lack and cannot fetch there: this machine's copy travels (tests/torch/ci.sh installs it).
  local expect
  expect=$(python3 -c 'import expecttest, os; print(os.path.dirname(expecttest.__file__))' 2>/dev/null) &&
    mkdir -p "$t/tests/pydeps" && cp -r "$expect" "$t/tests/pydeps/" &&
    find "$t/tests/pydeps" -name '__pycache__' -prune -exec rm -rf {} + ||
    log "expecttest is not installed here (tests/torch/ci.sh --install-only): the PyTorch suite will need the GPU machine's"
  cp scripts/gpu-run-torch-cuda.sh "$dir/run-torch-cuda.sh"
}

# 2. Pack.
log "packing $dir"
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib/cxx"
for p in "${programs[@]}"; do
  objcopy --strip-debug "$bin/$p" "$dir/bin/$p"
done
# awk reads ldconfig's whole list: exiting at the first match would end ldconfig with SIGPIPE
# once the list outgrows a pipe (64 KiB), and pipefail would then end this script silently.
fabric=$(ldconfig -p | awk '!found && $1 == "libfabric.so.1" && /x86-64/ { print $NF; found = 1 }')
[[ -n $fabric ]] || die "libfabric.so.1 not found (ldconfig -p)"
declare -A copied=()
for f in "$dir"/bin/* "$fabric"; do
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*([^[:space:]]+)[[:space:]]+=\>[[:space:]]+(/[^ ]+) ]] || continue
    name=${BASH_REMATCH[1]}
    path=${BASH_REMATCH[2]}
    [[ $name =~ $glibc_re || -n ${copied[$name]:-} ]] && continue
    copied[$name]=1
    if [[ $name =~ $cxx_re ]]; then
      cp -L "$path" "$dir/lib/cxx/$name"
    else
      cp -L "$path" "$dir/lib/$name"
    fi
  done < <(ldd "$f")
done
cp -L "$fabric" "$dir/lib/libfabric.so.1"
# loom-tests' fake NVML (its path is compiled in; LOOM_TEST_FAKE_NVML points the test here)
[[ -f $build_dir/lib/libfake-nvml.so ]] && cp -L "$build_dir/lib/libfake-nvml.so" "$dir/lib/"
chmod 0644 "$dir"/lib/*.so* "$dir"/lib/cxx/*.so*
glibc_needed "$dir"/lib/cxx/*.so* >"$dir/lib/cxx/GLIBC_NEEDED"
cp scripts/gpu-first-light.sh scripts/gpu-run-first-light.sh scripts/gpu-env.sh \
  scripts/loom-gpu-check "$dir/"
mv "$dir/gpu-run-first-light.sh" "$dir/run-first-light.sh"
mv "$dir/gpu-env.sh" "$dir/env.sh"
pack_torch
{
  echo "loom GPU bundle (scripts/gpu-bundle.sh), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "build: $build_dir ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$cache"))"
  echo "nvcc: $("$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$cache")" --version | tail -1)"
  echo "LOOM_CUDA_ARCHS: $archs (SASS for each, PTX for the last); CUDA runtime: static"
  echo "glibc needed: programs and lib/ $(glibc_needed "$dir"/bin/* "$dir"/lib/*.so*), lib/cxx $(cat "$dir/lib/cxx/GLIBC_NEEDED") (else the host's libstdc++ is used); built on $(ldd --version | head -1)"
  echo "GLIBCXX needed: $(objdump -T "$dir"/bin/* "$dir"/lib/*.so* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)"
  echo "files:"
  (cd "$dir" && find . -type f ! -name MANIFEST | sort | xargs ls -l | awk '{ printf "  %10d  %s\n", $5, $9 }')
} >"$dir/MANIFEST"


# 3. Check.
check_bundle || exit 1
