#!/usr/bin/env bash
# Installs loom's torch.distributed backend (`import loom.torch`; backend name "loom") into the
# python3 on PATH, on a machine set up as the README says (scripts/install-deps.sh):
#   1. torch from PyPI, unless `import torch` already works (PYTHON=... picks another python);
#   2. loom: builds it (scripts/build.sh) unless build/ has it, then installs it into
#      build/loom-install (headers, libloom.a and its pkg-config file, which setup.py reads);
#   3. pip-installs python/ against that torch and that loom (no build isolation: the
#      extension must be compiled against the torch it will run with).
# Re-running it after changing loom rebuilds and reinstalls the extension.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "== installing torch from PyPI"
  "$PYTHON" -m pip install torch
fi
# The extension's build and its tests use these; small, and quick to check.
"$PYTHON" -c "import numpy, setuptools" 2>/dev/null || "$PYTHON" -m pip install numpy setuptools

echo "== building loom"
if [[ -f build/CMakeCache.txt ]]; then
  cmake --build build --parallel "$(nproc)"
else
  scripts/build.sh
fi
cmake --build build --target loom_shared --parallel "$(nproc)"  # cmake --install needs it
cmake --install build --prefix build/loom-install >/dev/null

echo "== installing the torch backend (python/)"
LOOM_PREFIX="$PWD/build/loom-install" "$PYTHON" -m pip install --no-build-isolation ./python
"$PYTHON" - <<'PY'
import torch, loom.torch
print(f"loom.torch ready: loom {loom.torch.loom_version}, torch {torch.__version__}; "
      "use torch.distributed.init_process_group('loom')")
PY
