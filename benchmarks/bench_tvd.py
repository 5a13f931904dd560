"""The four-cylinder engine with TVD (26 coordinates, 16 constraints): build, load, step time,
J + gradient of an order cost against the forward run, and the memory of the gradient.

    python benchmarks/bench_tvd.py [--quick] [--reps N] [--memory reduced|full|none]

1. Cold build of models/four_cylinder_tvd.py into a temporary cache (derive, emit, compile
   from build_info; the model file's own SymPy construction timed apart), warm loads from it
   (``compile()`` only) in this process and in fresh subprocesses. Targets: <= 60 s, <= 0.3 s.
2. Forward sweep per HHT step on a 1 s run-up (3900 -> 4700 rpm, h = 2e-5, 50 000 steps),
   interleaved with the engine-mount reference scenario (10 000 steps, h = 1e-4), as us per
   step and their ratio, with Newton iterations, factorisations and Jacobian refreshes per step
   (target 20 us per step), and again with the Newton matrix's LU in the core's sparse loops
   instead of the kernel module's written-out code (Kernels.model_lu = False).
3. On the same run: the order cost (eq. 5, orders 4, 6, 8 at 13 speed points, Hann windows of
   two cycles) alone, the forward sweep storing every step's factorisation, the adjoint sweep
   alone on that stored trajectory, J (simulate + cost), J + adjoint gradient by the default
   path (``Experiment.evaluate``: the states are kept and the adjoint refactorises; a run
   beyond the memory budget is checkpointed) and by storing every factorisation, interleaved;
   ratios to the plain forward sweep (target J + gradient <= 1.5 x forward).
4. Peak memory (VmHWM of a child process) over the reduced run-up (425 000 steps) or the full
   one (1.3 million): the forward run alone, the default gradient, the gradient with a 128 MB
   budget (checkpointed segments), and (reduced only) the gradient storing every
   factorisation.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

import symdae
from _common import (  # benchmarks/_common.py (the script folder is on sys.path)
    interleaved_times as interleaved,
    machine_line,
    with_core_lu,
)
from symdae import Measurement, adjoint_gradient
from symdae.costs.orders import OrderAnalysis, OrderCost, RunUp

_WARM_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import symdae
model, _ = symdae.load_model("four_cylinder_tvd")
t1 = time.perf_counter()
system = symdae.compile_model(model, cache_dir=sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"import_and_model_file_s": t1 - t0, "compile_s": t2 - t1,
                  "cache_hit": system.build_info["cache_hit"]}))
"""

_MEMORY_CHILD = r"""
import json, sys, time
import symdae
from symdae.simulation.checkpoint import cost_and_gradient
from symdae.costs.orders import OrderAnalysis, OrderCost, RunUp
which, mode, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]) or None
model, ns = symdae.load_model("four_cylinder_tvd")
system = symdae.compile_model(model)
if which == "full":
    params, sc, band, step = {}, ns["SCENARIO"], ns["BAND_RPM"], ns["SPEED_STEP_RPM"]
else:
    params, sc = dict(ns["REDUCED"]), ns["REDUCED_SCENARIO"]
    band, step = ns["REDUCED_BAND_RPM"], ns["REDUCED_SPEED_STEP_RPM"]
values = dict(zip(model.parameter_names, model.nominal_values)) | params
an = OrderAnalysis.over_band(RunUp.of(values), band, step, (6,))
cost = OrderCost("twist", an, [[1e-3] * an.n_speeds])       # any data of the right shape
t0 = time.perf_counter()
out = {"steps": sc.n_steps}
if mode == "forward":
    system.simulate(sc, params={**params, **ns["START"]})
elif mode == "stored":       # every step's factorisation kept, then the adjoint
    tr = system.simulate(sc, params={**params, **ns["START"]}, store_factorizations=True)
    symdae.adjoint_gradient(system, tr, cost.evaluate(system, tr)[1])
else:                        # the default gradient path (checkpointed beyond the budget)
    run = cost_and_gradient(system, sc, cost, {**params, **ns["START"]}, memory_budget=budget)
    out.update(segments=run.plan.segments, recomputed_steps=run.recomputed_steps)
out["wall_s"] = time.perf_counter() - t0
# the peak resident set of this process image (VmHWM; ru_maxrss can carry the parent's over
# fork and exec)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
out["peak_gb"] = int(hwm) / 2**20
print(json.dumps(out))
"""

RUN = {"n0": 3900.0, "n1": 4700.0, "t0": 0.05, "t1": 0.95}


def build(fresh_runs: int) -> dict:
    t0 = time.perf_counter()
    model, _ = symdae.load_model("four_cylinder_tvd")
    t_file = time.perf_counter() - t0
    out = {"model_file_s": t_file}
    with tempfile.TemporaryDirectory(prefix="symdae-bench-tvd-") as cache:
        t0 = time.perf_counter()
        system = symdae.compile_model(model, cache_dir=cache)
        out["cold_s"] = time.perf_counter() - t0
        assert not system.build_info["cache_hit"]
        out.update({k: system.build_info[k] for k in ("derive_s", "emit_s", "compile_s")})
        warm = []
        for _ in range(5):
            t0 = time.perf_counter()
            assert symdae.compile_model(model, cache_dir=cache).build_info["cache_hit"]
            warm.append(time.perf_counter() - t0)
        out["warm_s"] = warm
        fresh, imports = [], []
        for _ in range(fresh_runs):
            res = json.loads(subprocess.run([sys.executable, "-c", _WARM_CHILD, cache],
                                            capture_output=True, text=True, check=True
                                            ).stdout.strip().splitlines()[-1])
            assert res["cache_hit"]
            fresh.append(res["compile_s"])
            imports.append(res["import_and_model_file_s"])
        out["fresh_s"], out["fresh_import_s"] = fresh, imports
    return out


def stats(x, scale=1.0) -> str:
    x = np.asarray(x) * scale
    return f"{np.median(x):.3g} (min {np.min(x):.3g})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, no cold build")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--memory", choices=["reduced", "full", "none"], default="reduced")
    args = ap.parse_args(argv)
    reps = args.reps or (3 if args.quick else 7)
    print(machine_line())

    if not args.quick:
        b = build(3)
        print(f"\n1. build: cold {b['cold_s']:.1f} s (derive {b['derive_s']:.1f}, emit "
              f"{b['emit_s']:.1f}, compile {b['compile_s']:.1f}; the model file's SymPy "
              f"construction {b['model_file_s']:.2f} s apart) [target <= 60 s]")
        print(f"   warm load (compile() from the cache): in process {stats(b['warm_s'])} s, "
              f"fresh subprocess {stats(b['fresh_s'])} s [target <= 0.3 s]; import symdae + "
              f"model file {stats(b['fresh_import_s'])} s")

    model, ns = symdae.load_model("four_cylinder_tvd")
    system = symdae.compile_model(model)
    sc = symdae.Scenario(t_end=0.95, h=2e-5, alpha=-0.05)
    em_model, em_ns = symdae.load_model("engine_mount")
    em = symdae.compile_model(em_model)
    em_sc = em_ns["SCENARIO"]
    data = Measurement.from_trajectory(system.simulate(sc, params=RUN), ["twist"])
    an = OrderAnalysis.over_band(RunUp.of(RUN), (4000.0, 4600.0), 50.0, (4, 6, 8))
    cost = OrderCost("twist", an, data, amplitude_scale="data")
    params = {**RUN, **ns["START"]}
    stored = system.simulate(sc, params=params, store_factorizations=True)
    counters = stored.counters

    def forward():
        system.simulate(sc, params=params)

    def J():
        cost.evaluate(system, system.simulate(sc, params=params))

    exp = symdae.Experiment(system, cost, sc, params=RUN)

    def J_grad():        # the default path: states kept, the adjoint refactorises
        exp.evaluate(ns["START"], gradient=True)

    def J_grad_stored():
        tr = system.simulate(sc, params=params, store_factorizations=True)
        adjoint_gradient(system, tr, cost.evaluate(system, tr)[1])

    dS_stored = cost.evaluate(system, stored)[1]
    t = interleaved({"tvd forward": forward, "engine-mount forward": lambda: em.simulate(em_sc),
                     "tvd forward, core LU loops": with_core_lu(system.backend.kernels,
                                                                forward),
                     "J + gradient, core LU loops": with_core_lu(system.backend.kernels, J_grad),
                     "order cost alone": lambda: cost.evaluate(system, stored),
                     "forward, storing": lambda: system.simulate(sc, params=params,
                                                                 store_factorizations=True),
                     "adjoint alone": lambda: adjoint_gradient(system, stored, dS_stored),
                     "J": J, "J + gradient": J_grad,
                     "J + gradient, storing": J_grad_stored}, reps)
    N, N_em = sc.n_steps, em_sc.n_steps
    fw = np.array(t["tvd forward"])
    ref = np.median(t["engine-mount forward"]) / N_em
    per = {k: v / N for k, v in counters.items() if k != "steps"}
    print(f"\n2. forward, {N} steps of h = {sc.h:g} (26 coordinates, 16 constraints, 42 x 42 "
          f"Newton matrix): {stats(fw, 1e6 / N)} us per step [target <= 20 us]; "
          f"engine mount (4 x 4 + 1) {stats(t['engine-mount forward'], 1e6 / N_em)} us per "
          f"step; ratio of medians {np.median(fw) / N / ref:.1f}")
    print("   per step: " + ", ".join(f"{k} {v:.2f}" for k, v in per.items()))
    print(f"   with the core's LU loops instead of the module's written-out LU: "
          f"{stats(t['tvd forward, core LU loops'], 1e6 / N)} us per step; written-out / "
          f"loops {np.median(fw) / np.median(t['tvd forward, core LU loops']):.2f}")
    print(f"\n3. order cost ({an.n_speeds} speed points x orders {list(an.orders)}), ratios to "
          "the forward sweep (medians):")
    for k in ("order cost alone", "forward, storing", "adjoint alone", "J",
              "J + gradient, storing", "J + gradient"):
        print(f"   {k:18s} {stats(t[k])} s  ratio {np.median(t[k]) / np.median(fw):.2f}"
              + ("  [target <= 1.5]" if k == "J + gradient" else ""))
    jg, jg_loops = np.median(t["J + gradient"]), np.median(t["J + gradient, core LU loops"])
    print(f"   J + gradient per step {jg / N * 1e6:.2f} us; with the core's LU loops "
          f"{jg_loops / N * 1e6:.2f} us (written-out / loops {jg / jg_loops:.2f})")

    if args.memory != "none":
        print(f"\n4. memory ({args.memory} run-up), child processes (peak resident set):")
        for mode, budget in (("forward", 0), ("gradient", 0), ("gradient", 2**27),
                             ("stored", 0)):
            if mode == "stored" and args.memory == "full":
                continue          # 19 GB: measured once, see the README
            res = json.loads(subprocess.run(
                [sys.executable, "-c", _MEMORY_CHILD, args.memory, mode, str(budget)],
                capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
            label = {"forward": "forward only", "stored": "gradient, storing factorisations",
                     "gradient": "gradient (default path)" if not budget else
                     f"gradient, budget {budget / 2**20:.0f} MB"}[mode]
            extra = (f", {res['segments']} segment(s), {res['recomputed_steps']} steps "
                     "recomputed" if "segments" in res else "")
            print(f"   {label:34s}: {res['peak_gb']:.2f} GB for {res['steps']} steps "
                  f"({res['peak_gb'] * 2**30 / res['steps'] / 1e3:.2f} kB per step), "
                  f"{res['wall_s']:.1f} s{extra}")
    print(f"\n(this process: peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
