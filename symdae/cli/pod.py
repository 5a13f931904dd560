"""The POD-mode options of ``symdae identify`` (``--domain pod``), kept out of cli.py.

    symdae identify flexible_beam --domain pod --modes 3,4 -p ks=2400 -p cs=1.0 \\
        --data-param ks=2000 --data-param cs=2.0 --scan EI=250:1000:2.5

``--data-param`` sets parameters of the synthetic data only (the "true joints"), ``-p`` those
of the identification model (and of the data, unless overridden). ``--scan NAME=LO:HI:STEP``
simulates a grid of the one free parameter first and starts the gradient run from the best grid
point, bounded by its neighbours: high-mode POD costs have narrow basins (spec pod.md 5.5).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .common import assignment

__all__ = ["add_arguments", "make_cost", "search", "write_extras"]


def _modes(text: str) -> list[int]:
    try:
        modes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--modes: expected mode numbers like 3,4, got "
                                         f"{text!r}") from None
    if not modes or min(modes) < 1:
        raise argparse.ArgumentTypeError(f"--modes: mode numbers start at 1, got {text!r}")
    return modes


def _scan(text: str):
    name, sep, rng = text.partition("=")
    parts = rng.split(":")
    try:
        lo, hi, step = (float(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--scan: expected NAME=LOW:HIGH:STEP, got "
                                         f"{text!r}") from None
    if not sep or not name or not (hi > lo and step > 0) or (hi - lo) / step < 2:
        raise argparse.ArgumentTypeError(f"--scan: expected NAME=LOW:HIGH:STEP with LOW < "
                                         f"HIGH and at least 3 grid points, got {text!r}")
    return name.strip(), np.arange(lo, hi + 1e-9 * step, step)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options this module reads, on the ``identify`` parser."""
    p.add_argument("--data-param", action="append", type=assignment, default=[],
                   metavar="NAME=VALUE", help="parameter value of the synthetic data only "
                   "(e.g. the true joints of a twin experiment); repeatable")
    g = p.add_argument_group("POD-mode costs (--domain pod)")
    g.add_argument("--modes", type=_modes, help="POMs to fit, e.g. 3,4 (1 = most energy)")
    g.add_argument("--basis", choices=["measured", "simulated"], default="measured",
                   help="modes of the data, fixed (default), or of each simulation")
    g.add_argument("--match", choices=["index", "mac"], default="index",
                   help="simulated basis: pair modes by number (default) or by shape")
    g.add_argument("--center", action="store_true", help="subtract the mean before the POD")
    g.add_argument("--scan", type=_scan, metavar="NAME=LOW:HIGH:STEP",
                   help="scan the free parameter on a grid first; start from the best point")


def make_cost(args, data, outputs):
    """LeastSquares for --domain time, a normalised PODCost for --domain pod."""
    from ..costs.pod import PODCost
    from ..costs.time_domain import LeastSquares
    from ..errors import InputError

    if args.domain == "time":
        if args.modes:
            raise InputError("--modes needs --domain pod")
        return LeastSquares(data, outputs, quadrature=args.quadrature)
    if not args.modes:
        raise InputError("--domain pod needs --modes, e.g. --modes 3,4")
    # normalised: J_i relative to the data's modal energy, so weak modes are O(1) for the
    # optimiser and weigh like strong ones when several are fitted
    return PODCost(data, outputs, mode=args.modes, basis=args.basis, match=args.match,
                   quadrature=args.quadrature, center=args.center, normalise=True)


def search(args, experiment, free, start, bounds, out: Path):
    """(start, bounds, scan report or None) after the optional --scan of the free parameter."""
    from ..errors import InputError
    from ..identification.gridsearch import scan
    from ..plots.pod import plot_scan

    if not args.scan:
        return start, bounds, None
    name, grid = args.scan
    if list(free) != [name]:
        raise InputError(f"--scan {name}=...: scans one parameter; pass --free {name} alone "
                         f"(free: {list(free)})")
    s = scan(experiment.system, experiment.scenario, {"J": experiment.cost}, name, grid,
             experiment.params, progress=not args.quiet)
    best = s.minimum("J")
    lo, hi = best.neighbours
    plot_scan(s, ["J"], out / "scan.png")
    info = {"parameter": name, "grid": [float(grid[0]), float(grid[-1]), len(grid)],
            "grid_minimum": best.value, "at_edge": best.at_edge, "basin": best.basin,
            "failed_points": len(s.failures["J"]), "plot": str(out / "scan.png")}
    print(f"scan of {name}: grid minimum {best.value:g}{' (at the edge)' if best.at_edge else ''}"
          f", refining on [{lo:g}, {hi:g}]")
    return {name: best.value}, {**dict(bounds or {}), name: (lo, hi)}, info


def write_extras(args, cost, data, outputs, out: Path, positions=None) -> dict:
    """For --domain pod: the data's POD (ratios.png, modes.png, the modes against the
    sensors' ``positions`` ({output: position in m}, a model file's SENSOR_POSITIONS) where
    known, else against their index) and its numbers."""
    if args.domain != "pod":
        return {}
    from ..analysis.pod import pod
    from ..plots.pod import plot_pod_modes, plot_pod_ratios

    P = pod(data, outputs, quadrature=args.quadrature, center=args.center)
    plot_pod_ratios(P, out / "ratios.png")
    where = positions and all(o in positions for o in outputs)
    plot_pod_modes(P, out / "modes.png", modes=sorted(set([1] + list(args.modes)))[:6],
                   positions=[positions[o] for o in outputs] if where else None,
                   xlabel="sensor position [m]" if where else "sensor (index)")
    return {"modes": args.modes, "basis": args.basis, "match": args.match,
            "center": args.center, "ratios": P.ratios.tolist(),
            "fitted_ratios": {i: float(P.ratios[i - 1]) for i in args.modes},
            "plots": [str(out / "ratios.png"), str(out / "modes.png")]}
