"""What an evaluation costs beyond its compiled sweeps, through the public API.

    python benchmarks/bench_overhead.py [--quick] [--reps N] [--clock wall|cpu]

``Experiment.evaluate`` (J, and J + adjoint gradient) of the engine mount at the paper's start
values on runs of 100 and 10 000 steps (h = 1e-4), timed in one interleaved run (every
contender once per round in a shuffled order, medians and minima over the rounds) with:

* the bare compiled forward sweep of the same run (``backend.forward``, as ``simulate`` calls
  it): what is left of J is the evaluation's fixed cost (initial state, checks, cost, records);
* the same evaluations with the one-call initial state switched off (``consistent_start``
  returning None: the general path of ``symdae/simulation/initial.py``).

A small model shows the fixed cost where it weighs most: the two-mass oscillator's scenario
(1 000 steps, an input, the start from the model's expressions), J and J + gradient against
its compiled forward sweep alone (``hht.forward`` replayed with the arguments the backend
passed it, on the same arrays: no Python around it) and against ``backend.forward``.

The sweeps' array pool is compared apart, in fresh processes (whether freed arrays come back
as fresh pages depends on what the process allocated before, and the pool's own arrays change
that for everything else): J and J + gradient alternating, 30 rounds after a warm-up, in a
child with the pool and in one with a pool that keeps nothing (every run allocates fresh arrays,
as before the pool existed), three times over alternately; per evaluation: the time (median
over the children) and the page faults (minor faults of the child, ``getrusage``).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import symdae  # noqa: E402
from _common import CLOCKS, machine_line, shuffled_times, timing_parser  # noqa: E402
from symdae.costs.time_domain import LeastSquares  # noqa: E402

LENGTHS = (100, 10_000)


def general_start(backend, fn):
    """fn run with the initial state from the general path (no one-call shortcut)."""
    def run():
        backend.consistent_start = lambda *args: None
        try:
            return fn()
        finally:
            del backend.consistent_start          # the class's method again
    return run


def contenders(system, ns) -> dict:
    backend = system.backend
    out = {}
    for steps in LENGTHS:
        sc = symdae.Scenario.make(ns["SCENARIO"], q0=np.zeros(4), v0=np.zeros(4))
        sc = sc.replace(t_end=steps * sc.h)
        data = system.simulate(sc).outputs["a1"].copy()
        exp = symdae.Experiment(system, LeastSquares({"a1": data}, ["a1"]), sc)
        tr = system.simulate(sc, params=ns["START"])
        x0, fwd = tr.sweep.x0, tr.sweep.forward      # internals: the bare sweep's inputs
        grid, U = sc.grid(), fwd.U

        def J(exp=exp):
            return exp.evaluate(ns["START"])

        def JG(exp=exp):
            return exp.evaluate(ns["START"], gradient=True)

        def bare(grid=grid, fwd=fwd, U=U, x0=x0, sc=sc):
            backend.forward(grid, fwd.p, U, (x0.q, x0.v, x0.a, x0.lam), sc.rtol, sc.max_iter,
                            False)

        out.update({(steps, "J"): J, (steps, "J + gradient"): JG,
                    (steps, "bare forward sweep"): bare,
                    (steps, "J, general initial state"): general_start(backend, J)})
    return out


class _Recording:
    """The compiled core with its forward calls recorded (the arguments of the last)."""

    def __init__(self, module):
        self.module, self.args = module, None

    def __getattr__(self, name):
        return getattr(self.module, name)

    def forward(self, *args):
        self.args = args
        return self.module.forward(*args)


def small_contenders() -> dict:
    """J, J + gradient, backend.forward and the compiled sweep alone on the two-mass
    oscillator's scenario (the model's own start values, data at its nominal values)."""
    model, ns = symdae.load_model("two_mass_oscillator")
    system = symdae.compile_model(model)
    backend, sc = system.backend, ns["SCENARIO"]
    outs = list(ns["OUTPUTS"])
    ref = system.simulate(sc)
    data = {k: ref.outputs[k].copy() for k in outs}
    exp = symdae.Experiment(system, LeastSquares(data, outs), sc)
    params = ns["START"]
    prep = exp.prepared()
    rec = backend.hht = _Recording(backend.hht)
    try:
        tr = system.run(prep, {**exp.params, **params})
    finally:
        backend.hht = rec.module
    x0, fwd, args = tr.sweep.x0, tr.sweep.forward, rec.args
    hht = rec.module
    nm = system.sizes.n + system.sizes.m
    # the round-off levels and LU orders among the core's arguments (hht.pyx's forward)
    if args[22].shape != (2 * nm + 1,) or args[23].dtype != np.intc:
        raise RuntimeError("hht.forward's arguments moved: update small_contenders")

    def compiled():
        # fresh round-off levels and LU orders, as backend.forward makes for a run's start
        call = list(args)
        call[22], call[23] = np.zeros_like(args[22]), np.zeros_like(args[23])
        hht.forward(*call)

    def forward():
        backend.forward(prep.grid, fwd.p, prep.U, (x0.q, x0.v, x0.a, x0.lam), sc.rtol,
                        sc.max_iter, False)

    return {"compiled forward sweep": compiled, "backend.forward": forward,
            "J": lambda: exp.evaluate(params),
            "J + gradient": lambda: exp.evaluate(params, gradient=True)}


_POOL_CHILD = r"""
import json, resource, sys, time
import numpy as np
import symdae
from symdae.costs.time_domain import LeastSquares
from symdae.simulation.backends.workspace import ArrayPool

model, ns = symdae.load_model("engine_mount")
system = symdae.compile_model(model)
if sys.argv[1] == "without":
    system.backend.pool = ArrayPool(max_bytes=0)
sc = symdae.Scenario.make(ns["SCENARIO"], q0=np.zeros(4), v0=np.zeros(4))
data = system.simulate(sc).outputs["a1"].copy()
exp = symdae.Experiment(system, LeastSquares({"a1": data}, ["a1"]), sc)
clock = {"wall": time.perf_counter, "cpu": time.thread_time}[sys.argv[2]]
def pair():
    exp.evaluate(ns["START"])
    exp.evaluate(ns["START"], gradient=True)
for _ in range(5):
    pair()
faults, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, clock()
for _ in range(30):
    pair()
print(json.dumps({"s": (clock() - t0) / 60,
                  "faults": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / 60}))
"""


def pool_children(clock: str, children: int = 3) -> dict:
    """{label: (time per evaluation, page faults per evaluation)}: medians over ``children``
    fresh processes each with the pool and without (alternating)."""
    runs = {"with the pool": [], "without": []}
    for _ in range(children):
        for label, arg in (("with the pool", "with"), ("without", "without")):
            out = subprocess.run([sys.executable, "-c", _POOL_CHILD, arg, clock],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs[label].append((r["s"], r["faults"]))
    return {k: (float(np.median([t for t, _ in v])), float(np.median([f for _, f in v])))
            for k, v in runs.items()}


def main(argv=None) -> int:
    args = timing_parser(__doc__.splitlines()[0], 15, 61, "cpu").parse_args(argv)
    reps = args.reps or (15 if args.quick else 61)
    print(machine_line())
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    funcs = contenders(system, ns)
    small = small_contenders()
    t = shuffled_times({**{f"{k[0]}|{k[1]}": f for k, f in funcs.items()},
                        **{f"small|{k}": f for k, f in small.items()}}, reps,
                       CLOCKS[args.clock])
    med = {k: float(np.median(v)) for k, v in t.items()}
    low = {k: float(np.min(v)) for k, v in t.items()}
    print(f"{args.clock} time, {reps} interleaved rounds (median [min]):")
    for steps in LENGTHS:
        bare = med[f"{steps}|bare forward sweep"]
        print(f"\n{steps} steps")
        for name in ("bare forward sweep", "J", "J + gradient", "J, general initial state"):
            k = f"{steps}|{name}"
            print(f"  {name:30s} {med[k] * 1e6:9.1f} us [{low[k] * 1e6:9.1f}]  "
                  f"{med[k] / bare:5.2f} x the bare sweep")
        J, JG = med[f"{steps}|J"], med[f"{steps}|J + gradient"]
        print(f"  J beyond the bare sweep {(J - bare) * 1e6:.1f} us; (J + gradient) / J "
              f"{JG / J:.2f}; with the general initial state J x "
              f"{med[f'{steps}|J, general initial state'] / J:.2f}")
    sweep = med["small|compiled forward sweep"]
    print("\ntwo-mass oscillator, 1 000 steps (the model's start values, an input)")
    for name in small:
        k = f"small|{name}"
        print(f"  {name:30s} {med[k] * 1e6:9.1f} us [{low[k] * 1e6:9.1f}]  "
              f"{med[k] / sweep:5.2f} x the compiled sweep")
    J, JG = med["small|J"], med["small|J + gradient"]
    print(f"  J beyond the compiled sweep {(J - sweep) * 1e6:.1f} us "
          f"({(J - sweep) / J:.0%} of J); (J + gradient) / J {JG / J:.2f}")
    long = LENGTHS[-1]
    pool = pool_children(args.clock)
    print(f"\narray pool ({long} steps, J and J + gradient alternating, 30 rounds in each of "
          "three fresh processes):")
    for label, (sec, faults) in pool.items():
        print(f"  {label:14s} {sec * 1e3:6.3f} ms per evaluation, {faults:5.0f} page faults")
    return 0


if __name__ == "__main__":
    sys.exit(main())
