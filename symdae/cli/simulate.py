"""``symdae simulate``: simulate a model; write a CSV, a plot and a summary."""
from __future__ import annotations

from ..atomic import write_text
from .common import load, scenario_args

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="simulate a model; write a CSV, a plot and a summary")
    scenario_args(p)
    p.add_argument("--no-plot", action="store_true", help="do not write outputs.png")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..plots.base import plot_outputs

    model, ns, system, scenario, out = load(args)
    traj = system.simulate(scenario, params=dict(args.param))
    csv_path = traj.to_csv(out / "trajectory.csv")
    summary = traj.summary()
    write_text(out / "summary.txt", summary + "\n")
    print(summary)
    print(f"wrote {csv_path}")
    if not args.no_plot:
        print(f"wrote {plot_outputs(traj, out / 'outputs.png')}")
    return 0
