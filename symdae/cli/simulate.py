"""``symdae simulate``: simulate a model; write a CSV, a plot and a summary."""
from __future__ import annotations

from ..atomic import write_text
from ..simulation.memory import MemoryEstimate, csv_bytes, forward_bytes
from .common import load, scenario_args

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="simulate a model; write a CSV, a plot and a summary")
    scenario_args(p)
    p.add_argument("--no-plot", action="store_true", help="do not write outputs.png")
    p.set_defaults(func=run)


# what Matplotlib holds per time step while it draws outputs.png: the time axis and each
# output's line, paths and transforms (measured with benchmarks/bench_memory_estimate.py:
# 30 + 32 n_s bytes on three models; Matplotlib's own import, ~20 MiB once, is not counted)
PLOT_BYTES = (30, 32)       # per step, + per step and output


def simulate_estimate(sizes, scenario, plot: bool) -> MemoryEstimate:
    """The memory of ``symdae simulate``: the trajectory, then the larger of what writing the
    CSV (a chunk of formatted rows) and drawing the plot add: they run one after the other."""
    points = scenario.n_steps + 1
    columns = 1 + 3 * sizes.n + sizes.m + sizes.n_s
    drawing = points * (PLOT_BYTES[0] + PLOT_BYTES[1] * sizes.n_s) if plot else 0
    return MemoryEstimate("the simulation and its outputs", points,
                          forward_bytes(sizes, scenario.scheme),
                          max(csv_bytes(points, columns), drawing),
                          "a larger --h, a shorter --t-end or --no-plot")


def run(args) -> int:
    from ..plots.base import plot_outputs

    model, ns, system, scenario, out = load(args)
    simulate_estimate(system.sizes, scenario, not args.no_plot).check()
    traj = system.simulate(scenario, params=dict(args.param))
    csv_path = traj.to_csv(out / "trajectory.csv")
    summary = traj.summary()
    write_text(out / "summary.txt", summary + "\n")
    print(summary)
    print(f"wrote {csv_path}")
    if not args.no_plot:
        print(f"wrote {plot_outputs(traj, out / 'outputs.png', model.units)}")
    return 0
