"""Build stage: cache key, writing the source, compiling it, loading the extension.

Knows neither models nor systems: it turns a definition string into a cache key and a source
text into a loaded extension module. Each step is its own function; :func:`build_cached` chains
them with the cache:

1. :func:`cache_key` hashes the model's definition (no derivation), the generator's own sources
   (so any change to what the emitted code depends on rebuilds), the compiler flags and the
   Python/Cython versions and platform.
2. If ``<cache>/<name>-<key>/`` exists and its extension matches the checksum recorded when it
   was built, it is loaded. A damaged folder (a truncated extension would crash the process
   that loads it) is rebuilt.
3. Otherwise, under a file lock: make the source (the caller derives and emits), write it into a
   temporary folder, compile there in a child process, record the checksum, rename the folder
   into place. A build killed half-way leaves only a temporary folder, which is never loaded
   (and is removed by the next build of that key); a second process building the same model
   waits for the lock and then loads. A failed build keeps its source and log in
   ``<name>-<key>.failed/``: only the model's latest failure, and none once a build of it
   succeeds. Folders are made with the user's umask, so a cache can be shared.
4. An OSError in the cache (a read-only folder, a full disk, a file-size limit) becomes a
   BuildError that names the cache folder and how to choose another.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import platformdirs
from filelock import FileLock

from ..errors import BuildError, InputError

__all__ = ["COMPILE_FLAGS", "VECTOR_FLAGS", "compile_flags", "default_cache_dir", "cache_key",
           "vector_extension", "build_name",
           "write_source", "compile_module", "load_module", "build_cached", "compiler_available",
           "compiler_command", "generator_digest"]

# -fopenmp-simd: the pragma only (no OpenMP runtime), for the loops of vector_ops.h that the
# module's compiled steps share with the core (setup.py builds the core with it too)
COMPILE_FLAGS = ("-O2", "-g0", "-fopenmp-simd")
# added by the vector instructions the machine has (vector_extension): with AVX2 the whole
# module is compiled for it, so that the compiled steps' loops over n, n + m and the tangents'
# n x directions entries take four doubles an instruction (engine mount, profile_sweeps.py:
# the Fisher information's tangent sweep 1 448 -> 1 127 instructions per step). No FMA: -mavx2 does not enable it and
# -ffp-contract=off would keep a * b + c two roundings if it did, so every operation rounds
# as in the core's base build and the compiled steps compute the generic steps' numbers bit
# for bit. The whole module, not only the steps (target attributes): steps built for AVX2
# calling kernels built without it ran 4 to 5 times slower here (an AMD EPYC), presumably
# from switching between the two instruction encodings.
VECTOR_FLAGS = {"base": (), "avx2": ("-mavx2", "-ffp-contract=off")}
BUILD_TIMEOUT = 1800.0  # seconds; a compile that hangs longer is reported as failed

_PKG = Path(__file__).resolve().parents[1]         # the symdae package
# the kernel interface every generated module cimports lives with the compiled core (a path,
# not an import: this stage knows no simulation code)
_CORE = _PKG / "simulation" / "core"
# everything the emitted code depends on besides the model: the symbol mapping, the
# derivation, the kernel spec, the emitter (with its LU plan) and printer, the kernel
# interface, and the C the module includes (the compiled steps and the loops they share)
GENERATOR_SOURCES = ("model/definition.py", "model/derivation.py", "model/kernels.py",
                     "model/graph.py", "model/graph_kernels.py", "model/emit.py",
                     "model/lu_plan.py", "model/tangent_products.py", "model/printer.py",
                     "simulation/core/symdae_kernels.h",
                     "simulation/core/kernel_api.pxd", "simulation/core/compiled_steps.h",
                     "simulation/core/vector_ops.h")


def default_cache_dir() -> Path:
    """Where compiled models are cached: ``$SYMDAE_CACHE_DIR``, else the platform's per-user
    cache folder (``~/.cache/symdae`` on Linux): also from a source checkout or an editable
    install, whose folder is the library's, not the user's (``SYMDAE_CACHE_DIR=generated``
    keeps a checkout's models beside it); never the installed package's folder."""
    env = os.environ.get("SYMDAE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("symdae", appauthor=False))


# how to choose another cache folder, in every error about the cache
CACHE_HINT = ("choose another with --cache-dir DIR (cache_dir= in Python) or the environment "
              "variable SYMDAE_CACHE_DIR")


def _cache_error(cache: Path, what: str, exc: OSError) -> BuildError:
    """A BuildError for an OSError in the cache: the folder, the file, the reason, the way out."""
    where = f" ({exc.filename})" if exc.filename else ""
    return BuildError(f"the compile cache {cache}: {what} failed{where}: "
                      f"{exc.strerror or exc}; {CACHE_HINT}")


def _usable_cache(cache: Path) -> None:
    """Create the cache folder or raise a BuildError that names it and says what to do."""
    hint = CACHE_HINT
    if cache.exists() and not cache.is_dir():
        raise BuildError(f"the compile cache {cache} is not a folder; {hint}")
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create the compile cache {cache}: {exc.strerror or exc}; "
                         f"{hint}") from None
    if not os.access(cache, os.W_OK | os.X_OK):
        raise BuildError(f"the compile cache {cache} is not writable; {hint}")


def compiler_command() -> list[str]:
    """The C compiler setuptools will use: $CC, else Python's configured one."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return cc.split()


def compiler_available() -> bool:
    """Is there a C compiler to build models with?"""
    return shutil.which(compiler_command()[0]) is not None


@functools.cache
def _compiler_version(cc: str) -> str:
    # asked once per process and compiler: a warm load must not start a subprocess
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0] if out.stdout else cc
    except (OSError, subprocess.SubprocessError):
        return cc


@functools.cache
def vector_extension() -> str:
    """The vector instructions this machine's kernels are generated for (emit.VECTOR_WIDTH):
    "avx2" on an x86-64 whose processor has AVX2 (its flags in /proc/cpuinfo), else "base".
    Part of the cache key, so a cache shared by machines with and without AVX2 holds a build
    for each and none loads code its processor cannot run."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "base"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return "avx2" if "avx2" in line.split() else "base"
    except OSError:
        pass
    return "base"


def compile_flags(vector: str | None = None) -> tuple:
    """The C compiler's flags for a kernel module on this machine (``vector``: the vector
    instructions, default :func:`vector_extension`'s): COMPILE_FLAGS plus VECTOR_FLAGS."""
    vector = vector_extension() if vector is None else vector
    if vector not in VECTOR_FLAGS:
        raise InputError(f"unknown vector extension {vector!r}: one of "
                         f"{', '.join(VECTOR_FLAGS)}")
    return COMPILE_FLAGS + VECTOR_FLAGS[vector]


def _tool_versions() -> dict:
    """What the compiled module's binary interface depends on (part of the key). The C
    compiler is not: any compiler's build of the same source and flags serves, so a warm cache
    loads where no compiler is installed (meta.json records which one built it)."""
    import Cython
    return {
        "python": sys.version,
        "platform": platform.platform(),
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
        "cython": Cython.__version__,
        "vector": vector_extension(),
    }


@functools.cache
def generator_digest() -> str:
    """Hash of the generator's own sources (they do not change while a process runs)."""
    h = hashlib.sha256()
    for rel in GENERATOR_SOURCES:
        h.update(rel.encode() + b"\0" + (_PKG / rel).read_bytes() + b"\0")
    return h.hexdigest()


def cache_key(definition: str, flags=None) -> str:
    """Content hash of everything that determines the compiled module (``flags``: default
    :func:`compile_flags`'s); derives nothing."""
    flags = compile_flags() if flags is None else flags
    h = hashlib.sha256()
    for part in (definition, generator_digest(), json.dumps(list(flags)),
                 json.dumps(_tool_versions(), sort_keys=True)):
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


def compile_module(folder: Path, modname: str, flags=None,
                   timeout: float = BUILD_TIMEOUT) -> Path:
    """Compile ``<folder>/<modname>.pyx`` in a child process (``flags``: default
    :func:`compile_flags`'s); return the extension's path.

    The output of Cython and the C compiler goes to ``<folder>/build.log``; on failure a
    :class:`BuildError` carries it.
    """
    flags = compile_flags() if flags is None else flags
    cfg = {"include_path": [str(_PKG.parent)], "include_dirs": [str(_CORE)],
           "flags": list(flags)}
    cmd = [sys.executable, str(Path(__file__).with_name("worker.py")), str(folder), modname, json.dumps(cfg)]
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
                         f"({_exit_reason(proc.returncode, output)})", output, str(log))
    return so


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _exit_reason(returncode: int, output: str) -> str:
    """Why the compiling child ended: a signal that killed it or its C compiler (the OOM
    killer, a user's kill) is not a compile error in the source."""
    if returncode < 0:
        return f"the compiling process was killed by {_signal_name(-returncode)}"
    killed = re.search(r"terminated by signal (\d+)", output)    # setuptools' word for it
    if killed:
        return f"the C compiler was killed by {_signal_name(int(killed.group(1)))}"
    return f"exit code {returncode}"


def load_module(path: Path, modname: str):
    """Load a compiled kernel module from its file (not via sys.path, not into sys.modules)."""
    spec = importlib.util.spec_from_file_location(modname, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load kernel module from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _intact(folder: Path, so_name: str) -> bool:
    """Does the folder hold the extension exactly as it was built (checksum in meta.json)?"""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        return meta.get("sha256") == _sha256(folder / so_name)
    except (OSError, ValueError):
        return False


def build_cached(name: str, key: str, make_source: Callable[[], tuple[str, dict]],
                 cache_dir=None, *, meta: dict | None = None,
                 validate: Callable | None = None, verbose: bool = False):
    """Load the extension of ``name`` and ``key`` from the cache, or build it.

    ``make_source()`` returns (source text, timings) and runs only on a miss. ``validate``
    (module -> None or the reason it does not belong to the caller) rejects a loaded module,
    which is then rebuilt once. Returns (module, info): the cache key, the folder, whether the
    cache was hit, and the timings of a build.
    """
    t_start = time.perf_counter()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    dirname, modname = build_name(name, key)
    final = cache / dirname
    so_name = f"{modname}{sysconfig.get_config_var('EXT_SUFFIX')}"
    info = {"key": key, "folder": str(final), "cache_hit": True}
    for attempt in range(2):
        if not _intact(final, so_name):
            info.update(_build(cache, dirname, modname, final, so_name, make_source,
                               dict(meta or {}, key=key), verbose))
        module = load_module(final / so_name, modname)
        reason = validate(module) if validate is not None else None
        if reason is None:
            break
        if attempt:
            raise BuildError(f"the freshly built module {final} does not belong to {name!r}: "
                             f"{reason}")
        shutil.rmtree(final, ignore_errors=True)   # a stale or colliding folder: rebuild
    info["total_s"] = time.perf_counter() - t_start
    return module, info


def _build(cache: Path, dirname: str, modname: str, final: Path, so_name: str,
           make_source, meta: dict, verbose: bool) -> dict:
    _usable_cache(cache)
    try:
        return _build_locked(cache, dirname, modname, final, so_name, make_source, meta,
                             verbose)
    except OSError as exc:      # a read-only folder, a full disk, "[Errno 27] File too large"
        raise _cache_error(cache, f"building {dirname}", exc) from None


def _failed_builds(cache: Path, dirname: str) -> list[Path]:
    """The kept failed builds of this model (any key: its folder name less the key)."""
    model = dirname.rsplit("-", 1)[0]
    return [p for p in cache.glob(f"{glob.escape(model)}-*.failed")
            if p.name.rsplit("-", 1)[0] == model]


def _make_temporary(cache: Path, dirname: str) -> Path:
    # not tempfile.mkdtemp: its mode 0700 would make a shared cache unreadable to the others;
    # mkdir's mode follows the user's umask
    tmp = cache / f".tmp-{dirname}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def _build_locked(cache: Path, dirname: str, modname: str, final: Path, so_name: str,
                  make_source, meta: dict, verbose: bool) -> dict:
    with FileLock(str(cache / f".{dirname}.lock")):
        if _intact(final, so_name):       # another process built it while we waited
            return {}
        for stale in cache.glob(f".tmp-{dirname}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():                # damaged after it was renamed into place
            shutil.rmtree(final)
        t0 = time.perf_counter()
        text, timings = make_source()
        tmp = _make_temporary(cache, dirname)
        write_source(text, tmp, modname)
        if verbose:
            print(f"symdae: compiling {dirname} in {tmp} (C compiler; cached afterwards)",
                  file=sys.stderr, flush=True)
        t1 = time.perf_counter()
        try:
            so = compile_module(tmp, modname)
        except BuildError as exc:
            failed = cache / f"{dirname}.failed"
            for old in _failed_builds(cache, dirname):     # only the latest failure is kept
                shutil.rmtree(old, ignore_errors=True)
            tmp.rename(failed)
            raise BuildError(f"compiling {dirname} failed; source and log kept in {failed}",
                             exc.output, str(failed / "build.log")) from None
        timings = dict(timings, source_s=t1 - t0, compile_s=time.perf_counter() - t1)
        if verbose:
            print(f"symdae: compiled in {timings['compile_s']:.1f} s", file=sys.stderr,
                  flush=True)
        shutil.rmtree(tmp / "build", ignore_errors=True)
        meta = dict(meta, sha256=_sha256(so), flags=list(compile_flags()),
                    tools=dict(_tool_versions(),
                               compiler=_compiler_version(compiler_command()[0])),
                    timings=timings)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        os.rename(tmp, final)
        for old in _failed_builds(cache, dirname):         # a success supersedes them
            shutil.rmtree(old, ignore_errors=True)
    return dict(timings, cache_hit=False)
