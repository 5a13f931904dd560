"""Multiple shooting against single shooting on the pendulum of models/pendulum_angle.py
(theta'' = -p sin theta, p = 10, theta0 = pi/6, about 2.02 s a period).

Data: the angle of the model's own run at the truth on the fitted grid (``--data model``,
default: the truth is the exact optimum), or scipy's DOP853 at rtol 1e-12 sampled at 100 Hz
(``--data dop853``, the issue's set-up: the optimum lies a discretisation error off p = 10).
For each start p0, single shooting (``identify`` with every default) and multiple shooting
(``shooting=MultipleShooting(segment_length)``, then its single-shooting polish) run one after
the other, ``--reps`` times; the table gives the identified p, iterations, simulations (full
records: a multiple-shooting evaluation runs every segment once), the median wall time and,
for multiple shooting, the rounds, the largest gap and the agreement with single shooting
started at its answer; for single shooting the fit's verdict (``local min``: flagged as a
likely local minimum, ``success`` false). Figures only: nothing is asserted.

python benchmarks/bench_shooting.py [--t-end 84] [--h 0.04] [--segment-length 1.0]
                                    [--data model|dop853] [--reps 1] [--starts 2,5,...]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import symdae  # noqa: E402
from _common import machine_line  # noqa: E402
from symdae import Experiment, LeastSquares, Measurement, MultipleShooting, Scenario, identify  # noqa: E402

P_TRUE, THETA0 = 10.0, math.pi / 6
STARTS = "1,2,5,8,9,9.9,11,12,15,20,30,40,50"


def dop853_data(t_end: float) -> Measurement:
    from scipy.integrate import solve_ivp
    t = np.arange(0.0, t_end + 1e-9, 0.01)
    sol = solve_ivp(lambda _, y: [y[1], -P_TRUE * math.sin(y[0])], (0.0, t_end),
                    [THETA0, 0.0], method="DOP853", rtol=1e-12, atol=1e-12, t_eval=t)
    return Measurement.from_arrays(t, theta=sol.y[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--t-end", type=float, default=84.0)
    ap.add_argument("--h", type=float, default=0.04)
    ap.add_argument("--segment-length", type=float, default=1.0)
    ap.add_argument("--data", choices=["model", "dop853"], default="model")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--starts", default=STARTS)
    args = ap.parse_args()
    print(machine_line())
    system = symdae.compile_model(symdae.load_model("pendulum_angle")[0])
    sc = Scenario(t_end=args.t_end, h=args.h, alpha=-0.05)
    if args.data == "model":
        data = Measurement.from_trajectory(system.simulate(sc, params={"p": P_TRUE}),
                                           ["theta"])
    else:
        data = dop853_data(args.t_end)
    exp = Experiment(system, LeastSquares(data, ["theta"]), sc)
    shooting = MultipleShooting(segment_length=args.segment_length)
    print(f"pendulum_angle, {args.t_end:g} s ({args.t_end / 2.02:.0f} periods), h = {args.h:g}, "
          f"data: {args.data}; multiple shooting: segments of {args.segment_length:g} s")
    head = (f"{'p0':>6} | {'single: p':>12} {'it':>4} {'sims':>5} {'wall':>7} {'verdict':>9} | "
            f"{'multiple: p':>12} {'it':>4} {'sims':>5} {'rounds':>6} {'gap':>8} "
            f"{'wall':>7} {'vs single':>9}")
    print(head)
    print("-" * len(head))
    identify(exp, ["p"], {"p": 9.0}, progress=False, statistics=False)     # warm-up
    for p0 in (float(s) for s in args.starts.split(",")):
        walls: dict = {"single": [], "multiple": []}
        for _ in range(args.reps):
            t = time.perf_counter()
            single = identify(exp, ["p"], {"p": p0}, progress=False, statistics=False)
            walls["single"].append(time.perf_counter() - t)
            t = time.perf_counter()
            multi = identify(exp, ["p"], {"p": p0}, progress=False, statistics=False,
                             shooting=shooting)
            walls["multiple"].append(time.perf_counter() - t)
        again = identify(exp, ["p"], multi.values, progress=False, statistics=False)
        agree = abs(again.values["p"] / multi.values["p"] - 1)
        flag = "local min" if single.verdict.local_minimum else "passed"
        print(f"{p0:6g} | {single.values['p']:12.8g} {single.n_iterations:4d} "
              f"{single.n_simulations:5d} {statistics.median(walls['single']):6.2f}s "
              f"{flag:>9} | "
              f"{multi.values['p']:12.8g} {multi.n_iterations:4d} {multi.n_simulations:5d} "
              f"{multi.shooting.rounds:6d} {multi.shooting.max_gap:8.1e} "
              f"{statistics.median(walls['multiple']):6.2f}s {agree:9.1e}")


if __name__ == "__main__":
    main()
