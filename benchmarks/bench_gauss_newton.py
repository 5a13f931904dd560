"""Gauss-Newton against L-BFGS-B on the engine mount, the cost of the Fisher information, and
the Monte Carlo check of the statistics (serial, threads, a Dask LocalCluster).

1. Engine mount from the discrete-adjoint paper's start (bundled ``engine_mount``: its START,
   FREE, SCENARIO; synthetic a1 from the true values): identify with ``least_squares``
   (trust-region Gauss-Newton, exact tangent Jacobian) and ``L-BFGS-B`` (adjoint gradient),
   interleaved; iterations, simulations, gradient sweeps, wall time, accuracy.
2. Fisher information for the 4 parameters (simulate + tangent sweep, refactorising from
   the states, + F) against one forward simulation, interleaved (goal: <= 2x).
3. Monte Carlo (input-design spec sections 6.4 and 7.3): two-mass oscillator, inputs F0 and
   the comparison sine, sigma 1e-6 and 1e-4 m on x2, identify c2 from 1000 N/m; cart
   pendulum, F0 and the sine, sigma 0.01 rad on phi, identify (sp, dp) from (0.2, 0.005).
   Table: mean, sample std, Fisher-predicted std at the truth, their ratio and the 99.9 %
   interval of the std, the mean reported standard error, Gauss-Newton iterations.
4. Monte Carlo wall time: serial, a thread pool and a Dask LocalCluster (processes), on the
   same runs (identical results: every run has its own seed).

python benchmarks/bench_gauss_newton.py [--quick] [--reps N] [--runs N]
"""
from __future__ import annotations

import argparse
import functools
import logging
import statistics as stats_lib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import symdae  # noqa: E402
from _common import machine_line  # noqa: E402
from symdae import Experiment, LeastSquares, Measurement, identify, monte_carlo  # noqa: E402
from symdae.identification.fisher import fisher_information, output_sensitivities  # noqa: E402


# ---------------------------------------------------------------------------- 1. engine mount
def engine_mount():
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    truth = dict(zip(model.parameter_names, model.nominal_values))
    data = Measurement.from_trajectory(system.simulate(ns["SCENARIO"]), ["a1"])
    exp = Experiment(system, LeastSquares(data, ["a1"]), ns["SCENARIO"], name="engine_mount")
    return system, ns, truth, exp


def bench_methods(reps: int) -> None:
    system, ns, truth, exp = engine_mount()
    methods = ["least_squares", "L-BFGS-B"]
    rows = {m: [] for m in methods}
    identify(exp, ns["FREE"], ns["START"], method="least_squares", progress=False,
             statistics=False)                                      # warm-up
    for _ in range(reps):
        for m in methods:                                           # interleaved
            res = identify(exp, ns["FREE"], ns["START"], method=m, progress=False,
                           statistics=False)
            rows[m].append(res)
    print("\n1. engine mount from the paper's start (h = 1e-4, 10 000 steps, alpha = -0.1, "
          f"a1 synthetic from the true values); {reps} interleaved runs each")
    print(f"{'method':>14s} {'iter':>5s} {'sims':>5s} {'grads':>6s} {'wall median':>12s} "
          f"{'min':>8s} {'final J':>10s} {'max rel. error':>15s}  message")
    med = {}
    for m in methods:
        r = rows[m][-1]
        walls = [x.wall_time for x in rows[m]]
        med[m] = stats_lib.median(walls)
        err = max(r.relative_error(truth).values())
        grads = "tangent" if m == "least_squares" else "adjoint"
        print(f"{m:>14s} {r.n_iterations:5d} {r.n_simulations:5d} {r.n_gradients:6d} "
              f"{med[m]:11.3f}s {min(walls):7.3f}s {r.cost:10.2e} {err:15.2e}  "
              f"({grads}) {r.message[:60]}")
    gn, lb = rows["least_squares"][-1], rows["L-BFGS-B"][-1]
    diff = max(abs(gn.values[k] / lb.values[k] - 1) for k in ns["FREE"])
    print(f"wall time least_squares / L-BFGS-B: {med['least_squares'] / med['L-BFGS-B']:.3f} "
          f"(medians); the two solutions differ by {diff:.2e} (relative, max over parameters)")
    t0 = time.perf_counter()
    st = symdae.identification_statistics(exp, ns["FREE"], gn.values)
    print(f"statistics at the result (simulation + tangent + F): "
          f"{time.perf_counter() - t0:.3f} s; condition number of the scaled F "
          f"{st.statistics.condition:.3g}")


# ---------------------------------------------------------------------------- 2. cost of F
def bench_fisher_cost(reps: int) -> None:
    system, ns, truth, exp = engine_mount()
    sc = ns["SCENARIO"]
    free = ns["FREE"]

    def forward():
        system.simulate(sc, params=ns["START"])

    # the default path: the tangent sweep refactorises from the states (it costs less than
    # storing every factorisation in the forward sweep, and gives the same numbers)
    parts = {"simulate": [], "tangent sweep (refactorising)": [], "F from S": []}

    def fisher():
        t0 = time.perf_counter()
        traj = system.simulate(sc, params=ns["START"])
        t1 = time.perf_counter()
        sens = output_sensitivities(system, traj, free, ["a1"])
        t2 = time.perf_counter()
        fisher_information(sens)
        t3 = time.perf_counter()
        for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[key].append(dt)

    fwd, fis = [], []
    for f in (forward, fisher):
        f()
    for v in parts.values():
        v.clear()
    for _ in range(max(reps * 5, 11)):
        for f, acc in ((forward, fwd), (fisher, fis)):
            t0 = time.perf_counter()
            f()
            acc.append(time.perf_counter() - t0)
    print(f"\n2. Fisher information of the engine mount, 4 parameters, output a1 "
          f"({len(fwd)} interleaved runs)")
    print(f"forward simulation: median {1e3 * stats_lib.median(fwd):.2f} ms (min "
          f"{1e3 * min(fwd):.2f}); simulate + tangent (4 directions) + F: "
          f"median {1e3 * stats_lib.median(fis):.2f} ms (min {1e3 * min(fis):.2f}); ratio "
          f"{stats_lib.median(fis) / stats_lib.median(fwd):.2f} (min/min "
          f"{min(fis) / min(fwd):.2f}); goal <= 2")
    print("  of which (median, relative to the forward median): " + ", ".join(
        f"{k} {stats_lib.median(v) / stats_lib.median(fwd):.2f}" for k, v in parts.items()))


# ---------------------------------------------------------------------------- 3. Monte Carlo
def experiments(model_name: str, inp: str, output: str):
    """The bundled model's experiment with noise-free data from its nominal (true) values;
    module level so that Dask workers can build it (once per batch)."""
    model, ns = symdae.load_model(model_name)
    system = symdae.compile_model(model)
    sc = ns["SCENARIO"].replace(inputs={"F": ns["REFERENCE_INPUTS"][inp]})
    data = Measurement.from_trajectory(system.simulate(sc), [output])
    # eta = 1: the per-sample noise model of the spec's Fisher matrix
    return [Experiment(system, LeastSquares(data, [output], quadrature="sum"), sc, name=inp)]


CASES = [  # model, inputs, output, noise levels, runs (spec)
    ("two_mass_oscillator", ("F0", "sine"), "x2", (1e-6, 1e-4), 200),
    ("cart_pendulum", ("F0", "sine"), "phi", (0.01,), 100),
]


def bench_monte_carlo(runs_override: int | None) -> None:
    print("\n3. Monte Carlo: Gaussian noise on every sample of the synthetic output, "
          "least_squares from START, seed 12345, thread pool of 2")
    with ThreadPoolExecutor(2) as pool:
        for name, inputs, output, sigmas, runs in CASES:
            runs = runs_override or runs
            _, ns = symdae.load_model(name)
            for sigma in sigmas:
                for inp in inputs:
                    factory = functools.partial(experiments, name, inp, output)
                    mc = monte_carlo(factory, ns["FREE"], ns["START"], {output: sigma}, runs,
                                     executor=pool)
                    print(f"\n{name}, input {inp}, sigma {sigma:g}; GN iterations median "
                          f"{np.median(mc.iterations):.0f} / max {mc.iterations.max()}; "
                          f"predicted std inside the 99.9 % interval: {mc.agrees()}")
                    print(mc.table())


def bench_parallel(runs: int, reps: int) -> None:
    print(f"\n4. Monte Carlo wall time, two-mass F0, sigma 1e-4, {runs} runs")
    factory = functools.partial(experiments, "two_mass_oscillator", "F0", "x2")
    _, ns = symdae.load_model("two_mass_oscillator")
    args = (ns["FREE"], ns["START"], {"x2": 1e-4}, runs)
    results = {}
    times: dict = {}
    executors = {"serial": lambda: None, "threads(2)": lambda: ThreadPoolExecutor(2)}
    client = cluster = None
    try:
        from dask.distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
        executors["dask LocalCluster(2 processes)"] = client.get_executor
    except ImportError:
        print("dask.distributed is not installed (pip install '.[parallel]'): skipped")
    try:
        for make in executors.values():                    # warm-up: imports in the workers
            ex = make()
            monte_carlo(factory, *args[:3], 4, truth={"c2": 1100.0}, executor=ex)
            if isinstance(ex, ThreadPoolExecutor):
                ex.shutdown()
        for _ in range(reps):
            for label, make in executors.items():          # interleaved
                ex = make()
                t0 = time.perf_counter()
                mc = monte_carlo(factory, *args, truth={"c2": 1100.0}, executor=ex)
                times.setdefault(label, []).append(time.perf_counter() - t0)
                results[label] = mc.values
                if isinstance(ex, ThreadPoolExecutor):
                    ex.shutdown()
        ref = stats_lib.median(times["serial"])
        for label, ts in times.items():
            same = np.array_equal(results[label], results["serial"])
            print(f"{label:>32s}: median {stats_lib.median(ts):6.2f} s (min {min(ts):6.2f}), "
                  f"serial / this {ref / stats_lib.median(ts):5.2f}; identical values: {same}")
    finally:
        if client is not None:
            client.close()
            cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and runs")
    ap.add_argument("--reps", type=int, help="interleaved repetitions of the timings")
    ap.add_argument("--runs", type=int, help="Monte Carlo runs per case (default: the spec's)")
    args = ap.parse_args()
    reps = args.reps or (1 if args.quick else 3)
    print(machine_line())
    bench_methods(reps)
    bench_fisher_cost(reps)
    bench_monte_carlo(args.runs or (40 if args.quick else None))
    bench_parallel(args.runs or (40 if args.quick else 200), reps)


if __name__ == "__main__":
    main()
