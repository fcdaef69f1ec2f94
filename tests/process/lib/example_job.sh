# Shared by the process tests that run loom-example-shrink ranks by hand (fault_tolerance.sh,
# status_signal.sh). Source it after setting BIN; it provides EX, TMP (removed at exit, with
# every pid in `pids` killed), `failures` and fail MESSAGE (prints the ranks' output files
# $TMP/out.*), free_port, now_ms and wait_for FILE PATTERN SECONDS (a bounded wait).
EX=$BIN/loom-example-shrink
for tool in timeout python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: this test needs $tool (scripts/install-deps.sh)" >&2; exit 1; }
done
[[ -x $EX ]] || { echo "FAIL: $EX is missing" >&2; exit 1; }
TMP=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/out.*; do
    [[ -f $f ]] && { echo "  --- $f" >&2; sed 's/^/  /' "$f" | tail -20 >&2; }
  done
  failures=$((failures + 1))
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
now_ms() { date +%s%3N; }
# wait_for FILE PATTERN SECONDS: bounded wait until FILE contains PATTERN.
wait_for() {
  local until=$(($(now_ms) + $3 * 1000))
  until grep -q "$2" "$1" 2>/dev/null; do
    (($(now_ms) > until)) && return 1
    sleep 0.02
  done
}
