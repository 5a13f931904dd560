"""The two schemes of the HHT family on the same runs: forward and J + gradient of the engine
mount (constant mass matrix: the same numbers either way), and the four-bar in joint angles
(M depends on q), interleaved in one run; and the memory of a stored step.

    python benchmarks/bench_schemes.py [--reps 31] [--steps 10000]

Prints medians and minima in ms and the ratio hht-ga / hht-paper of each (the machine is
shared: only ratios from one interleaved run mean anything).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import symdae  # noqa: E402
from _common import interleaved, machine_line  # noqa: E402
from symdae import Experiment, LeastSquares, Measurement, Scenario  # noqa: E402

SCHEMES = ("hht-paper", "hht-ga")


def setup(name: str, steps: int, output: str):
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    base = Scenario.make(ns["SCENARIO"])
    out = {}
    for scheme in SCHEMES:
        sc = base.replace(t_end=base.t0 + steps * base.h, scheme=scheme)
        data = Measurement.from_trajectory(system.simulate(sc), [output])
        start = ns.get("START", {})
        exp = Experiment(system, LeastSquares(data, [output]), sc)
        out[scheme] = (system, sc, exp, start)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--steps", type=int, default=10000, help="engine-mount steps")
    args = ap.parse_args()
    print(machine_line())
    # the four-bar's crank keeps speeding up under its drive: its model file's 2 s run
    for name, output, steps in (("engine_mount", "a1", args.steps), ("fourbar", "rocker", 1000)):
        runs = setup(name, steps, output)
        funcs = {}
        for scheme, (system, sc, exp, start) in runs.items():
            funcs[f"forward {scheme}"] = (lambda s=system, c=sc: s.simulate(c))
            funcs[f"J {scheme}"] = (lambda e=exp, p=start: e.evaluate(p, gradient=False))
            funcs[f"J+grad {scheme}"] = (lambda e=exp, p=start: e.evaluate(p, gradient=True))
        res = interleaved(funcs, args.reps)
        print(f"\n{name}, {steps} steps, {args.reps} interleaved repetitions (ms)")
        for what in ("forward", "J", "J+grad"):
            (mp, np_), (mg, ng) = res[f"{what} hht-paper"], res[f"{what} hht-ga"]
            print(f"  {what:7s} hht-paper {1e3 * mp:8.2f} (min {1e3 * np_:7.2f})   "
                  f"hht-ga {1e3 * mg:8.2f} (min {1e3 * ng:7.2f})   "
                  f"ratio median {mg / mp:.3f}, min/min {ng / np_:.3f}")
        sz = runs["hht-ga"][0].sizes
        tr = {s: runs[s][0].simulate(runs[s][1]) for s in SCHEMES}
        per_step = {s: sum(x.nbytes for x in (t.q, t.v, t.a, t.lam)) +
                    (0 if t.w is t.a else t.w.nbytes) for s, t in tr.items()}
        print(f"  state bytes per step: hht-paper {per_step['hht-paper'] / (steps + 1):.0f}, "
              f"hht-ga {per_step['hht-ga'] / (steps + 1):.0f} (n = {sz.n}: one more "
              f"n-vector of doubles is {8 * sz.n} bytes)")


if __name__ == "__main__":
    main()
