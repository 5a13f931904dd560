"""POD costs and the flexible beam: build and step time against the element count, and what
a POD cost and its gradient cost next to the forward sweep.

    python benchmarks/bench_pod.py [--quick] [--reps N] [--elements 5,10,20,40,80]

1. The beam of models/flexible_beam.py (make_beam(ne, 11)) for each element count ne
   (n = 2 ne + 2 coordinates): cold build into a temporary cache (derive, emit, compile from
   build_info), and the forward sweep per step (h = 1e-4, 2000 steps, alpha = -0.05; median of
   interleaved repetitions over all ne). Log-log slopes against n say how the per-step time
   grows: the core's sparse LU of the banded Newton matrix should make it linear in n.
2. The 10-element beam, reference scenario (1 s, 10 000 steps), at EI = 400 with the uncertain
   joints, POD cost on mode 4 against synthetic data: the cost alone (J and dJ/dS on a stored
   trajectory) for both bases and for least squares on the 11 outputs, and forward /
   J / J + adjoint gradient (``Experiment.evaluate``, the default path), interleaved, as
   ratios to the plain forward sweep.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

import symdae
from _common import (  # benchmarks/_common.py (the script folder is on sys.path)
    interleaved,
    machine_line,
)
from symdae import Measurement, PODCost
from symdae.costs.time_domain import LeastSquares


def scaling(elements, reps):
    _, ns = symdae.load_model("flexible_beam")
    sc = ns["SCENARIO"].replace(t_end=0.2)
    systems, rows = {}, []
    print(f"{'ne':>4} {'n':>4} {'derive s':>9} {'emit s':>7} {'compile s':>9} {'total s':>8}")
    with tempfile.TemporaryDirectory() as cache:
        for ne in elements:
            t0 = time.perf_counter()
            model = ns["make_beam"](ne, 11)
            t_model = time.perf_counter() - t0
            system = symdae.compile_model(model, cache_dir=cache)
            b = system.build_info
            print(f"{ne:4d} {model.n:4d} {b['derive_s']:9.2f} {b['emit_s']:7.2f} "
                  f"{b['compile_s']:9.2f} {b['total_s'] + t_model:8.2f}  (model file "
                  f"{t_model:.2f} s)", flush=True)
            systems[ne] = system
            rows.append(dict(ne=ne, n=model.n, build=b["total_s"] + t_model))
        runs = {ne: (lambda s=s: s.simulate(sc)) for ne, s in systems.items()}
        t = interleaved(runs, reps)
    steps = sc.n_steps
    print(f"\nforward sweep, {steps} steps (median of {reps} interleaved runs, min in brackets)")
    print(f"{'ne':>4} {'n':>4} {'us/step':>10} {'us/step/n':>10} {'us/step/n^3 x1e3':>17}")
    for r in rows:
        med, mn = t[r["ne"]]
        us = med / steps * 1e6
        r["us_step"] = us
        print(f"{r['ne']:4d} {r['n']:4d} {us:10.2f} {us / r['n']:10.4f} "
              f"{us / r['n'] ** 3 * 1e3:17.4f}   (min {mn / steps * 1e6:.2f})")
    n = np.array([r["n"] for r in rows], dtype=float)
    for label, key in (("per-step time", "us_step"), ("build time", "build")):
        y = np.array([r[key] for r in rows])
        slopes = np.diff(np.log(y)) / np.diff(np.log(n))
        print(f"log-log slope of the {label} against n between neighbours: "
              + ", ".join(f"{s:.2f}" for s in slopes))


def pod_costs(reps):
    model, ns = symdae.load_model("flexible_beam")
    system = symdae.compile_model(model)
    sc, outs = ns["SCENARIO"], ns["OUTPUTS"]
    P = {"EI": 400.0, **ns["UNCERTAIN_JOINTS"]}
    data = Measurement.from_trajectory(system.simulate(sc), outs)
    costs = {"POD mode 4, measured basis": PODCost(data, outs, mode=4),
             "POD mode 4, simulated basis": PODCost(data, outs, mode=4, basis="simulated"),
             "least squares, 11 outputs": LeastSquares(data, outs)}
    traj = system.simulate(sc, params=P)
    for c in costs.values():
        c.evaluate(system, traj)                  # aligns and decomposes the data once
    alone = interleaved({k: (lambda c=c: c.evaluate(system, traj)) for k, c in costs.items()},
                        reps)

    def forward():
        return system.simulate(sc, params=P)

    funcs = {"forward": forward}
    for k, c in costs.items():
        funcs[f"J: {k}"] = lambda c=c: c.evaluate(system, forward())

        # the default gradient path (states kept, the adjoint refactorises)
        exp = symdae.Experiment(system, c, sc, params=P)
        funcs[f"J + gradient: {k}"] = lambda exp=exp: exp.evaluate(gradient=True)
    t = interleaved(funcs, reps)
    f0 = t["forward"][0]
    print(f"\n10-element beam, {sc.n_steps} steps, EI = 400, uncertain joints "
          f"(medians of {reps} interleaved runs; min in brackets)")
    m0 = t["forward"][1]
    print(f"{'':50s} {'ms':>8} {'/ forward':>10} {'min ms':>8} {'min / min':>10}")
    rows = [("cost alone (J, dJ/dS): " + k, v) for k, v in alone.items()] + list(t.items())
    for k, (med, mn) in rows:
        print(f"{k:50s} {med * 1e3:8.2f} {med / f0:10.3f} {mn * 1e3:8.2f} {mn / m0:10.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="elements 5..40, fewer repetitions")
    ap.add_argument("--reps", type=int, help="interleaved repetitions (default 11, quick 5)")
    ap.add_argument("--elements", help="comma-separated element counts")
    args = ap.parse_args(argv)
    reps = args.reps or (5 if args.quick else 11)
    elements = [int(x) for x in args.elements.split(",")] if args.elements else \
        ([5, 10, 20, 40] if args.quick else [5, 10, 20, 40, 80])
    print(machine_line())
    scaling(elements, reps)
    pod_costs(reps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
