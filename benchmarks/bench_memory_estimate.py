"""The memory estimate of every command against the measured peak, on three models each.

    python benchmarks/bench_memory_estimate.py [--points 100000] [--only simulate,pod]

For each command and model: the model's SCENARIO lengthened to --points grid points (so the
arrays per grid point dominate), the estimate the command checks before it allocates, then the
command itself with tracemalloc tracing every Python and NumPy allocation (the compiled sweeps
allocate only NumPy arrays). Printed: the estimate, the measured peak above the start, their
ratio (the goal: within 0.7 .. 1.3). Setup (compiling, synthetic data, Matplotlib's import)
happens before tracing. The commands:

* simulate: ``symdae simulate`` (simulate, write trajectory.csv, plot the outputs);
  symdae.cli.simulate.simulate_estimate.
* identify GN / L-BFGS-B: ``symdae.identify`` (two iterations and the statistics) on a
  LeastSquares fit of synthetic data; identification_estimate.
* symdae identify: the command (synthetic data written to data.csv, Gauss-Newton, two
  iterations, the statistics, report.json and the plots with the start and identified runs);
  symdae.cli.common.identify_estimate, which it checks before the synthetic data.
* monte carlo: ``symdae.monte_carlo`` (two runs, one at a time); monte_carlo_estimate.
* design: ``symdae.design_input`` (two iterations); design_estimate.
* frequency: ``symdae.identify`` (BFGS) with a FourierCost of eleven lines over the whole
  record (its Fourier map, two rows of every line over every sample, outweighs the
  trajectory); identification_estimate, which counts the map.
* orders: ``symdae.identify`` (L-BFGS-B) with an OrderCost on a run-up (orders 1 and 2, a
  speed point every 60 rpm); identification_estimate, which counts the cost's Fourier map.
* POD: ``symdae.identify`` with a PODCost (measured basis; the simulated basis on the beam);
  identification_estimate, which counts the cost's snapshot matrices.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import symdae  # noqa: E402
from symdae.cli.common import identify_estimate  # noqa: E402
from symdae.cli.main import main as symdae_main  # noqa: E402
from symdae.cli.simulate import simulate_estimate  # noqa: E402
from symdae.costs.fourier import Window  # noqa: E402
from symdae.costs.frequency import FourierCost  # noqa: E402
from symdae.costs.orders import OrderAnalysis, OrderCost, RunUp  # noqa: E402
from symdae.costs.time_domain import LeastSquares  # noqa: E402
from symdae.data.measurement import Measurement  # noqa: E402
from symdae.design.driver import design_estimate  # noqa: E402
from symdae.identification.identify import identification_estimate  # noqa: E402
from symdae.identification.montecarlo import monte_carlo_estimate  # noqa: E402
from symdae.plots.base import plot_outputs  # noqa: E402

# (model, free parameters or None for the model file's FREE)
SIMULATE = ("oscillator", "slider_crank", "engine_mount")
IDENTIFY = (("oscillator", ["c", "d"]), ("engine_mount", None), ("two_mass_oscillator", None))
DESIGN = ("two_mass_oscillator", "cart_pendulum", "cart_pendulum_redundant")
ORDERS = (("oscillator", ["c", "d"], "q"), ("engine_mount", ["cE1", "dE"], "a1"),
          ("two_mass_oscillator", ["c2"], "x2"))
FREQUENCY = ORDERS
POD = (("oscillator", ["c", "d"], None, "measured"),
       ("slider_crank", ["k", "d"], (1, 2), "measured"),
       ("flexible_beam", None, (1, 2), "simulated"))
COMMANDS = ("simulate", "identify", "identify_cli", "monte_carlo", "design", "frequency",
            "orders", "pod")


def traced(run) -> int:
    """The peak of what ``run()`` allocates, above what was allocated before."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def lengthened(name: str, points: int):
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    base = symdae.Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3, "alpha": -0.1})
    return model, ns, system, base.replace(t_end=base.t0 + (points - 1) * base.h)


def start_values(model, free) -> dict:
    nominal = dict(zip(model.parameter_names, model.nominal_values))
    return {k: 1.05 * nominal[k] for k in free}


def bench_simulate(points: int, folder: Path):
    plot_outputs(symdae.compile_model(symdae.load_model("oscillator")[0]).simulate(
        t_end=0.01, h=1e-3), folder / "warm.png")      # Matplotlib's import, once a process
    for name in SIMULATE:
        _, _, system, sc = lengthened(name, points)
        estimate = simulate_estimate(system.sizes, sc, plot=True).total

        def run(system=system, sc=sc, name=name):
            traj = system.simulate(sc)
            traj.to_csv(folder / f"{name}.csv")
            plot_outputs(traj, folder / f"{name}.png")
        yield "simulate", name, estimate, traced(run)


def synthetic(name: str, points: int, free):
    model, ns, system, sc = lengthened(name, points)
    free = free or list(ns["FREE"])
    outputs = list(ns.get("OUTPUTS") or model.output_names)
    data = Measurement.from_trajectory(system.simulate(sc), outputs)
    return model, system, sc, free, outputs, data


def bench_identify(points: int, folder: Path):
    for name, free in IDENTIFY:
        model, system, sc, free, outputs, data = synthetic(name, points, free)
        exp = symdae.Experiment(system, symdae.LeastSquares(data, outputs), sc)
        start = start_values(model, free)
        for method, label in (("least_squares", "identify GN"), ("L-BFGS-B", "identify L-BFGS-B")):
            estimate = identification_estimate(exp, len(free), method).total
            yield label, name, estimate, traced(
                lambda exp=exp, free=free, start=start, method=method: symdae.identify(
                    exp, free, start, method=method, max_iterations=2, progress=False))


def bench_identify_cli(points: int, folder: Path):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        symdae_main(["identify", "oscillator", "--free", "c,d", "--t-end", "0.5", "--quiet",
                     "--out-dir", str(folder / "warm")])     # Matplotlib's import, once
    for name, free in IDENTIFY:
        model, ns, system, sc = lengthened(name, points)
        free = free or list(ns["FREE"])
        outputs = list(ns.get("OUTPUTS") or model.output_names)
        stand_in = LeastSquares({o: None for o in outputs}, outputs)
        estimate = identify_estimate(system, sc, [stand_in], free, "auto",
                                     signals=len(outputs)).total
        starts = [x for k, v in start_values(model, free).items()
                  for x in ("--start", f"{k}={v!r}")]
        argv = ["identify", name, "--free", ",".join(free), "--t-end", repr(sc.t_end),
                *starts, "--max-iterations", "2", "--noise", "1e-3", "--quiet",
                "--out-dir", str(folder / name)]
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            peak = traced(lambda argv=argv: symdae_main(argv))
        yield "symdae identify", name, estimate, peak


def bench_monte_carlo(points: int, folder: Path):
    for name, free in IDENTIFY:
        model, system, sc, free, outputs, data = synthetic(name, points, free)
        exp = symdae.Experiment(system, symdae.LeastSquares(data, outputs), sc)
        start = start_values(model, free)
        truth = dict(zip(model.parameter_names, model.nominal_values))
        noise = {o: 1e-3 * float(np.std(data.values[o])) for o in outputs}
        estimate = monte_carlo_estimate([exp], len(free), "least_squares", 1).total
        yield "monte carlo", name, estimate, traced(
            lambda exp=exp, free=free, start=start, noise=noise, truth=truth: symdae.monte_carlo(
                [exp], free, start, noise, 2, truth={k: truth[k] for k in free},
                max_iterations=2))


def bench_design(points: int, folder: Path):
    for name in DESIGN:
        model, ns, system, sc = lengthened(name, points)
        d = ns["DESIGN"]
        estimate = design_estimate(system, sc, ns["FREE"], len(d["inputs"]),
                                   len(ns["OUTPUTS"])).total
        yield "design", name, estimate, traced(
            lambda system=system, sc=sc, ns=ns, d=d: symdae.design_input(
                system, sc, ns["FREE"], ns["OUTPUTS"], inputs=d["inputs"],
                start_input=d.get("start_input"), max_iterations=2, progress=False))


def fit(label: str, name: str, model, system, sc, cost, free, method: str):
    """(label, model, estimate, peak) of two iterations of ``identify`` with ``cost``."""
    exp = symdae.Experiment(system, cost, sc)
    start = start_values(model, free)
    estimate = identification_estimate(exp, len(free), method).total
    return label, name, estimate, traced(lambda: symdae.identify(
        exp, free, start, method=method, max_iterations=2, progress=False))


def bench_orders(points: int, folder: Path):
    for name, free, output in ORDERS:
        model, ns, system, sc = lengthened(name, points)
        runup = RunUp(600.0, 3000.0, sc.t0, sc.t_end)
        analysis = OrderAnalysis.over_band(runup, (840.0, 2700.0), 60.0, (1, 2))
        data = Measurement.from_trajectory(system.simulate(sc), [output])
        cost = OrderCost(output, analysis, data, amplitude_scale="data")
        yield fit("orders", name, model, system, sc, cost, free, "L-BFGS-B")


def bench_frequency(points: int, folder: Path):
    for name, free, output in FREQUENCY:
        model, ns, system, sc = lengthened(name, points)
        length = sc.t_end - sc.t0
        window = Window.over_band(sc.t0, sc.t_end, 10.0 / length, 20.0 / length)
        data = Measurement.from_trajectory(system.simulate(sc), [output])
        cost = FourierCost(output, window, data, amplitude_scale="data")
        yield fit("frequency", name, model, system, sc, cost, free, "BFGS")


def bench_pod(points: int, folder: Path):
    for name, free, modes, basis in POD:
        model, ns, system, sc = lengthened(name, points)
        free = free or list(ns["FREE"])
        outputs = list(ns.get("OUTPUTS") or model.output_names)
        data = Measurement.from_trajectory(system.simulate(sc), outputs)
        cost = symdae.PODCost(data, outputs, mode=list(modes or (1,)), basis=basis,
                              normalise=True)
        yield fit(f"pod ({basis})", name, model, system, sc, cost, free, "L-BFGS-B")


BENCHES = {"simulate": bench_simulate, "identify": bench_identify,
           "identify_cli": bench_identify_cli,
           "monte_carlo": bench_monte_carlo, "design": bench_design,
           "frequency": bench_frequency, "orders": bench_orders,
           "pod": bench_pod}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--only", default=",".join(COMMANDS),
                    help=f"comma-separated commands of {COMMANDS}")
    args = ap.parse_args()
    print(f"{'command':<20} {'model':<24} {'points':>7} {'estimate MiB':>13} {'peak MiB':>9} "
          f"{'ratio':>6} {'s':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for command in args.only.split(","):
            t0 = time.perf_counter()
            for label, name, est, peak in BENCHES[command](args.points, Path(tmp)):
                print(f"{label:<20} {name:<24} {args.points:>7} {est / 2**20:>13.1f} "
                      f"{peak / 2**20:>9.1f} {est / peak:>6.2f} "
                      f"{time.perf_counter() - t0:>5.1f}", flush=True)
                t0 = time.perf_counter()


if __name__ == "__main__":
    main()
