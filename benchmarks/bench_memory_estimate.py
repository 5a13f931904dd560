"""The memory estimate of ``symdae simulate`` against the measured peak, on three models.

    python benchmarks/bench_memory_estimate.py [--points 200000] [--no-plot]

For each model: its SCENARIO lengthened to --points grid points, then what ``symdae simulate``
does (simulate, write trajectory.csv, plot the outputs) with tracemalloc tracing every Python
and NumPy allocation. Printed: the estimate (symdae.cli.simulate.simulate_estimate, checked
before the run), the measured peak above the start (Matplotlib loaded before), and their
ratio (the issue's goal: within 30 %). The estimate counts the arrays the run allocates per
grid point plus the larger of the CSV's chunk of formatted rows and the plot's lines
(symdae/simulation/memory.py, symdae/cli/simulate.py).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symdae  # noqa: E402
from symdae.cli.simulate import simulate_estimate  # noqa: E402
from symdae.plots.base import plot_outputs  # noqa: E402

MODELS = ("oscillator", "slider_crank", "engine_mount")


def measure(name: str, points: int, plot: bool, folder: Path) -> tuple[int, int]:
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    base = symdae.Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3})
    sc = base.replace(t_end=base.t0 + (points - 1) * base.h)
    estimate = simulate_estimate(system.sizes, sc, plot).total
    if plot:        # Matplotlib's import and font cache (~20 MiB, once a process) not counted
        plot_outputs(system.simulate(sc.replace(t_end=sc.t0 + 10 * sc.h)), folder / "warm.png")
    tracemalloc.start()
    traj = system.simulate(sc)
    traj.to_csv(folder / f"{name}.csv")
    if plot:
        plot_outputs(traj, folder / f"{name}.png")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return estimate, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=200_000)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    print(f"{'model':<16} {'points':>8} {'estimate MiB':>13} {'peak MiB':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            est, peak = measure(name, args.points, not args.no_plot, Path(tmp))
            print(f"{name:<16} {args.points:>8} {est / 2**20:>13.1f} {peak / 2**20:>9.1f} "
                  f"{est / peak:>6.2f}")


if __name__ == "__main__":
    main()
