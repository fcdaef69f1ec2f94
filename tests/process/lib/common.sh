# Shared by the process tests that need only the basics (sourced, not a test itself): TMP (a
# temporary folder, removed at exit, with any background job of the script killed), `failures`,
# fail MESSAGE (counts a failure) and free_port (a free TCP port on 127.0.0.1).
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
