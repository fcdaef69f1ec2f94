#!/usr/bin/env bash
# shm_rank_killed.sh with its 1 MiB-and-up allreduces through the shared-memory arena in pieces
# (LOOM_SHM_ARENA_PIECE, 4 ranks): a rank killed while the others wait for its slot of a step
# fails them (naming it) well before LOOM_TIMEOUT, and no segment is left.
# Usage: bash arena_pieces_rank_killed.sh BIN_DIR
exec bash "$(dirname "$0")/shm_rank_killed.sh" "${1:?usage: arena_pieces_rank_killed.sh BIN_DIR}" pieces
