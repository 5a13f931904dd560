"""Helpers shared by the benchmark scripts: what machine the figures come from."""
from __future__ import annotations

import argparse
import os
import platform
import random
import time
from pathlib import Path

import numpy as np


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_line() -> str:
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    return f"machine : {cpu_model()}, nproc {os.cpu_count()}, load avg {load}"


def interleaved_times(funcs: dict, reps: int) -> dict:
    """{name: list of seconds} of interleaved repetitions after one warm-up each (the
    machine is shared: each function sees the same load as its reference)."""
    for f in funcs.values():
        f()
    times = {k: [] for k in funcs}
    for _ in range(reps):
        for k, f in funcs.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return times


def interleaved(funcs: dict, reps: int) -> dict:
    """{name: (median s, min s)} of :func:`interleaved_times`."""
    return {k: (float(np.median(v)), float(np.min(v)))
            for k, v in interleaved_times(funcs, reps).items()}


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def shuffled_times(funcs: dict, reps: int, clock=time.perf_counter, seed: int = 0,
                   burst: int = 1) -> dict:
    """{name: array of times}: one warm-up each, then every function once per round in a
    shuffled order (``clock``: one of CLOCKS; thread CPU time does not count the waits of a
    loaded machine). With ``burst`` > 1 each turn calls the function ``burst`` times in a row
    and records their mean: the later calls find their own arrays and code in the caches, as
    an identification's back-to-back evaluations of one experiment do, where a single call
    between the other contenders finds what they left."""
    for f in funcs.values():
        f()
    names = list(funcs)
    rng = random.Random(seed)
    times = {k: np.empty(reps) for k in names}
    for r in range(reps):
        rng.shuffle(names)
        for k in names:
            f = funcs[k]
            t0 = clock()
            for _ in range(burst):
                f()
            times[k][r] = (clock() - t0) / burst
    return times


def timing_parser(description: str, quick: int, full: int, clock: str) -> argparse.ArgumentParser:
    """A parser with --quick (``quick`` rounds instead of ``full``), --reps and --clock
    (default ``clock``); the caller adds its own options."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help=f"{quick} rounds instead of {full}")
    ap.add_argument("--reps", type=int, default=None, help="interleaved rounds")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default=clock,
                    help="wall time, or this thread's CPU time, which does not count the time "
                         f"the process waits for a core on a loaded machine (default {clock})")
    return ap


def with_generic_step(backend, fn):
    """fn run with every forward and adjoint step in the core's generic steps instead of the
    kernel module's compiled ones, and the tangent sweep's products in the core's lists
    instead of the module's written-out ones (``use_compiled_steps``), for interleaved
    comparisons."""
    def run():
        backend.use_compiled_steps = False
        try:
            return fn()
        finally:
            backend.use_compiled_steps = True
    return run


def without_time_tables(backend, fn):
    """fn run with every forward sweep evaluating its time terms instead of reading them from
    a table of an earlier run (``use_time_tables``; symdae/simulation/backends/time_tables.py),
    for interleaved comparisons."""
    def run():
        backend.use_time_tables = False
        try:
            return fn()
        finally:
            backend.use_time_tables = True
    return run


def with_core_lu(kernels, fn):
    """fn run with the Newton matrix's LU in the core's sparse loops instead of the kernel
    module's written-out code (``Kernels.model_lu``), for interleaved comparisons."""
    def run():
        kernels.model_lu = False
        try:
            return fn()
        finally:
            kernels.model_lu = True
    return run
