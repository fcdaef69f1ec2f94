#!/usr/bin/env python3
"""The layer rule of docs/architecture.md: every #include in the library goes down the layers
(or stays in its own). Lists each include that goes up, with file and line, and exits 1 if any
is not one of the known exceptions below (each a debt named in docs/architecture.md).

Usage: check_layers.py [ROOT]   (ROOT: the repository, default: this script's parent's parent)
"""
import os
import re
import sys

# Bottom up. A file may include its own layer and any layer below it. cmake/LoomLayers.cmake
# declares one build target per layer in this order and checks calls at link time (ctest's
# process.layer_link checks that the two orders agree).
LAYERS = [
    ("api", ["include/loom"]),
    ("common", ["src/common"]),
    ("config", ["src/config"]),
    ("log", ["src/log"]),
    ("vocabulary", ["src/collective"]),
    ("bootstrap", ["src/bootstrap"]),
    ("topology", ["src/topology"]),
    ("kernels", ["kernels/host", "kernels/cuda"]),
    ("algorithms", ["src/algorithms"]),
    ("device_api", ["src/device_api"]),
    ("transports", ["transports"]),
    ("selector", ["src/selector"]),
    ("executor", ["src/executor"]),
    ("device", ["src/device"]),
    ("launch", ["src/launch"]),
    ("core", ["src/core"]),
]
# (file, included layer) pairs that go up today, each named in docs/architecture.md's
# "Not yet". None left: keep it that way.
KNOWN = set()
SOURCES = (".hpp", ".cpp", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    """The layer index of a repository path, or None outside the library."""
    for i, (_, dirs) in enumerate(LAYERS):
        for d in dirs:
            if path == d or path.startswith(d + "/"):
                return i
    return None


def resolve(inc, root):
    """An include as a repository path: loom/... is the API, others are relative to src/ or
    the repository root, as the build's include path says."""
    if inc.startswith("loom/"):
        return "include/" + inc
    if os.path.exists(os.path.join(root, "src", inc)):
        return "src/" + inc
    return inc


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad, known = [], []
    for top in ("include/loom", "src", "kernels", "transports"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                mine = layer_of(path)
                if mine is None:
                    continue
                text = open(os.path.join(root, path), errors="replace").read()
                for m in INCLUDE.finditer(text):
                    target = layer_of(resolve(m.group(1), root))
                    if target is None or target <= mine:
                        continue
                    line = text.count("\n", 0, m.start()) + 1
                    row = f"{path}:{line}: {LAYERS[mine][0]} includes {m.group(1)} ({LAYERS[target][0]}, above it)"
                    (known if (path, LAYERS[target][0]) in KNOWN else bad).append(row)
    for row in known:
        print("known: " + row)
    for row in bad:
        print("UPWARD: " + row)
    if bad:
        print(f"check-layers: {len(bad)} include(s) go up the layers (docs/architecture.md)")
        return 1
    print(f"check-layers: OK ({len(known)} known exceptions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
