"""Helpers shared by the benchmark scripts: what machine the figures come from."""
from __future__ import annotations

import os
import platform
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
