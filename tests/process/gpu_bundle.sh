#!/usr/bin/env bash
# The GPU bundle and first light (docs/gpu.md, "Running first light"), proven without a GPU:
#  1. scripts/gpu-bundle.sh packs this CUDA build (--no-build) into a bundle under 56 MiB whose
#     own check passes (ldd: nothing outside it but glibc), and the check fails on a bundle
#     missing one library; the torch backend's makings are there (torch/, run-torch-cuda.sh)
#     and their loom.pc reads, without pkg-config, into the flags the extension's link needs;
#  2. the bundle runs first light end to end on host-sim from a clean environment (env -i, only
#     the bundle's env.sh), where possible in a private mount namespace in which this machine's
#     copies of every bundled library (and hwloc's plugins) are hidden, as on a GPU machine
#     without loom's Debian libraries: the unbundled build must fail to start there, the bundle
#     must pass every run (graph capture: "not supported" on host-sim) and leave summary.md,
#     results.tsv and first-light.tar.gz in OUTDIR;
#  3. first light goes on after a failed run and exits 1: a loom-kernel-bench that reports a
#     wrong value fails the kernels run, the stream runs after it still pass.
# Usage: bash gpu_bundle.sh BIN_DIR. Skips (77) without nvcc or when the build has no CUDA path.
set -u
BIN=$(cd "${1:?usage: gpu_bundle.sh BIN_DIR}" && pwd)
BUILD=$(cd "$BIN/.." && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "SKIP: no nvcc (the bundle is a CUDA build)"
  exit 77
fi
if ! grep -q '^LOOM_CUDA_BUILT:INTERNAL=ON$' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "SKIP: $BUILD has no CUDA path (LOOM_CUDA=OFF)"
  exit 77
fi

# 1. Pack and check.
B=$TMP/gpu-bundle
if ! bash "$ROOT/scripts/gpu-bundle.sh" "$B" --build-dir "$BUILD" --no-build >"$TMP/pack.txt" 2>&1; then
  fail "gpu-bundle.sh failed:"
  sed 's/^/  /' "$TMP/pack.txt" >&2
  exit 1
fi
grep -q 'check ok' "$TMP/pack.txt" || fail "gpu-bundle.sh did not report its check: $(cat "$TMP/pack.txt")"
size=$(du -sb "$B" | cut -f1)
if ((size > 56 << 20)); then
  fail "the bundle is $size bytes (over 56 MiB: the device tool carries 64 MiB with the working tree)"
fi
echo "ok: bundle packed and checked, $((size >> 20)) MiB"
# The torch backend's makings (built on the GPU machine by run-torch-cuda.sh): every file there,
# and a loom.pc that python/setup.py reads without pkg-config into the flags the link needs.
for f in run-torch-cuda.sh torch/prefix/include/loom/loom.hpp torch/prefix/lib/libloom.a.gz \
  torch/prefix/lib/dev/libcudart_static.a.gz torch/prefix/lib/dev/LINKS torch/python/setup.py \
  torch/python/csrc/loom_backend.cpp torch/tests/test_backend_cuda.py torch/tests/ranks.py \
  torch/tests/run_dist_suite.py torch/tests/ci_subset_cuda.txt; do
  [[ -f $B/$f ]] || fail "the bundle lacks $f"
done
while read -r so; do
  [[ -f $B/lib/$so ]] || fail "torch/prefix/lib/dev/LINKS names $so, which lib/ lacks"
done <"$B/torch/prefix/lib/dev/LINKS"
flags=$(cd "$B/torch/python" && python3 -c '
import pathlib, setup
print(" ".join(setup.read_pc(pathlib.Path("../prefix/lib/pkgconfig/loom.pc").resolve())))' 2>&1)
for want in -lloom -lcudart_static -lhwloc -lspdlog -lfmt -lcrypto "-L$B/torch/prefix/lib/dev"; do
  [[ " $flags " == *" $want "* ]] || fail "the bundle's loom.pc read without pkg-config lacks $want: $flags"
done
echo "ok: the torch backend's makings are in the bundle; its loom.pc reads as: $flags"
cp -a "$B" "$TMP/broken"
rm "$TMP/broken/lib/libfmt.so.9"
if bash "$ROOT/scripts/gpu-bundle.sh" "$TMP/broken" --check-only >"$TMP/broken.txt" 2>&1; then
  fail "the check passed a bundle without libfmt.so.9"
elif ! grep -Eq 'libfmt\.so\.9.*(not in the bundle|outside the bundle)' "$TMP/broken.txt"; then
  fail "the check did not name the missing libfmt.so.9: $(cat "$TMP/broken.txt")"
else
  echo "ok: the check fails on a bundle missing libfmt.so.9"
fi

# 2. First light on host-sim from a clean environment, system copies of the bundled libraries
# hidden where a private mount namespace can be had.
cat >"$TMP/hide.sh" <<'EOF'
# Hides this machine's copy of every library the bundle carries (bind-mounting /dev/null over
# it) and hwloc's plugins; then runs the command.
set -e
B=$1; shift
mount --make-rprivate /
declare -A seen=()
for f in "$B"/lib/*.so* "$B"/lib/cxx/*.so*; do
  n=$(basename "$f")
  for p in $(ldconfig -p | awk -v n="$n" '$1 == n { print $NF }') /lib/x86_64-linux-gnu/"$n" /usr/lib/x86_64-linux-gnu/"$n"; do
    [[ -e $p ]] || continue
    r=$(readlink -f "$p")
    [[ -n ${seen[$r]:-} ]] && continue
    seen[$r]=1
    mount --bind /dev/null "$r"
  done
done
for d in /usr/lib/x86_64-linux-gnu/hwloc /usr/lib64/hwloc; do [[ -d $d ]] && mount -t tmpfs none "$d"; done
echo "hidden: ${!seen[*]}"
"$@"
EOF
cat >"$TMP/inside.sh" <<'EOF'
# Inside the namespace (or not): the unbundled build must not start, the bundle must.
BUILD_BIN=$1 B=$2 OUT=$3 HIDDEN=$4
if [[ $HIDDEN == yes ]] && "$BUILD_BIN/loom-info" --version >/dev/null 2>&1; then
  echo "INSIDE-FAIL: the unbundled loom-info starts although its libraries are hidden"
  exit 1
fi
# 360 s: the budget guards GPU time; on a busy CI machine the host-sim dtype matrix alone can
# take over 100 s, and a run the budget skips fails this check.
env -i PATH=/usr/bin:/bin HOME="$OUT" bash "$B/run-first-light.sh" "$OUT" --device host-sim --budget 360
EOF
hidden=no
if unshare -m true 2>/dev/null; then
  runner=(unshare -m bash "$TMP/hide.sh" "$B")
  hidden=yes
elif unshare -Urm true 2>/dev/null; then
  runner=(unshare -Urm bash "$TMP/hide.sh" "$B")
  hidden=yes
else
  runner=()
  echo "note: no private mount namespace here (unshare -m refused): running with this machine's libraries visible"
fi
start=$(date +%s)
timeout 400 "${runner[@]}" bash "$TMP/inside.sh" "$BIN" "$B" "$TMP/out" "$hidden" >"$TMP/light.txt" 2>&1
rc=$?
secs=$(($(date +%s) - start))
if [[ $rc -ne 0 ]]; then
  fail "first light on host-sim exited $rc (hidden libraries: $hidden, $secs s):"
  tail -40 "$TMP/light.txt" | sed 's/^/  /' >&2
else
  echo "ok: first light on host-sim from a clean environment passed in $secs s (system copies hidden: $hidden)"
fi
for f in summary.md results.tsv first-light.tar.gz; do
  [[ -s $TMP/out/$f ]] || fail "first light left no $f in OUTDIR"
done
res=$TMP/out/results.tsv
if [[ -s $res ]]; then
  bad=$(awk -F'\t' '$2 != "PASS" && !($1 ~ /^graph:/ && $2 == "NOT-SUPPORTED")' "$res")
  [[ -z $bad ]] || fail "runs that did not pass: $bad"
  for step in bundle device kernels routes dtypes sweeps stream graph tests; do
    grep -q "^$step:" "$res" || fail "no $step run in results.tsv"
  done
  runs=$(wc -l <"$res")
  ((runs >= 50)) || fail "only $runs runs in results.tsv (50 expected)"
  grep -q 'every run passed' "$TMP/light.txt" || fail "first light did not print its verdict"
  tar tzf "$TMP/out/first-light.tar.gz" | grep -q 'kernels.txt' || fail "first-light.tar.gz lacks kernels.txt"
fi

# 3. A run that fails: the others go on, the exit status is 1.
mkdir "$TMP/badbin"
for p in "$B"/bin/*; do ln -s "$p" "$TMP/badbin/"; done
rm "$TMP/badbin/loom-kernel-bench"
cat >"$TMP/badbin/loom-kernel-bench" <<'EOF'
#!/bin/sh
[ "$1" = --help ] && exit 0
echo "     1048576      float    sum       1.00     1.0     50%  WRONG: 3 of 262144 elements"
echo "loom-kernel-bench: 1 row(s) with wrong values" >&2
exit 1
EOF
chmod +x "$TMP/badbin/loom-kernel-bench"
env -i PATH=/usr/bin:/bin bash -c "source '$B/env.sh' && bash '$B/gpu-first-light.sh' '$TMP/out2' \
  --device host-sim --bin '$TMP/badbin' --only kernels,stream --budget 120" >"$TMP/light2.txt" 2>&1
rc=$?
if [[ $rc -ne 1 ]]; then
  fail "first light with a failing kernels run exited $rc, not 1"
elif ! grep -q $'^kernels: sum vs copy\tFAIL' "$TMP/out2/results.tsv" ||
  [[ $(grep -c $'^stream: n[24] [a-z_]*\tPASS' "$TMP/out2/results.tsv") -ne 3 ]]; then
  fail "first light did not record the kernels failure and go on with stream: $(cat "$TMP/out2/results.tsv")"
else
  echo "ok: a failed run is recorded, the next ones still run, exit 1"
fi

if [[ $failures -ne 0 ]]; then
  echo "gpu_bundle: $failures failure(s)" >&2
  exit 1
fi
echo "gpu_bundle: all checks passed"
