"""Cost of the tangent-linear sweep against the number of directions, on the engine mount.

    python benchmarks/bench_tangent.py [--quick] [--reps N] [--clock wall|cpu]

Scenario: the paper's (10 000 steps, h = 1e-4, alpha = -0.1, q0 = v0 = 0) at the paper's start
values. Timed in one interleaved run (every contender once per round, in a shuffled order),
medians over the rounds, each as a ratio to the forward simulation (``system.simulate``) of the
same rounds:

* tangent sweep along k = 1, 2, 4, 8 parameter directions (``symdae.simulation.sensitivity
  .tangent`` on a trajectory simulated without stored factorisations: the sweep refactorises
  from the states, the default path); the directions are unit vectors of the four free
  parameters, then of four more; every step's tangents of q, v, a, lambda kept ("tangent"),
  and only the output sensitivities kept (``states=False``, "outputs only", what the Fisher
  information and the Gauss-Newton Jacobian use; skipped where the installed symdae lacks it);
* Fisher information of the four free parameters (simulate + output sensitivities of a1 +
  F), the cost the goal bounds by 1 + 0.25 k = 2 forward sweeps; and again with the
  forward sweep keeping its time terms (``keep_time_terms=True``, what the Gauss-Newton
  Jacobian's forward sweep does), which the tangent sweep then reads;
* "outputs only k=4, lists" and "Fisher, time terms kept, lists": the same with the tangent
  sweep's products in the core's entry lists instead of the kernel module's written-out ones
  and every forward step generic (``use_compiled_steps = False``; skipped where the installed
  symdae lacks it).

It also prints the cost of one more direction (the least-squares line of the ratios over k).
"""
from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import symdae  # noqa: E402
from _common import CLOCKS, machine_line, shuffled_times, timing_parser, with_generic_step  # noqa: E402
from symdae.identification.fisher import fisher_information, output_sensitivities  # noqa: E402
from symdae.simulation.sensitivity import tangent  # noqa: E402

KS = (1, 2, 4, 8)


def contenders() -> dict:
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    sc, start, free = ns["SCENARIO"], ns["START"], ns["FREE"]
    traj = system.simulate(sc, params=start)
    more = [p for p in model.parameter_names if p not in free][:max(KS) - len(free)]
    order = list(free) + more

    def fisher():
        tr = system.simulate(sc, params=start)
        fisher_information(output_sensitivities(system, tr, free, ["a1"]))

    def fisher_kept():       # the forward sweep keeps the time terms the tangent reads
        tr = system.simulate(sc, params=start, keep_time_terms=True)
        fisher_information(output_sensitivities(system, tr, free, ["a1"]))

    funcs = {"forward": lambda: system.simulate(sc, params=start)}
    for k in KS:
        funcs[f"tangent k={k}"] = (lambda names: lambda: tangent(system, traj, names))(order[:k])
    if "states" in inspect.signature(tangent).parameters:
        for k in KS:
            funcs[f"outputs only k={k}"] = (
                lambda names: lambda: tangent(system, traj, names, states=False))(order[:k])
    funcs["Fisher (4 parameters)"] = fisher
    if "keep_time_terms" in inspect.signature(system.simulate).parameters:
        funcs["Fisher, time terms kept"] = fisher_kept
    if hasattr(system.backend, "use_compiled_steps"):
        funcs["outputs only k=4, lists"] = with_generic_step(
            system.backend, lambda: tangent(system, traj, order[:4], states=False))
        funcs["Fisher, time terms kept, lists"] = with_generic_step(system.backend, fisher_kept)
    return funcs


def main(argv=None) -> int:
    ap = timing_parser(__doc__.splitlines()[0], 11, 41, "cpu")
    args = ap.parse_args(argv)
    reps = args.reps or (11 if args.quick else 41)
    print(machine_line())
    print(f"engine mount, 10 000 steps, paper's start values; {reps} interleaved rounds, "
          f"{args.clock} clock")
    t = shuffled_times(contenders(), reps, CLOCKS[args.clock])
    fwd = float(np.median(t["forward"]))
    print(f"{'contender':>30s} {'median ms':>10s} {'/ forward':>10s} {'min/min':>8s}")
    ratios = {}
    for name, x in t.items():
        ratios[name] = float(np.median(x)) / fwd
        print(f"{name:>30s} {1e3 * np.median(x):10.3f} {ratios[name]:10.3f} "
              f"{np.min(x) / np.min(t['forward']):8.3f}")
    for what in ("tangent", "outputs only"):
        if f"{what} k=1" in ratios:
            slope, icpt = np.polyfit(KS, [ratios[f"{what} k={k}"] for k in KS], 1)
            print(f"{what}: ~ {icpt:.3f} + {slope:.3f} k forward sweeps")
    print(f"Fisher information (4 parameters): {ratios['Fisher (4 parameters)']:.3f} forward "
          "sweeps, goal <= 1 + 0.25 k = 2")
    if "Fisher, time terms kept" in ratios:
        print(f"  with the time terms kept: {ratios['Fisher, time terms kept']:.3f}")
    print(f"load avg at the end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
