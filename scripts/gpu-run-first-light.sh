#!/usr/bin/env bash
# run-first-light.sh of a GPU bundle (scripts/gpu-bundle.sh copies this file there): the GPU
# machine's entry point (docs/gpu.md, "Running first light").
#
#   bash gpu-bundle/run-first-light.sh OUTDIR [gpu-first-light.sh options, e.g. --only stream]
#
# Sources the bundle's env.sh, runs gpu-first-light.sh with the bundle's programs into a work
# folder under /tmp, and keeps OUTDIR to what the device tool brings back (at most 8 files):
# summary.md, results.tsv and first-light.tar.gz (every log and table), refreshed after every
# step, so that a run cut short still returns what it did. Exit status: gpu-first-light.sh's.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run-first-light.sh OUTDIR [gpu-first-light.sh options]}
shift
mkdir -p "$out"
# shellcheck source=gpu-env.sh
source "$here/env.sh"
work=$(mktemp -d /tmp/loom-first-light.XXXXXX)
bash "$here/gpu-first-light.sh" "$work/first-light" --bin "$here/bin" --pack "$out" "$@"
