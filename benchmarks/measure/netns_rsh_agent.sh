#!/usr/bin/env bash
# Open MPI's rsh agent (--mca plm_rsh_agent) for loomrun's namespace hosts: "HOST CMD..." runs
# CMD in the namespace whose eth0 has address HOST (10.199.0.(h+1) -> ${LOOM_NS_PREFIX}h<h>), so
# that mpirun, started inside host 0 by loomrun --hosts, reaches the other hosts like ssh would.
set -eu
host=$1
shift
h=$((${host##*.} - 1))
exec ip netns exec "${LOOM_NS_PREFIX:?}h$h" sh -c "$*"
