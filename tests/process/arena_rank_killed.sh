#!/usr/bin/env bash
# shm_rank_killed.sh with 8-byte allreduces, which go through the shared-memory arena: a rank
# killed while the others wait for its slot fails them (naming it) well before LOOM_TIMEOUT.
# Usage: bash arena_rank_killed.sh BIN_DIR
exec bash "$(dirname "$0")/shm_rank_killed.sh" "${1:?usage: arena_rank_killed.sh BIN_DIR}" arena
