# Shared by the process tests that need only the basics (sourced, not a test itself): TMP (a
# temporary folder, removed at exit, with any background job of the script killed), `failures`,
# fail MESSAGE (counts a failure), free_port (a free TCP port on 127.0.0.1) and perf_job_ok.
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# perf_job_ok WHAT OUT PID...: waits for the loom-perf ranks PID...; unless every one exits 0 and
# OUT.0 holds the table's summary, fails with "WHAT (exit RC)", prints OUT.* and returns 1.
perf_job_ok() {
  local what=$1 out=$2 p rc=0
  shift 2
  for p in "$@"; do wait "$p" || rc=$?; done
  if [[ $rc -ne 0 ]] || ! grep -q "Avg bus bandwidth" "$out.0"; then
    fail "$what (exit $rc)"
    cat "$out".* >&2
    return 1
  fi
}
