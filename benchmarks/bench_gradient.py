"""Cost of the exact gradient: J alone vs J + discrete-adjoint gradient, and identification.

    python benchmarks/bench_gradient.py [--quick] [--reps N]

1. Engine-mount reference scenario (h = 1e-4, 10 000 steps, alpha = -0.1) at the paper's start
   values, least squares on a1 against synthetic data from the true values:
   J alone (simulate + cost), J + adjoint gradient (simulate storing the factorisations +
   cost + adjoint sweep), their ratio, and for comparison the tangent-linear gradient along
   the 4 free parameters and a central finite-difference gradient (8 extra simulations).
2. Gradient cost with 4 vs 40 parametrised elements of the spring chain (20 masses, same
   mechanics; the adjoint computes dJ/dp for all parameters in one backward sweep).
3. Engine-mount identification from the paper's start values, warm cache.

Timings are medians (and minima) of interleaved repetitions after a warm-up: on a shared
virtual machine single runs vary by tens of percent.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import symdae
from _common import (  # benchmarks/_common.py (the script folder is on sys.path)
    interleaved,
    machine_line,
)
from symdae import Experiment, Scenario, identify
from symdae.costs.time_domain import LeastSquares
from symdae.data.measurement import Measurement
from symdae.simulation.sensitivity import adjoint_gradient, tangent

# the goals: J + gradient <= 8 ms, (J + gradient) / J <= 1.3, J + gradient with 40 parameters
# <= 1.3 times that with 4, identification to 1e-10 in <= 0.6 s
TARGETS = {"jg_ms": 8.0, "ratio": 1.3, "ratio_40_4": 1.3, "identify_s": 0.6}


def fmt(pair, unit=1e3, suffix="ms"):
    return f"{pair[0] * unit:8.2f} {suffix} (min {pair[1] * unit:.2f})"


def engine_mount(reps: int) -> dict:
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    T, h, alpha = 1.0, 1e-4, -0.1
    data = Measurement.from_trajectory(system.simulate(t_end=T, h=h, alpha=alpha), ["a1"])
    cost = LeastSquares(data, ["a1"])
    start = ns["START"]
    free = ns["FREE"]
    idx = [model.parameter_names.index(k) for k in free]

    def J(params=start):
        return cost.evaluate(system, system.simulate(t_end=T, h=h, alpha=alpha, params=params))[0]

    def JG():
        tr = system.simulate(t_end=T, h=h, alpha=alpha, params=start)
        j, dS = cost.evaluate(system, tr)
        return j, adjoint_gradient(system, tr, dS)[idx]

    def TLM():
        tr = system.simulate(t_end=T, h=h, alpha=alpha, params=start)
        j, dS = cost.evaluate(system, tr)
        return np.einsum("is,isd->d", dS, tangent(system, tr, free).ds)

    def FD(rel=1e-4):
        g = []
        for k in free:
            e = rel * abs(start[k])
            g.append((J({**start, k: start[k] + e}) - J({**start, k: start[k] - e})) / (2 * e))
        return np.array(g)

    t = interleaved({"J": J, "J+grad": JG}, reps)
    t.update(interleaved({"J+tangent": TLM, "FD gradient": FD}, max(3, reps // 4)))
    _, g = JG()
    fd = FD()
    return {"times": t, "grad": g, "fd": fd, "tlm": TLM(), "free": free}


def chain(reps: int, T: float) -> dict:
    import runpy

    from symdae.model.files import bundled_model_path

    make_chain = runpy.run_path(str(bundled_model_path("spring_chain")))["make_chain"]
    out = {}
    for k in (2, 20):   # 2 or 20 parametrised elements: 4 or 40 element parameters
        system = symdae.compile_model(make_chain(20, k))
        ref = system.simulate(t_end=T, h=1e-4, alpha=-0.1)
        cost = LeastSquares({"x_end": ref.outputs["x_end"] * 1.01})

        def J(system=system, cost=cost):
            return cost.evaluate(system, system.simulate(t_end=T, h=1e-4, alpha=-0.1))[0]

        def JG(system=system, cost=cost):
            tr = system.simulate(t_end=T, h=1e-4, alpha=-0.1)
            return adjoint_gradient(system, tr, cost.evaluate(system, tr)[1])

        t = interleaved({"J": J, "J+grad": JG}, reps)
        out[2 * k] = {"times": t, "n_p": system.sizes.n_p}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, shorter chain run")
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions")
    args = ap.parse_args()
    reps = args.reps or (7 if args.quick else 25)
    print(machine_line())
    print(f"software: Python {sys.version.split()[0]}, NumPy {np.__version__}, "
          f"symdae {symdae.__version__}; {reps} interleaved repetitions, median (min)\n")

    em = engine_mount(reps)
    t = em["times"]
    ratio = t["J+grad"][0] / t["J"][0]
    ratio_min = t["J+grad"][1] / t["J"][1]
    print("engine mount, reference scenario (10 000 steps), 4 free parameters, start values")
    rows = [
        ("J alone (simulate + cost)", fmt(t["J"]), ""),
        ("J + adjoint gradient", fmt(t["J+grad"]), f"<= {TARGETS['jg_ms']:g} ms"),
        ("  ratio (J + gradient) / J", f"{ratio:8.2f}    (min/min {ratio_min:.2f})",
         f"<= {TARGETS['ratio']:g}"),
        ("J + tangent-linear gradient", fmt(t["J+tangent"]), ""),
        ("central FD gradient (8 runs)", fmt(t["FD gradient"]), ""),
    ]
    for a, b, c in rows:
        print(f"  {a:32s} {b:34s} {c}")
    rel_t = np.max(np.abs(em["grad"] - em["tlm"]) / np.abs(em["grad"]))
    rel_f = np.max(np.abs(em["grad"] - em["fd"]) / np.abs(em["grad"]))
    print(f"  gradient check: |adjoint - tangent| / |adjoint| <= {rel_t:.1e}, "
          f"|adjoint - FD(1e-4)| / |adjoint| <= {rel_f:.1e}\n")

    T = 0.2 if args.quick else 0.5
    ch = chain(reps, T)
    r4 = ch[4]["times"]["J+grad"][0]
    r40 = ch[40]["times"]["J+grad"][0]
    print(f"spring chain, 20 masses, h = 1e-4, {int(round(T / 1e-4))} steps "
          "(the adjoint returns dJ/dp for every parameter)")
    for k in (4, 40):
        tt = ch[k]["times"]
        print(f"  {k:2d} element parameters (n_p = {ch[k]['n_p']:2d}): J {fmt(tt['J'])}, "
              f"J + grad {fmt(tt['J+grad'])}, ratio {tt['J+grad'][0] / tt['J'][0]:.2f}")
    print(f"  J + grad with 40 / with 4 parameters: {r40 / r4:.2f}   "
          f"(target <= {TARGETS['ratio_40_4']:g})\n")

    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    data = Measurement.from_trajectory(system.simulate(t_end=1.0, h=1e-4, alpha=-0.1), ["a1"])
    exp = Experiment(system, LeastSquares(data, ["a1"]), Scenario(t_end=1.0, h=1e-4, alpha=-0.1))
    truth = dict(zip(model.parameter_names, model.nominal_values))
    print("engine-mount identification from the paper's start values (warm cache)")
    for method in ("auto", "L-BFGS-B"):      # auto: Gauss-Newton with the tangent Jacobian
        walls = []
        for _ in range(1 if args.quick else 3):
            res = identify(exp, ns["FREE"], ns["START"], method=method, progress=False)
            walls.append(res.wall_time)
        err = max(res.relative_error(truth).values())
        print(f"  {method} ({res.method}): {res.n_iterations} iterations, {res.n_simulations} "
              f"simulations + {res.n_gradients} gradient sweeps, J {res.start_cost:.3e} -> "
              f"{res.cost:.3e}, max relative error {err:.1e}")
        print(f"    wall time {np.median(walls):.3f} s (min {np.min(walls):.3f}; "
              f"{np.median(walls) / res.n_simulations * 1e3:.2f} ms per simulation)   "
              f"(target <= {TARGETS['identify_s']:g} s)")

if __name__ == "__main__":
    main()
