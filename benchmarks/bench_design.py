"""Optimal input design: the cost of the Fisher information and of the exact design gradient
against one forward sweep, the paper's two designs, and the full Monte Carlo table.

1. Cost of F for 4 parameters relative to one forward simulation (goal: <= 2x):
   simulate with factorisations + tangent sweep (4 directions) + F, interleaved with a plain
   simulation. Two-mass oscillator (c1, c2, d1, d2; 1000 steps) and cart pendulum (sp, dp, Jp,
   dc; 2000 steps).
2. Cost of one design gradient (forward with factorisations + tangent + reverse-over-tangent
   sweep + criterion) relative to one forward simulation, for 1, 2 and 4 parameters (goal:
   <= 4x for one parameter, linear in the parameters; spec 8.2.5: <= 2 n_b + 3), and the
   sweeps alone (backend calls, no Python around them).
3. The paper's designs (two-mass: c2 from x2, end velocities zero; cart pendulum: sp, dp from
   phi, end conditions on phi, vc, phidot): iterations, evaluations, wall time, the spec's
   acceptance numbers (8.3, 8.4).
4. Monte Carlo (spec 6.4, 7.3): start input F0, comparison sine and the optimum; two-mass
   sigma 1e-6 and 1e-4 m (200 runs each), cart pendulum sigma 0.01 rad (200 runs), least
   squares from START, threads; sample std against the Cramer-Rao bound (the spec's band:
   +-20 %) and the std ratios (bands: >= 5 two-mass, >= 3 cart).

python benchmarks/bench_design.py [--quick] [--reps N] [--runs N]
"""
from __future__ import annotations

import argparse
import statistics as stats_lib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import symdae  # noqa: E402
from _common import interleaved_times as interleaved, machine_line  # noqa: E402
from symdae.design.gradients import tangent_arrays  # noqa: E402
from symdae.design.problem import DesignProblem  # noqa: E402
from symdae.design.study import compare_monte_carlo, model_design, study_inputs  # noqa: E402
from symdae.identification.fisher import fisher_information, output_sensitivities  # noqa: E402
from symdae.simulation.backends.design import design_adjoint  # noqa: E402

FOUR = {"two_mass_oscillator": ["c1", "c2", "d1", "d2"],
        "cart_pendulum": ["sp", "dp", "Jp", "dc"]}


def load(name):
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sc = ns["SCENARIO"].replace(inputs=ns["DESIGN"]["start_input"])
    return system, ns, sc


def ratio_line(times: dict, ref: str, key: str) -> str:
    med = stats_lib.median(times[key]) / stats_lib.median(times[ref])
    mins = min(times[key]) / min(times[ref])
    return f"{med:5.2f} (min/min {mins:5.2f})"


# ---------------------------------------------------------------------------- 1. cost of F
def bench_fisher(reps: int) -> None:
    print("\n1. Fisher information for 4 parameters against one forward simulation "
          f"({reps} interleaved repetitions; goal <= 2)")
    for name, free in FOUR.items():
        system, ns, sc = load(name)
        p = ns["START"]

        def forward(system=system, sc=sc, p=p):
            system.simulate(sc, params=p)

        def fisher(system=system, sc=sc, p=p, free=free, ns=ns):
            traj = system.simulate(sc, params=p, store_factorizations=True)
            fisher_information(output_sensitivities(system, traj, free, ns["OUTPUTS"]))

        t = interleaved({"forward": forward, "F": fisher}, reps)
        fwd_ms = 1e3 * stats_lib.median(t["forward"])
        print(f"  {name:20s} ({sc.n_steps} steps): forward {fwd_ms:6.2f} ms, "
              f"F(4 parameters) / forward {ratio_line(t, 'forward', 'F')}")


# ---------------------------------------------------------------------------- 2. gradient cost
def bench_gradient(reps: int) -> None:
    print("\n2. one design gradient (trace criterion + end penalty) against one forward "
          f"simulation ({reps} interleaved repetitions; goal <= 4 for one parameter, linear)")
    for name, four in FOUR.items():
        system, ns, sc = load(name)
        p = ns["START"]
        U = system.input_array(sc.inputs, sc.times)
        funcs = {"forward": lambda system=system, sc=sc, p=p: system.simulate(sc, params=p)}
        sweeps = {}
        for nb in (1, 2, 4):
            prob = DesignProblem(system, sc, four[:nb], ns["OUTPUTS"], params=p,
                                 end=ns["DESIGN"]["end"])
            funcs[f"gradient nb={nb}"] = lambda prob=prob: prob.evaluate(prob.U_start)
            # the sweeps alone, on the backend (no Python around them)
            traj = prob.simulate(U, store_factorizations=True)
            tg = symdae.tangent(system, traj, four[:nb])
            fwd = traj.sweep.forward
            grid, x0 = fwd.grid, traj.sweep.x0
            be = system.backend
            dS = np.ones((grid.N + 1, system.sizes.n_s, nb)) * 1e-3
            arrays = tangent_arrays(tg)
            dx0 = tuple(np.ascontiguousarray(a[0]) for a in (arrays.dq, arrays.dv, arrays.da,
                                                             arrays.dlam))
            sweeps[nb] = {
                "forward sweep": lambda be=be, fwd=fwd, x0=x0, sc=sc: be.forward(
                    fwd.grid, fwd.p, fwd.U, (x0.q, x0.v, x0.a, x0.lam), sc.rtol, sc.max_iter,
                    False),
                "forward sweep (stored)": lambda be=be, fwd=fwd, x0=x0, sc=sc: be.forward(
                    fwd.grid, fwd.p, fwd.U, (x0.q, x0.v, x0.a, x0.lam), sc.rtol, sc.max_iter,
                    True),
                "tangent sweep": lambda be=be, fwd=fwd, D=tg.D, dx0=dx0: be.tangent(fwd, D, dx0),
                "design sweep": lambda be=be, fwd=fwd, D=tg.D, a=arrays, dS=dS: design_adjoint(
                    be, fwd, D, a, dS),
            }
        t = interleaved(funcs, reps)
        fwd_ms = 1e3 * stats_lib.median(t["forward"])
        print(f"  {name} ({sc.n_steps} steps), forward simulation {fwd_ms:.2f} ms; "
              "DesignProblem.evaluate (simulate + tangent + F + criterion + design sweep):")
        for nb in (1, 2, 4):
            r = ratio_line(t, "forward", f"gradient nb={nb}")
            print(f"    nb = {nb}: gradient / forward {r}   (spec bound 2 nb + 3 = {2 * nb + 3})")
        print("    the sweeps alone (backend calls), relative to the forward sweep:")
        for nb in (1, 2, 4):
            ts = interleaved(sweeps[nb], reps)
            parts = ", ".join(f"{k} {ratio_line(ts, 'forward sweep', k)}"
                              for k in ("forward sweep (stored)", "tangent sweep",
                                        "design sweep"))
            tot = [a + b + c for a, b, c in zip(ts["forward sweep (stored)"],
                                                ts["tangent sweep"], ts["design sweep"])]
            print(f"    nb = {nb}: {parts}; all three / forward "
                  f"{stats_lib.median(tot) / stats_lib.median(ts['forward sweep']):5.2f}")


# ---------------------------------------------------------------------------- 3. designs
def bench_designs() -> dict:
    print("\n3. the paper's designs (trace criterion, relative scaling, eta = 1, R = I, "
          "arctan map, L-BFGS-B, gamma_end = 1e3, stop at < 1e-6 change over 20 iterations)")
    out = {}
    for name in ("two_mass_oscillator", "cart_pendulum"):
        model, ns = symdae.load_model(name)
        system = symdae.compile_model(model)
        d = model_design(model, ns, system=system, progress=False)
        out[name] = (system, ns, d)
        print("\n" + d.summary())
        traj = d.problem.simulate(d.U)
        opt = d.optimal.fisher.scaled
        if name == "two_mass_oscillator":
            at_truth = DesignProblem(system, ns["SCENARIO"], "c2", "x2", params={"c2": 1100.0})
            g1100 = (at_truth.evaluate(d.U, gradient=False).fisher.matrix[0, 0]
                     / at_truth.evaluate(d.start.U, gradient=False).fisher.matrix[0, 0])
            rel_end = {v: abs(traj.outputs[v][-1]) / np.max(np.abs(traj.outputs[v]))
                       for v in ("v1", "v2")}
            print(f"  spec 8.3: M(Fopt)/M(F0) = {d.gain():.1f} at c2 = 1000 (band >= 50; "
                  f"[H] 90.6), {g1100:.1f} at c2 = 1100 ([H] 86.0); max|F| = "
                  f"{np.max(np.abs(d.input('F'))):.6f} <= 1; saturated "
                  f"{100 * d.saturation['F']:.1f} % "
                  f"(>= 95 %); |v(tf)| / max|v| = {rel_end['v1']:.2e}, {rel_end['v2']:.2e} "
                  "(<= 1e-3)")
        else:
            comp = d.comparisons["sine"].fisher.scaled
            print(f"  spec 8.4: tr F~(Fopt)/tr F~(Fcomp) = {np.trace(opt) / np.trace(comp):.1f} "
                  f"(band >= 10; [H] 33); diagonal ratios "
                  f"{np.round(np.diag(opt) / np.diag(comp), 1).tolist()} (>= 5); terminal "
                  "residuals / scale: " + ", ".join(
                      f"{k} {abs(r['relative_residual']):.1e}"
                      for k, r in d.optimal.terminal.items()) + " (<= 1e-2); F~(Fopt) = "
                  f"{np.round(opt, 3).tolist()}, det {np.linalg.det(opt):.1f} vs "
                  f"{np.linalg.det(comp):.3f}")
    return out


# ---------------------------------------------------------------------------- 4. Monte Carlo
def bench_monte_carlo(designs: dict, runs: int, threads: int) -> None:
    print(f"\n4. Monte Carlo: {runs} runs per input and noise level, least_squares from START, "
          f"seed 12345, threads({threads})")
    plan = {"two_mass_oscillator": (["x2"], (1e-6, 1e-4), ["start", "sine", "optimal"]),
            "cart_pendulum": (["phi"], (0.01,), ["start", "sine", "optimal"])}
    with ThreadPoolExecutor(threads) as pool:
        for name, (outputs, sigmas, labels) in plan.items():
            system, ns, d = designs[name]
            inputs = {k: v for k, v in study_inputs(d).items() if k in labels}
            for sigma in sigmas:
                t0 = time.perf_counter()
                mc = compare_monte_carlo(system, ns["SCENARIO"], inputs, outputs, ns["FREE"],
                                         ns["START"], sigma, runs, executor=pool)
                wall = time.perf_counter() - t0
                print(f"\n  {name}, sigma {sigma:g} ({wall:.1f} s)")
                print(f"  {'input':>8s} {'param':>6s} {'mean':>14s} {'std':>11s} "
                      f"{'CRLB':>11s} {'std/CRLB':>9s} {'in +-20 %':>9s} {'GN it. med/max':>15s}")
                for label, r in mc.items():
                    for j, k in enumerate(r.parameters):
                        q = r.std[j] / r.predicted[j]
                        print(f"  {label:>8s} {k:>6s} {r.mean[j]:14.8g} {r.std[j]:11.4e} "
                              f"{r.predicted[j]:11.4e} {q:9.3f} {str(abs(q - 1) <= 0.2):>9s} "
                              f"{np.median(r.iterations):7.0f} / {r.iterations.max():<4d}")
                ref = "start" if name == "two_mass_oscillator" else "sine"
                ratio = mc[ref].std / mc["optimal"].std
                print(f"  std({ref}) / std(optimal): "
                      + ", ".join(f"{k} {x:.2f}" for k, x in zip(mc[ref].parameters, ratio))
                      + f" (band >= {5 if name == 'two_mass_oscillator' else 3})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and runs")
    ap.add_argument("--reps", type=int, help="interleaved repetitions of the timings")
    ap.add_argument("--runs", type=int, help="Monte Carlo runs per input (default 200)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    reps = args.reps or (5 if args.quick else 21)
    print(machine_line())
    bench_fisher(reps)
    bench_gradient(reps)
    designs = bench_designs()
    bench_monte_carlo(designs, args.runs or (40 if args.quick else 200), args.threads)


if __name__ == "__main__":
    main()
