"""Forward simulation and build/load times of the bundled models, against symdae's targets.

Reference scenario: the hydraulic engine mount (models/engine_mount.py), q0 = 0, v0 = 0,
t in [0, 1] s, h = 1e-4 s (10 000 steps), alpha = -0.1, nominal parameters. Secondary rows:
pendulum (h = 1e-3, alpha = -0.3, 1 s) and spring_chain (h = 1e-4, alpha = -0.1, 1 s).

Per model it measures

* forward: median wall time of ``system.simulate`` over several runs after a warm-up, and of
  the bare compiled sweep ``symdae.simulation.core.hht.forward`` called with the arguments simulate
  passes (arrays allocated beforehand), so the Python setup (validation, consistent initial
  state, allocation, Trajectory) shows as the difference; us per step; Newton iterations and
  factorisations per step;
* cold build: ``symdae.compile_model(model, cache_dir=<fresh temporary folder>)``, per stage (derive, emit,
  compile) from ``build_info``, and in total (including the cache key and the load);
* warm load: ``symdae.compile_model(model)`` again into that same folder, median of several calls in this
  process, and in fresh subprocesses (only the compile() call is timed there; the import of
  symdae and the model file are reported separately).

The forward runs use the default cache (generated/ in a checkout), like a user would.

    python benchmarks/bench_forward.py [--quick]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import symdae
from _common import cpu_model  # benchmarks/_common.py (the script folder is on sys.path)
from symdae.simulation.backends.base import DEFAULT_SCHEME, scheme_code
from symdae.simulation.core import hht
from symdae.simulation.initial import initial_state

TARGETS = {"forward_s": 6e-3, "cold_s": 10.0, "warm_s": 0.3}

# name, t_end, h, alpha, q0/v0 = 0 explicitly (None: the model's initial state)
REFERENCE = ("engine_mount", 1.0, 1e-4, -0.1, True)
SECONDARY = [("pendulum", 1.0, 1e-3, -0.3, False),
             ("spring_chain", 1.0, 1e-4, -0.1, False)]

_SIM_DEFAULTS = {f.name: f.default for f in dataclasses.fields(symdae.Scenario)
                 if f.default is not dataclasses.MISSING}

_WARM_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import symdae
model, _ = symdae.load_model(sys.argv[1])
t1 = time.perf_counter()
system = symdae.compile_model(model, cache_dir=sys.argv[2])
t2 = time.perf_counter()
print(json.dumps({"compile_s": t2 - t1, "import_s": t1 - t0,
                  "cache_hit": system.build_info["cache_hit"]}))
"""


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bare_sweep(system, t_end: float, h: float, alpha: float, zero_start: bool):
    """A callable running ``hht.forward`` exactly as the compiled backend calls it."""
    model, k = system.model, system.backend.kernels
    n, m, t0 = model.n, model.m, 0.0
    N = int(round((t_end - t0) / h))
    t = t0 + h * np.arange(N + 1)
    p = system.parameter_vector()
    U = system.input_array({}, t)
    q0 = np.zeros(n) if zero_start else None
    v0 = np.zeros(n) if zero_start else None
    x0 = initial_state(system.backend, model, p, t0, U[0], q0, v0,
                       tol=_SIM_DEFAULTS["init_tol"])
    Q, V, A = np.empty((N + 1, n)), np.empty((N + 1, n)), np.empty((N + 1, n))
    L = np.empty((N + 1, m))
    S = np.zeros((N + 1, k.n_s))
    Q[0], V[0], A[0], L[0] = x0.q, x0.v, x0.a, x0.lam
    W = A.copy()          # the algorithmic accelerations of the default scheme, w_0 = a_0
    kind = scheme_code(DEFAULT_SCHEME)
    rtol, max_iter = float(_SIM_DEFAULTS["rtol"]), int(_SIM_DEFAULTS["max_iter"])
    counters = {}

    nm = n + m

    def run():
        noise, order = np.zeros(2 * nm + 1), np.zeros(2 * nm, dtype=np.intc)
        rep = hht.forward(k, t0, float(h), N, float(alpha), kind, p, U, Q, V, A, W, L, S,
                           None, None, None, None, rtol, max_iter, 0, 0, noise, order, False)
        if rep["status"] != hht.STATUS["OK"]:
            raise RuntimeError(f"bare sweep failed: {rep}")
        counters.update(rep)

    return run, Q, counters


def bench_model(name, t_end, h, alpha, zero_start, *, runs, warm_runs, fresh_runs, cold):
    model, _ = symdae.load_model(name)
    row = {"name": name, "model": model.name, "n": model.n, "m": model.m, "h": h,
           "alpha": alpha, "t_end": t_end}

    # ---- cold build into a fresh cache, then warm loads from it
    if cold:
        with tempfile.TemporaryDirectory(prefix="symdae-bench-cache-") as cache:
            t0 = time.perf_counter()
            system = symdae.compile_model(model, cache_dir=cache)
            row["cold_wall_s"] = time.perf_counter() - t0
            info = system.build_info
            if info.get("cache_hit"):
                raise RuntimeError(f"{name}: a fresh cache folder reported a cache hit")
            row["cold"] = {k: info[k] for k in ("derive_s", "emit_s", "compile_s", "total_s")}
            warm = []
            for _ in range(warm_runs):
                t0 = time.perf_counter()
                s2 = symdae.compile_model(model, cache_dir=cache)
                warm.append(time.perf_counter() - t0)
                assert s2.build_info["cache_hit"]
            row["warm_s"] = warm
            fresh, imports = [], []
            for _ in range(fresh_runs):
                out = subprocess.run([sys.executable, "-c", _WARM_CHILD, name, cache],
                                     capture_output=True, text=True, check=True)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                assert res["cache_hit"], res
                fresh.append(res["compile_s"])
                imports.append(res["import_s"])
            row["fresh_s"], row["fresh_import_s"] = fresh, imports

    # ---- forward, from the default cache
    system = symdae.compile_model(model)
    row["default_cache_hit"] = system.build_info["cache_hit"]
    kw = dict(t_end=t_end, h=h, alpha=alpha)
    if zero_start:
        kw.update(q0=np.zeros(model.n), v0=np.zeros(model.n))
    traj = system.simulate(**kw)  # warm-up
    row["counters"] = dict(traj.counters)
    run, Q, counters = bare_sweep(system, t_end, h, alpha, zero_start)
    run()  # warm-up
    if not (np.array_equal(Q, traj.q) and counters["newton_iterations"] == traj.counters["newton_iterations"]):
        raise RuntimeError(f"{name}: the bare sweep does not reproduce system.simulate")
    # interleaved, so that background load hits both figures alike
    row["sim_s"], row["bare_s"] = [], []
    for _ in range(runs):
        row["sim_s"] += timed(lambda: system.simulate(**kw), 1)
        row["bare_s"] += timed(run, 1)
    return row


# ------------------------------------------------------------------ report

def med(x):
    return statistics.median(x)


def verdict(value, target):
    return "ok" if value <= target else f"MISS x{value / target:.1f}"


def spread(x, scale, unit, digits=2):
    return (f"{med(x) * scale:.{digits}f} {unit} (min {min(x) * scale:.{digits}f}, "
            f"max {max(x) * scale:.{digits}f}, n={len(x)})")


def print_reference(r):
    c, N = r["counters"], r["counters"]["steps"]
    sim, bare = med(r["sim_s"]), med(r["bare_s"])
    lines = [
        ("forward: system.simulate", spread(r["sim_s"], 1e3, "ms"),
         f"<= {TARGETS['forward_s'] * 1e3:.0f} ms", verdict(sim, TARGETS["forward_s"])),
        ("forward: bare hht.forward", spread(r["bare_s"], 1e3, "ms"), "", ""),
        ("  simulate - bare (Python setup)", f"{(sim - bare) * 1e3:.2f} ms", "", ""),
        ("  per step (simulate / bare)", f"{sim / N * 1e6:.3f} / {bare / N * 1e6:.3f} us",
         "", ""),
        ("  Newton iterations per step", f"{c['newton_iterations'] / N:.3f}", "", ""),
        ("  factorisations per step", f"{c['factorizations'] / N:.4f} "
         f"({c['factorizations']}: one per step at its start value, {c['jacobian_refreshes']} "
         "refreshes)", "", ""),
    ]
    if "cold" in r:
        cd = r["cold"]
        lines += [
            ("cold build (compile() total)", f"{cd['total_s']:.2f} s",
             f"<= {TARGETS['cold_s']:.0f} s", verdict(cd["total_s"], TARGETS["cold_s"])),
            ("  derive / emit / compile", f"{cd['derive_s']:.3f} / {cd['emit_s']:.3f} / "
             f"{cd['compile_s']:.2f} s", "", ""),
            ("warm load, same process", spread(r["warm_s"], 1e3, "ms", 1),
             f"<= {TARGETS['warm_s']:.1f} s", verdict(med(r["warm_s"]), TARGETS["warm_s"])),
            ("warm load, fresh process", spread(r["fresh_s"], 1e3, "ms", 1),
             f"<= {TARGETS['warm_s']:.1f} s", verdict(med(r["fresh_s"]), TARGETS["warm_s"])),
            ("  (before it: import symdae + model)", f"{med(r['fresh_import_s']):.2f} s",
             "", ""),
        ]
    w0 = max(len(x[0]) for x in lines)
    w1 = max(len(x[1]) for x in lines)
    print(f"{'':{w0}}  {'figure':{w1}}  {'target':9s}  status")
    for a, b, t, v in lines:
        print(f"{a:{w0}}  {b:{w1}}  {t:9s}  {v}".rstrip())


def print_table(rows):
    print(f"{'model':20s} {'n':>3s} {'m':>2s} {'h':>6s} {'alpha':>5s} {'steps':>6s} "
          f"{'simulate':>9s} {'bare':>8s} {'us/step':>8s} {'it/step':>7s} {'fac/step':>8s} "
          f"{'cold build s (der/emit/cc)':>27s} {'warm ms':>8s} {'fresh ms':>8s}")
    for r in rows:
        c, N = r["counters"], r["counters"]["steps"]
        sim, bare = med(r["sim_s"]), med(r["bare_s"])
        if "cold" in r:
            cd = r["cold"]
            cold = (f"{cd['total_s']:5.2f} ({cd['derive_s']:.2f}/{cd['emit_s']:.2f}/"
                    f"{cd['compile_s']:.2f})")
            warm, fresh = f"{med(r['warm_s']) * 1e3:8.1f}", f"{med(r['fresh_s']) * 1e3:8.1f}"
        else:
            cold, warm, fresh = "skipped (--quick)", "-", "-"
        print(f"{r['model']:20s} {r['n']:3d} {r['m']:2d} {r['h']:6.0e} {r['alpha']:5.2f} "
              f"{N:6d} {sim * 1e3:6.2f} ms {bare * 1e3:5.2f} ms {sim / N * 1e6:8.3f} "
              f"{c['newton_iterations'] / N:7.3f} {c['factorizations'] / N:8.4f} "
              f"{cold:>27s} {warm:>8s} {fresh:>8s}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="fewer repetitions; no cold builds or subprocess loads for the "
                         "secondary models")
    ap.add_argument("--runs", type=int, default=None,
                    help="timed forward runs per model (median; default 21, --quick 5)")
    args = ap.parse_args(argv)
    runs = max(5, args.runs or (5 if args.quick else 21))
    warm_runs, fresh_runs = (3, 2) if args.quick else (7, 5)

    import Cython
    import scipy
    print(f"machine : {cpu_model()}, nproc {os.cpu_count()}, load avg "
          f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"software: Python {platform.python_version()}, NumPy {np.__version__}, SciPy "
          f"{scipy.__version__}, Cython {Cython.__version__}, symdae {symdae.__version__}")
    print(f"timing  : forward = median of {runs} runs after one warm-up; warm load = median of "
          f"{warm_runs} calls in this process and of {fresh_runs} fresh processes")

    name, t_end, h, alpha, zero = REFERENCE
    ref = bench_model(name, t_end, h, alpha, zero, runs=runs, warm_runs=warm_runs,
                      fresh_runs=fresh_runs, cold=True)
    print()
    print(f"engine-mount reference: q0 = v0 = 0, t in [0, {t_end:g}] s, h = {h:g} s, "
          f"{ref['counters']['steps']} steps, alpha = {alpha:g}, nominal parameters "
          f"(n = {ref['n']}, m = {ref['m']}, Newton matrix {ref['n'] + ref['m']} x "
          f"{ref['n'] + ref['m']})")
    print_reference(ref)

    rows = [ref]
    for name, t_end, h, alpha, zero in SECONDARY:
        rows.append(bench_model(name, t_end, h, alpha, zero, runs=runs, warm_runs=warm_runs,
                                fresh_runs=fresh_runs, cold=not args.quick))
    print()
    print("all models (1 s each; simulate/bare = median forward wall time; warm/fresh = "
          "median symdae.compile_model(model) from a warm cache, same / fresh process)")
    print_table(rows)
    print(f"load avg at the end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
