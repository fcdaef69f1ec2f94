# Shared checks of what a process test needs (sourced, not a test itself); each exits 1 with a
# FAIL line naming what is missing.
# need_bins DIR NAME...: every NAME is an executable in DIR.
need_bins() {
  local dir=$1 b
  shift
  for b in "$@"; do
    [[ -x $dir/$b ]] || { echo "FAIL: $dir/$b is missing" >&2; exit 1; }
  done
}
# need_tools HINT TOOL...: every TOOL is on PATH; HINT (may be empty) says where it comes from.
need_tools() {
  local hint=${1:+ $1} t
  shift
  for t in "$@"; do
    command -v "$t" >/dev/null || { echo "FAIL: this test needs $t$hint" >&2; exit 1; }
  done
}
