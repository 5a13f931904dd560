"""Peak memory and time of J + gradient for each way of keeping what the adjoint needs.

    python benchmarks/bench_memory.py [--steps 10000,100000,1000000] [--chain 14]

Strategies (each in a fresh subprocess, so that its peak resident memory is its own):
  stored       simulate(store_factorizations=True) + adjoint_gradient: every step's
               factorisation and time terms kept (no refactorisation in the adjoint);
  states       the default of Experiment.evaluate when the states fit the budget: states kept,
               the adjoint refactorises each step's Newton matrix;
  checkpoints  symdae.simulation.checkpoint.cost_and_gradient with a budget of --budget MiB: segments
               recomputed from checkpoints (one more forward sweep).
Models: the engine mount (5 x 5 Newton matrix, the paper's scenario lengthened to the step
counts) and a chain of --chain pendula (3 x chain square Newton matrix, 42 x 42 by default).
Printed: peak RSS above the process's baseline after import and compile (MiB), wall time of
J + gradient and of J alone with the same strategy (minimum of three alternated runs, one for
10^6 steps), and the gradient's largest difference from the 'stored' one (relative).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import machine_line

CHILD = r"""
import json, resource, sys, time
import numpy as np
sys.path.insert(0, sys.argv[5])
import symdae
from symdae import LeastSquares, Scenario
from symdae.simulation.checkpoint import cost_and_gradient
name, steps, strategy, budget = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
if name == "engine_mount":
    model, _ = symdae.load_model("engine_mount")
    sc = Scenario(t_end=steps * 1e-4, h=1e-4, alpha=-0.1, q0=np.zeros(4), v0=np.zeros(4))
    moved = {"cE1": 7.38e4, "cE2": 4.0e9, "dE": 0.5, "dH2": 1.2}
    out = "a1"
else:
    from pendulum_chain import make_chain
    model = make_chain(int(name.split("_")[-1]))
    sc = Scenario(t_end=steps * 1e-3, h=1e-3, alpha=-0.1)
    moved = {"l": 0.31, "d": 0.06}
    out = "y_end"
system = symdae.compile_model(model)
ref = np.load(sys.argv[6]) if len(sys.argv) > 6 else None
data = {out: np.sin(np.linspace(0, 10, steps + 1))}        # any data: the cost's value is not the point
cost = LeastSquares(data, [out])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def J():
    return cost_and_gradient(system, sc, cost, moved, gradient=False,
                             memory_budget=budget if strategy == "checkpoints" else None).cost


def JG():
    if strategy == "stored":
        tr = system.simulate(sc, params=moved, store_factorizations=True)
        return symdae.adjoint_gradient(system, tr, cost.evaluate(system, tr)[1])
    return cost_and_gradient(system, sc, cost, moved,
                             memory_budget=budget if strategy == "checkpoints" else None).gradient


tJ, tG = [], []
for _ in range(3 if steps <= 100000 else 1):          # alternated; the minimum of each
    t0 = time.perf_counter(); J(); tJ.append(time.perf_counter() - t0)
    t0 = time.perf_counter(); g = JG(); tG.append(time.perf_counter() - t0)
tJ, tG = min(tJ), min(tG)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_mib": (peak - base) / 1024, "t_J": tJ, "t_JG": tG,
                  "grad": g.tolist()}))
"""


def run(name, steps, strategy, budget, ref=None):
    models = str(Path(__file__).resolve().parents[1] / "models")
    args = [sys.executable, "-c", CHILD, name, str(steps), strategy, str(budget), models]
    out = subprocess.run(args, capture_output=True, text=True, timeout=7200)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="10000,100000,1000000")
    ap.add_argument("--chain", type=int, default=14)
    ap.add_argument("--budget", type=float, default=32.0, help="MiB for 'checkpoints'")
    args = ap.parse_args()
    print(machine_line())
    budget = int(args.budget * 2**20)
    print(f"{'model':>18} {'steps':>8} {'strategy':>12} {'peak MiB':>9} {'J+grad s':>9} "
          f"{'J s':>7} {'(J+g)/J':>8} {'grad vs stored':>15}")
    for name in ("engine_mount", f"pendulum_chain_{args.chain}"):
        for steps in [int(s) for s in args.steps.split(",")]:
            if name != "engine_mount" and steps > 100000:
                continue
            ref = None
            for strategy in ("stored", "states", "checkpoints"):
                r = run(name, steps, strategy, budget)
                if "error" in r:
                    print(f"{name:>18} {steps:>8} {strategy:>12}  failed: {r['error']}")
                    continue
                g = r["grad"]
                if ref is None:
                    ref = g
                diff = max(abs(a - b) for a, b in zip(g, ref)) / max(max(map(abs, ref)), 1e-300)
                print(f"{name:>18} {steps:>8} {strategy:>12} {r['peak_mib']:>9.1f} "
                      f"{r['t_JG']:>9.3f} {r['t_J']:>7.3f} {r['t_JG'] / r['t_J']:>8.2f} "
                      f"{diff:>15.1e}", flush=True)


if __name__ == "__main__":
    main()
