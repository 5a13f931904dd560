"""The pipeline: model -> derive -> emit -> build -> System, each stage a function of the last.

``compile_model(model)`` makes a System. It picks a backend:

* ``"compiled"``: the generated Cython kernels, loaded from the content-hashed cache or built
  (a warm cache derives nothing and needs no compiler);
* ``"numpy"``: lambdified kernels and NumPy sweeps, no compiler needed (slow; the oracle);
* ``"auto"`` (default): compiled, unless the compiled core is missing or the model would have
  to be built and there is no C compiler, in which case it falls back to NumPy with a warning.
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

from ..compilation.cache import (
    build_cached,
    cache_key,
    compiler_available,
    compiler_command,
    vector_extension,
)
from ..errors import BuildError, InputError
from ..model.derivation import derive
from ..model.emit import emit_cython
from .system import System

__all__ = ["compile_model", "restore_system", "BACKENDS"]

BACKENDS = ("auto", "compiled", "numpy")


def _source(model, verbose: bool = False):
    """Derive and emit (only on a cache miss): (source text, timings); ``verbose`` says what
    it is doing on stderr (a cold build of a large model takes minutes)."""
    say = (lambda text: print(f"symdae: {model.name}: {text}", file=sys.stderr, flush=True)) \
        if verbose else (lambda text: None)
    say(f"not in the cache: deriving the equations ({model.n} coordinates, {model.m} "
        f"constraints, {len(model.parameters)} parameters)")
    t0 = time.perf_counter()
    derived = derive(model)
    t1 = time.perf_counter()
    say(f"derived in {t1 - t0:.1f} s; generating the kernels")
    text = emit_cython(derived, definition_hash=model.definition_hash(),
                       vector=vector_extension())
    t2 = time.perf_counter()
    say(f"generated {text.count(chr(10))} lines in {t2 - t1:.1f} s")
    return text, {"derive_s": t1 - t0, "emit_s": t2 - t1}


def _meta(model) -> dict:
    return {"model": model.name, "definition_hash": model.definition_hash(),
            "coordinates": model.coordinate_names, "parameters": model.parameter_names,
            "inputs": model.input_names, "outputs": model.output_names}


def _load_compiled(model, cache_dir, verbose: bool, can_build: bool = True):
    from .backends.compiled import CompiledBackend

    def make_source():
        if not can_build:
            raise BuildError(f"model {model.name!r} is not in the cache and there is no C "
                             "compiler to build it")
        return _source(model, verbose)

    def validate(module):
        got = getattr(module, "DEFINITION_HASH", None)
        if got != model.definition_hash():
            return f"it was generated for definition hash {got}, the model has " \
                   f"{model.definition_hash()}"
        return None

    module, info = build_cached(model.name, cache_key(model.definition()),
                                make_source, cache_dir, meta=_meta(model),
                                validate=validate, verbose=verbose)
    return CompiledBackend(module), info


def _numpy(model):
    from .backends.numpy import NumpyBackend

    t0 = time.perf_counter()
    derived = derive(model)
    return NumpyBackend(derived), {"derive_s": time.perf_counter() - t0, "cache_hit": False}


def compile_model(model, cache_dir=None, *, backend: str = "auto", verbose: bool = False):
    """Derive + emit + build ``model`` (or load it from the cache); returns a System."""
    from .backends.compiled import core_available


    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {BACKENDS}, got {backend!r}")
    t0 = time.perf_counter()
    if backend == "numpy":
        impl, info = _numpy(model)
    elif backend == "compiled":
        if not core_available():
            raise BuildError("the compiled core symdae.simulation.core.hht is not built: reinstall "
                             "symdae with a C compiler present, or use backend='numpy'")
        impl, info = _load_compiled(model, cache_dir, verbose)
    else:
        impl, info = _auto(model, cache_dir, verbose)
    info["total_s"] = time.perf_counter() - t0
    return System(model, impl, info, restore=restore_system)


def restore_system(model, backend: str, folder: str | None):
    """Remake a pickled System: load its kernels from the cache folder they were built in
    (compiling nothing when they are there), or lambdify them again for the NumPy backend."""
    if backend == "numpy":
        return compile_model(model, backend="numpy")
    return compile_model(model, cache_dir=Path(folder).parent if folder else None,
                         backend="compiled")


def _auto(model, cache_dir, verbose: bool):
    from .backends.compiled import core_available

    why = None
    if not core_available():
        why = "the compiled core symdae.simulation.core.hht is not built"
        how = "reinstall symdae with a C compiler present (pip install symdae)"
    else:
        can_build = compiler_available()
        try:
            return _load_compiled(model, cache_dir, verbose, can_build)
        except BuildError:
            if can_build:
                raise
            why = f"no C compiler ({compiler_command()[0]!r}) and model {model.name!r} is " \
                  "not in the cache"
            how = "install one (e.g. gcc, or set CC) for the compiled speed"
    warnings.warn(f"symdae: {why}: it runs on the NumPy backend (exact, much slower); {how}",
                  RuntimeWarning, stacklevel=3)
    return _numpy(model)
