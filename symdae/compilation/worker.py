"""Compile one generated kernel module; run as a script in a child process by symdae.compilation.

    python _build_worker.py <folder> <module name> <json: include_path, include_dirs, flags>

A child process keeps the compiler's output capturable (it writes to file descriptors, not to
Python's streams) and keeps setuptools' global state out of the caller. It deliberately does
not import symdae (that would import SymPy for nothing).
"""
import json
import sys
from pathlib import Path


def main() -> None:
    folder, modname, cfg = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    ext = Extension(modname, [str(folder / f"{modname}.pyx")],
                    include_dirs=cfg["include_dirs"], extra_compile_args=cfg["flags"])
    modules = cythonize([ext], include_path=cfg["include_path"], quiet=True,
                        compiler_directives={"language_level": 3}, force=True)
    dist = Distribution({"ext_modules": modules, "script_name": "symdae-build",
                         "script_args": ["build_ext"]})
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib = str(folder)
    cmd.build_temp = str(folder / "build")
    cmd.inplace = False
    dist.run_command("build_ext")


if __name__ == "__main__":
    main()
