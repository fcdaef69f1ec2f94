#!/usr/bin/env bash
# Fails when a library #include goes up the layers of docs/architecture.md (scripts/check_layers.py).
# Usage: scripts/check-layers.sh [ROOT]
exec python3 "$(dirname "$0")/check_layers.py" "$@"
