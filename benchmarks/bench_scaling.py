"""Per-step and build time against model size: the chain of N pendula in Cartesian coordinates
(models/pendulum_chain.py: 2N coordinates, N constraints, a (3N x 3N) Newton matrix about
10/(3N) full).

    python benchmarks/bench_scaling.py [--sizes 2,5,10,20,40,80] [--steps 2000] [--reps 5]

For each N: the cold build (derive, emit, compile) into a fresh temporary cache; the per-step
time of the forward sweep (the minimum over repetitions of a run of --steps steps, CPU time,
minus the run's fixed cost; CPU time of the calling thread) and of J + adjoint gradient; the fixed cost of a run (its setup: the
sparse LU's analysis, the work buffers, the consistent initialisation), from a 1-step run; and
Newton iterations and factorisations per step. The runs of all sizes are interleaved, so
background load hits them alike. The core factorises the Newton matrix with the sparse LU of
symdae/simulation/core/sparse.pxd; the fit at the end gives the exponent of per-step time in N.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import symdae
from _common import machine_line
from symdae import LeastSquares, Scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from pendulum_chain import make_chain  # noqa: E402  (the bundled model file's factory)


def cpu(fn) -> float:
    """CPU time of this thread (process time would count BLAS threads spinning idle)."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2,5,10,20,40,80")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(machine_line())
    h = 1e-3
    long = Scenario(t_end=args.steps * h, h=h, alpha=-0.1)
    short = Scenario(t_end=h, h=h, alpha=-0.1)
    rows = {}
    with tempfile.TemporaryDirectory() as cache:
        for N in sizes:
            model = make_chain(N)
            t0 = time.perf_counter()
            system = symdae.compile_model(model, cache_dir=cache)
            info = system.build_info
            data = system.simulate(long)
            cost = LeastSquares({k: data.outputs[k] for k in model.output_names})
            rows[N] = dict(system=system, cost=cost, build=time.perf_counter() - t0,
                           parts=(info.get("derive_s", 0), info.get("emit_s", 0),
                                  info.get("compile_s", 0)),
                           fwd=[], jg=[], setup=[], counters=data.counters)
        moved = {"l": 0.31}
        for _ in range(args.reps):
            for r in rows.values():
                s, c = r["system"], r["cost"]
                r["setup"].append(cpu(lambda s=s: s.simulate(short, params=moved)))
                r["fwd"].append(cpu(lambda s=s: s.simulate(long, params=moved)))

                def jg(s=s, c=c):
                    tr = s.simulate(long, params=moved)
                    symdae.adjoint_gradient(s, tr, c.evaluate(s, tr)[1])
                r["jg"].append(cpu(jg))
    print(f"chain of N pendula, {args.steps} steps of h = {h}, alpha = -0.1; CPU time, min of "
          f"{args.reps} interleaved repetitions")
    print(f"{'N':>4} {'n+m':>5} {'build s':>8} {'(der/emit/cc)':>17} {'setup ms':>9} "
          f"{'us/step':>8} {'J+grad us/step':>15} {'it/step':>8} {'fac/step':>9}")
    per = []
    for N, r in rows.items():
        setup = min(r["setup"])
        step = (min(r["fwd"]) - setup) / args.steps
        jg = (min(r["jg"]) - setup) / args.steps
        c = r["counters"]
        per.append(step)
        d, e, cc = r["parts"]
        print(f"{N:>4} {3 * N:>5} {r['build']:>8.1f} {f'({d:.1f}/{e:.1f}/{cc:.1f})':>17} "
              f"{setup * 1e3:>9.2f} {step * 1e6:>8.2f} {jg * 1e6:>15.2f} "
              f"{c['newton_iterations'] / c['steps']:>8.2f} "
              f"{c['factorizations'] / c['steps']:>9.3f}")
    if len(sizes) >= 3:
        k = max(1, len(sizes) // 2)
        slope = np.polyfit(np.log(sizes[k:]), np.log(per[k:]), 1)[0]
        print(f"per-step time ~ N^{slope:.2f} over N = {sizes[k]} .. {sizes[-1]}")


if __name__ == "__main__":
    main()
