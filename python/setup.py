"""Builds loom's torch.distributed backend (package `loom`, module `loom.torch`).

The C++ extension is compiled against the installed torch (torch.utils.cpp_extension) and
links loom statically from an installed loom prefix (`cmake --install`), found as:

  1. $LOOM_PREFIX, when set;
  2. otherwise <repository>/build/loom-install, where scripts/install-torch-backend.sh puts it.

The prefix's pkg-config file (lib/pkgconfig/loom.pc) names libloom.a's own dependencies, so
no path has to be given by hand. Install with `pip install --no-build-isolation ./python`
(build isolation would download a second torch); scripts/install-torch-backend.sh does it all.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def loom_prefix() -> Path:
    env = os.environ.get("LOOM_PREFIX")
    prefix = Path(env) if env else HERE.parent / "build" / "loom-install"
    if not (prefix / "lib" / "libloom.a").exists() or not (prefix / "include" / "loom").is_dir():
        sys.exit(
            f"loom-torch: no installed loom at {prefix} (lib/libloom.a and include/loom/ are "
            "needed). Run scripts/install-torch-backend.sh, or `cmake --install build --prefix "
            "DIR` and set LOOM_PREFIX=DIR."
        )
    return prefix


def read_pc(pc: Path) -> list[str]:
    """`pkg-config --static --libs` for a .pc file without Requires.private, where pkg-config
    itself is missing (a GPU machine with loom's bundle, scripts/gpu-bundle.sh)."""
    fields, variables = {}, {}
    for line in pc.read_text().splitlines():
        for name, value in variables.items():
            line = line.replace("${" + name + "}", value)
        if "=" in line and (":" not in line or line.index("=") < line.index(":")):
            key, value = line.split("=", 1)
            variables[key.strip()] = value.strip().replace("${pcfiledir}", str(pc.parent))
        elif ":" in line:
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip().replace("${pcfiledir}", str(pc.parent))
    if fields.get("Requires.private") or fields.get("Requires"):
        sys.exit(f"loom-torch: pkg-config is missing and {pc} requires other packages")
    args = shlex.split(fields.get("Libs", "") + " " + fields.get("Libs.private", ""))
    return [a[:2] + os.path.normpath(a[2:]) if a.startswith(("-L", "-I")) else a for a in args]


def pkg_config_static(prefix: Path, flag: str) -> list[str]:
    pc = prefix / "lib" / "pkgconfig" / "loom.pc"
    try:
        out = subprocess.run(["pkg-config", "--static", flag, str(pc)], check=True,
                             capture_output=True, text=True).stdout
    except FileNotFoundError:
        keep = {"--libs-only-l": "-l", "--libs-only-L": "-L"}
        args = read_pc(pc)
        if flag in keep:
            return [a for a in args if a.startswith(keep[flag])]
        return [a for a in args if not a.startswith(("-l", "-L"))]
    return shlex.split(out)


def extension():
    from torch.utils.cpp_extension import CppExtension

    prefix = loom_prefix()
    libs = [a[2:] for a in pkg_config_static(prefix, "--libs-only-l") if a != "-lloom"]
    lib_dirs = [a[2:] for a in pkg_config_static(prefix, "--libs-only-L")]
    lib_dirs = [d for d in lib_dirs if Path(d).resolve() != (prefix / "lib").resolve()]
    other = [a for a in pkg_config_static(prefix, "--libs-only-other")]
    # A loom built with its CUDA path links the CUDA runtime: the backend then serves CUDA
    # tensors too (stream-ordered on torch's current stream).
    macros = [("LOOM_TORCH_LOOM_CUDA", "1")] if "cudart_static" in libs or "cudart" in libs else []
    return CppExtension(
        name="loom.torch._C",
        sources=[str(Path("csrc") / f) for f in
                 ("bindings.cpp", "loom_backend.cpp", "loom_exchange.cpp",
                  "loom_monitored_barrier.cpp", "loom_sparse.cpp", "loom_work.cpp",
                  "tensor_args.cpp")],
        include_dirs=[str(prefix / "include")],
        define_macros=macros,
        extra_objects=[str(prefix / "lib" / "libloom.a")],
        libraries=libs,
        library_dirs=lib_dirs,
        extra_compile_args=["-std=c++20", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        # Keep the .so small and its symbols its own: no debug info from libloom.a, and
        # nothing from the static libraries exported to the other extensions in the process.
        extra_link_args=other + ["-Wl,--strip-debug", "-Wl,--exclude-libs,ALL"],
    )


def main():
    from torch.utils.cpp_extension import BuildExtension

    os.chdir(HERE)
    setup(
        name="loom-torch",
        version="0.1.0",
        description="loom as a torch.distributed backend: init_process_group('loom')",
        packages=["loom", "loom.torch"],
        ext_modules=[extension()],
        cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
        entry_points={"torch.distributed.backends": ["loom = loom.torch:register"]},
        python_requires=">=3.10",
        zip_safe=False,
    )


if __name__ == "__main__":
    main()
