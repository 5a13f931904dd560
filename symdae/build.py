"""Build stage: cache key, writing the source, compiling it, loading the extension.

Each step is its own function; :func:`compile_model` chains them with the cache:

1. :func:`cache_key` hashes the model's definition (no derivation), the generator version, the
   compiler flags and the tool versions.
2. If ``<cache>/<model>-<key>/`` exists it is complete (it only ever appears by an atomic
   rename) and is loaded.
3. Otherwise, under a file lock: derive, emit, write into a temporary folder, compile there in
   a child process, then rename the folder into place. A build killed half-way leaves only a
   temporary folder, which is never loaded (and is removed by the next build of that key);
   a second process building the same model waits for the lock and then loads.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from ._version import ABI_VERSION, GENERATOR_VERSION
from .errors import BuildError

__all__ = ["COMPILE_FLAGS", "default_cache_dir", "cache_key", "build_name", "write_source",
           "compile_module", "load_module", "compile_model"]

COMPILE_FLAGS = ("-O2", "-g0")
BUILD_TIMEOUT = 1800.0  # seconds; a compile that hangs longer is reported as failed

_PKG = Path(__file__).resolve().parent
_CORE = _PKG / "core"


def default_cache_dir() -> Path:
    """``$SYMDAE_CACHE_DIR``; else ``generated/`` of a source checkout; else ``~/.cache/symdae``."""
    env = os.environ.get("SYMDAE_CACHE_DIR")
    if env:
        return Path(env)
    repo = _PKG.parent / "generated"
    if (repo / "README.md").is_file() and os.access(repo, os.W_OK):
        return repo
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "symdae"


def _compiler_version() -> str:
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    try:
        out = subprocess.run(cc[:1] + ["--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0] if out.stdout else cc[0]
    except (OSError, subprocess.SubprocessError):
        return cc[0]


def _tool_versions() -> dict:
    import Cython
    return {
        "python": sys.version,
        "platform": platform.platform(),
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
        "cython": Cython.__version__,
        "compiler": _compiler_version(),
    }


def _interface_digest() -> str:
    h = hashlib.sha256()
    for name in ("symdae_kernels.h", "kernel_api.pxd"):
        h.update((_CORE / name).read_bytes())
    return h.hexdigest()


def cache_key(model, flags=COMPILE_FLAGS) -> str:
    """Content hash of everything that determines the compiled module; derives nothing."""
    h = hashlib.sha256()
    for part in (model.definition(), GENERATOR_VERSION, str(ABI_VERSION), _interface_digest(),
                 json.dumps(list(flags)), json.dumps(_tool_versions(), sort_keys=True)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def build_name(model_name: str, key: str) -> tuple[str, str]:
    """(folder name, Python module name) for a model and key; both safe identifiers."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", model_name)[:40].strip("_") or "model"
    return f"{safe}-{key[:16]}", f"symdae_{safe}_{key[:16]}"


def write_source(text: str, folder: Path, modname: str) -> Path:
    """Write the emitted source as ``<folder>/<modname>.pyx`` (plus ``kernels.pyx`` to read)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{modname}.pyx"
    path.write_text(text)
    (folder / "kernels.pyx").write_text(text)
    return path


def compile_module(folder: Path, modname: str, flags=COMPILE_FLAGS,
                   timeout: float = BUILD_TIMEOUT) -> Path:
    """Compile ``<folder>/<modname>.pyx`` in a child process; return the extension's path.

    The output of Cython and the C compiler goes to ``<folder>/build.log``; on failure a
    :class:`BuildError` carries it.
    """
    cfg = {"include_path": [str(_PKG.parent)], "include_dirs": [str(_CORE)],
           "flags": list(flags)}
    cmd = [sys.executable, str(_PKG / "_build_worker.py"), str(folder), modname, json.dumps(cfg)]
    log = folder / "build.log"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or "") + (exc.stderr or "") if isinstance(exc.stdout, str) else ""
        log.write_text(out)
        raise BuildError(f"compiling {modname} timed out after {timeout:.0f} s", out,
                         str(log)) from None
    output = proc.stdout + proc.stderr
    log.write_text(" ".join(cmd) + "\n" + output)
    so = folder / f"{modname}{sysconfig.get_config_var('EXT_SUFFIX')}"
    if proc.returncode != 0 or not so.is_file():
        raise BuildError(f"compiling the kernels of {modname} failed "
                         f"(exit code {proc.returncode})", output, str(log))
    return so


def load_module(path: Path, modname: str):
    """Load a compiled kernel module from its file (not via sys.path, not into sys.modules)."""
    spec = importlib.util.spec_from_file_location(modname, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load kernel module from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _meta(model, key: str, timings: dict) -> dict:
    return {
        "model": model.name, "key": key, "definition_hash": model.definition_hash(),
        "generator_version": GENERATOR_VERSION, "abi_version": ABI_VERSION,
        "sizes": {"n": model.n, "m": model.m, "n_p": len(model.parameters),
                  "n_u": len(model.inputs), "n_s": len(model.outputs)},
        "coordinates": model.coordinate_names, "parameters": model.parameter_names,
        "inputs": model.input_names, "outputs": model.output_names,
        "flags": list(COMPILE_FLAGS), "tools": _tool_versions(), "timings": timings,
    }


def compile_model(model, cache_dir=None, *, verbose: bool = False):
    """Derive + emit + build ``model``, or load it from the cache. Returns a System."""
    from .derivation import derive
    from .emit import emit_cython
    from .system import System

    t_start = time.perf_counter()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = cache_key(model)
    dirname, modname = build_name(model.name, key)
    final = cache / dirname
    so_name = f"{modname}{sysconfig.get_config_var('EXT_SUFFIX')}"
    info = {"key": key, "folder": str(final), "cache_hit": True}

    if not (final / so_name).is_file():
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / f".{dirname}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (final / so_name).is_file():
                info["cache_hit"] = False
                for stale in cache.glob(f".tmp-{dirname}-*"):
                    shutil.rmtree(stale, ignore_errors=True)
                if final.exists():
                    # only an atomic rename creates it, so it was damaged afterwards
                    shutil.rmtree(final)
                timings = {}
                t0 = time.perf_counter()
                derived = derive(model)
                timings["derive_s"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                text = emit_cython(derived, definition_hash=model.definition_hash())
                timings["emit_s"] = time.perf_counter() - t0
                tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dirname}-", dir=cache))
                write_source(text, tmp, modname)
                if verbose:
                    print(f"symdae: compiling {model.name} in {tmp}", file=sys.stderr)
                t0 = time.perf_counter()
                try:
                    compile_module(tmp, modname)
                except BuildError as exc:
                    failed = cache / f"{dirname}.failed"
                    shutil.rmtree(failed, ignore_errors=True)
                    tmp.rename(failed)
                    exc.log_path = str(failed / "build.log")
                    raise BuildError(f"compiling model {model.name!r} failed; source and log "
                                     f"kept in {failed}", exc.output, exc.log_path) from None
                timings["compile_s"] = time.perf_counter() - t0
                shutil.rmtree(tmp / "build", ignore_errors=True)
                (tmp / "meta.json").write_text(json.dumps(_meta(model, key, timings), indent=1))
                os.rename(tmp, final)
                info.update(timings)
    module = load_module(final / so_name, modname)
    info["total_s"] = time.perf_counter() - t_start
    return System(model, module, info)
