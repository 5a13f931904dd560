"""``symdae simulate``: simulate a model; write a CSV, a plot and a summary."""
from __future__ import annotations

import contextlib
import sys
from dataclasses import replace

from ..atomic import atomic_open, write_text
from ..errors import InputError
from ..simulation.memory import (
    MemoryEstimate,
    MemoryLimitError,
    available_memory,
    csv_bytes,
    forward_bytes,
)
from .common import load, scenario_args

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="simulate a model; write a CSV, a plot and a summary")
    scenario_args(p)
    p.add_argument("--no-plot", action="store_true", help="do not write outputs.png")
    p.add_argument("--every", type=int, default=1, metavar="K",
                   help="write every K-th time step of the trajectory (default 1: all)")
    p.add_argument("--format", choices=FORMATS, default="csv",
                   help="trajectory file: csv (default; reads back with identify --data), npz "
                   "(NumPy archive, a third of the size, exact values) or none")
    p.add_argument("--max-file-size", type=float, default=1.0, metavar="GB",
                   help="refuse to write a trajectory file estimated larger than this many GB "
                   "(default 1; inf: no limit); --every K or --format npz/none shrink it")
    p.set_defaults(func=run)


FORMATS = ("csv", "npz", "none")
LONG_RUN = 200_000     # steps: about a second of a small model's sweep
# bytes per value written: repr() of a double is up to 24 characters plus a separator
# (measured 17.7 to 20.3 on the oscillator, the pendulum and the engine mount: 22 errs on the
# large side), a double in an npz is 8
FILE_BYTES_PER_VALUE = {"csv": 22, "npz": 8, "none": 0}


def file_estimate(sizes, scenario, every: int, fmt: str) -> int:
    """Estimated bytes of the trajectory file ``symdae simulate`` writes."""
    rows = scenario.n_steps // every + 1
    columns = 1 + 3 * sizes.n + sizes.m + sizes.n_s
    return rows * columns * FILE_BYTES_PER_VALUE[fmt]


# what Matplotlib holds per time step while it draws outputs.png: the time axis and each
# output's line, paths and transforms (measured with benchmarks/bench_memory_estimate.py:
# 30 + 32 n_s bytes on three models; Matplotlib's own import, ~20 MiB once, is not counted)
PLOT_BYTES = (30, 32)       # per step, + per step and output


def simulate_estimate(sizes, scenario, plot: bool) -> MemoryEstimate:
    """The memory of ``symdae simulate``: the trajectory, then the larger of what writing the
    CSV (a chunk of formatted rows) and drawing the plot add: they run one after the other."""
    points = scenario.n_steps + 1
    columns = 1 + 3 * sizes.n + sizes.m + sizes.n_s
    # long records are drawn as min/max envelopes of at most 8000 points (plots.base)
    drawn = min(points, 8000)
    drawing = drawn * (PLOT_BYTES[0] + PLOT_BYTES[1] * sizes.n_s) if plot else 0
    return MemoryEstimate("the simulation and its outputs", points,
                          forward_bytes(sizes, scenario.scheme),
                          max(csv_bytes(points, columns), drawing),
                          "a larger --h, a shorter --t-end or --no-plot")


def _announce(scenario) -> None:
    """A long sweep is one compiled call: say so before it starts."""
    if scenario.n_steps >= LONG_RUN:
        print(f"symdae: simulating {scenario.n_steps} steps of h = {scenario.h:g} s "
              f"(t = {scenario.t0:g} .. {scenario.t_end:g} s; Ctrl-C stops it)", file=sys.stderr,
              flush=True)


def _segmented(system, scenario, params, out, args):
    """Simulate in segments within a quarter of the available memory, appending each to the
    CSV; returns (a Trajectory with the outputs only, the CSV's path or None)."""
    import csv

    import numpy as np

    from ..simulation.checkpoint import simulate_segments

    points = scenario.n_steps + 1
    MemoryEstimate("the outputs of the run (simulated in segments)", points,
                   8 * (1 + 2 * system.sizes.n_s), shrink="a larger --h or a shorter --t-end"
                   ).check()
    _announce(scenario)
    mplan, pieces = simulate_segments(system, scenario, params,
                                      memory_budget=available_memory() // 4)
    print(f"symdae: the states of {scenario.n_steps} steps do not fit in memory: simulating "
          f"{mplan.segments} segments of {mplan.segment} steps, each written as it is done",
          file=sys.stderr, flush=True)
    t = scenario.times
    S = np.empty((len(t), system.sizes.n_s))
    counters, path = {}, out / "trajectory.csv"
    with contextlib.ExitStack() as stack:
        writer = None
        if args.format == "csv":
            writer = csv.writer(stack.enter_context(atomic_open(path, "w", newline="")))
        start = 0
        for k, piece in enumerate(pieces):
            skip = 0 if k == 0 else 1              # its first row ends the segment before
            S[start:start + len(piece.t) - skip] = np.column_stack(
                list(piece.outputs.values()))[skip:] if piece.outputs else 0.0
            if writer is not None:
                names, cols = piece.columns()
                if k == 0:
                    writer.writerow(names)
                rows = np.column_stack(cols)[skip:]
                keep = (start + np.arange(len(rows))) % args.every == 0
                writer.writerows(rows[keep].tolist())
            counters = {c: counters.get(c, 0) + v for c, v in piece.counters.items()}
            start += len(piece.t) - skip
    traj = system.trajectory(t, S, piece.scenario, piece.params, counters)
    return traj, (path if writer is not None else None)


def run(args) -> int:
    from ..plots.base import plot_outputs

    if args.every < 1:
        raise InputError(f"--every must be a whole number >= 1, got {args.every}")
    # a NaN limit would compare false with every size and switch the guard off unasked
    if not args.max_file_size > 0:
        raise InputError(f"--max-file-size must be a positive number of GB (inf: no limit), "
                         f"got {args.max_file_size:g}")
    model, ns, system, scenario, out = load(args)
    size = file_estimate(system.sizes, scenario, args.every, args.format)
    if size > args.max_file_size * 1e9:
        raise InputError(f"the trajectory file would take about {size / 1e9:.3g} GB "
                         f"({scenario.n_steps // args.every + 1} rows, --format "
                         f"{args.format}), more than --max-file-size {args.max_file_size:g} GB: "
                         "write every K-th step (--every K), --format npz or none, or raise "
                         "--max-file-size")
    whole = simulate_estimate(system.sizes, scenario, not args.no_plot)
    try:
        whole.check()
    except MemoryLimitError:
        # the states of the whole run do not fit: run it in segments, writing each as it
        # is done (the outputs alone are kept, for the summary and the plot)
        if args.format == "npz":     # an archive is written whole: no segments
            replace(whole, shrink="a larger --h, a shorter --t-end, or --format csv or none "
                    "(simulated in segments, each written as it is done)").check()
        traj, written = _segmented(system, scenario, dict(args.param), out, args)
    else:
        _announce(scenario)
        traj = system.simulate(scenario, params=dict(args.param))
        written = None
        if args.format != "none":
            path = out / f"trajectory.{args.format}"
            writer = traj.to_csv if args.format == "csv" else traj.to_npz
            written = writer(path, every=args.every)
    summary = traj.summary()
    write_text(out / "summary.txt", summary + "\n")
    print(summary)
    if written is not None:
        print(f"wrote {written}" + (f" (every {args.every}-th step)" if args.every > 1 else ""))
    if not args.no_plot:
        print(f"wrote {plot_outputs(traj, out / 'outputs.png', model.units)}")
    return 0
