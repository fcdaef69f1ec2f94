#!/usr/bin/env bash
# libfabric is loaded at run time, not linked (its provider libraries' constructors cost ~0.2 s
# per process start): no loom binary or library lists it as NEEDED, a missing or wrong library
# named by LOOM_OFI_LIBRARY makes ofi unavailable with the loader's reason, the job falls back to
# tcp with exact results, and LOOM_OFI_FALLBACK=false turns that into an init error.
# Usage: bash ofi_library.sh BIN_DIR
set -u
BIN=${1:?usage: ofi_library.sh BIN_DIR}
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

for f in "$BIN/loom-perf" "$BIN/loom-info" "$BIN/loom-tests" "$BIN/../lib/libloom.so"; do
  [[ -e $f ]] || continue
  if readelf -d "$f" | grep -q 'NEEDED.*libfabric'; then fail "$f links libfabric"; fi
done

export LOOM_OFI_LIBRARY=$TMP/missing/libfabric.so.1
"$BIN/loom-info" --transports >"$TMP/info" 2>&1
grep -q "ofi  unavailable  cannot load libfabric: .*missing/libfabric.so.1" "$TMP/info" ||
  { fail "loom-info does not say why ofi is unavailable"; cat "$TMP/info" >&2; }

timeout 120 "$BIN/loomrun" -n 2 -x LOOM_TRANSPORTS=ofi,tcp -- \
  "$BIN/loom-perf" allreduce -b 8 -e 1M -f 32 -n 1 -w 1 -d float,int32 >"$TMP/out" 2>&1
rc=$?
[[ $rc -eq 0 ]] || { fail "fallback run exited $rc"; tail -20 "$TMP/out" >&2; }
grep -q "Falling back: ofi -> tcp" "$TMP/out" || fail "no fallback WARN"
grep -q "cannot load libfabric" "$TMP/out" || fail "the WARN does not say why"
wrong=$(awk '$2 ~ /^[0-9]+$/ && NF == 14 && ($10 != "0" || $14 != "0")' "$TMP/out" | wc -l)
rows=$(awk '$2 ~ /^[0-9]+$/ && NF == 14' "$TMP/out" | wc -l)
[[ $rows -gt 0 && $wrong -eq 0 ]] || fail "fallback sweep: $rows rows, $wrong wrong"

timeout 120 "$BIN/loomrun" -n 2 -x LOOM_TRANSPORTS=ofi -x LOOM_OFI_FALLBACK=false \
  -- "$BIN/loom-perf" allreduce -b 8 -e 8 -n 1 -w 0 >"$TMP/strict" 2>&1
rc=$?
[[ $rc -ne 0 ]] || fail "LOOM_OFI_FALLBACK=false with no libfabric should fail init"
grep -q "cannot load libfabric" "$TMP/strict" || { fail "strict error does not say why"; tail -5 "$TMP/strict" >&2; }

LOOM_OFI_LIBRARY=libm.so.6 "$BIN/loom-info" --transports >"$TMP/info2" 2>&1
grep -q "ofi  unavailable  cannot load libfabric: the library has no fi_getinfo" "$TMP/info2" ||
  { fail "a library without libfabric's symbols is not reported"; cat "$TMP/info2" >&2; }

if [[ $failures -ne 0 ]]; then
  echo "ofi_library: $failures failure(s)" >&2
  exit 1
fi
echo "ofi_library: libfabric loaded at run time; missing library handled"
