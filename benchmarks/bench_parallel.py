"""Experiments in parallel: evaluate_many serially, on a thread pool and on a process pool.

    python benchmarks/bench_parallel.py [--experiments 4] [--reps 5]

The engine mount with --experiments experiments (different initial deflections), each the
paper's scenario (10 000 steps), J + gradient at the paper's start values; interleaved rounds,
medians. The compiled sweeps release the GIL, so threads overlap them; processes pay for
pickling the experiments once per call (each worker loads the kernels from the cache). Also
the speed-up of a whole identification on two threads.
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np

import symdae
from _common import machine_line
from symdae import Experiment, LeastSquares, Measurement, evaluate_many, identify


def experiments(system, scenario, k):
    a, b = 0.095, 0.0036
    out = []
    for j in range(k):
        d = 2.5e-4 * j
        q0 = np.array([2 * d, d, 0.0, d * (a + b) / a])
        sc = scenario.replace(q0=q0, v0=np.zeros(4))
        data = Measurement.from_trajectory(system.simulate(sc), ["a1"])
        out.append(Experiment(system, LeastSquares(data, ["a1"]), sc, name=f"q0 {j}"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print(machine_line())
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    exps = experiments(system, ns["SCENARIO"], args.experiments)
    start = ns["START"]
    threads = ThreadPoolExecutor(2)
    procs = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    runs = {"serial": None, "2 threads": threads, "2 processes": procs}
    for ex in runs.values():                          # warm-up (workers load the kernels)
        evaluate_many(exps, start, ex)
    times = {k: [] for k in runs}
    for _ in range(args.reps):
        for name, ex in runs.items():
            t0 = time.perf_counter()
            evaluate_many(exps, start, ex)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["serial"])
    print(f"{args.experiments} engine-mount experiments (10 000 steps each), J + gradient; "
          f"median of {args.reps} interleaved rounds")
    for name, t in times.items():
        med = statistics.median(t)
        print(f"  {name:12s} {med * 1e3:8.1f} ms   speed-up {base / med:4.2f}")
    t0 = time.perf_counter()
    serial = identify(exps[:2], ns["FREE"], start, method="L-BFGS-B", progress=False)
    t_serial = time.perf_counter() - t0
    t0 = time.perf_counter()
    threaded = identify(exps[:2], ns["FREE"], start, method="L-BFGS-B", progress=False,
                        executor=threads)
    t_threads = time.perf_counter() - t0
    same = serial.values == threaded.values
    print(f"identification from two experiments: serial {t_serial:.2f} s, two threads "
          f"{t_threads:.2f} s (speed-up {t_serial / t_threads:.2f}; same result: {same})")
    threads.shutdown()
    procs.shutdown()


if __name__ == "__main__":
    main()
