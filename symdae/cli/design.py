"""``symdae design MODEL``: optimal input design from the command line.

Settings come from the model file (``SCENARIO``; ``START``: the design point; ``FREE``;
``OUTPUTS``; ``DESIGN``: keyword arguments of :func:`symdae.design_input`, e.g. the designed
inputs with their bounds, the start input and the end conditions; ``REFERENCE_INPUTS``: inputs
to compare with), each overridable by an option. Writes ``input.csv`` (the optimal input on the
grid), ``report.json`` and the paper's figures: ``convergence.png``, ``inputs.png``,
``end_conditions.png``, ``outputs.png`` and ``rms.png`` (E_RMS over the free parameters for
each input and noise level), plus a Monte Carlo table with ``--monte-carlo RUNS``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from ..atomic import write_text
from ..threads import pool as threads_pool
from .common import assignment, bound, load, names, scenario_args

__all__ = ["add_parser"]


def _numbers(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") \
            from None


def add_parser(sub) -> None:
    """Register the ``design`` subcommand."""
    p = sub.add_parser(
        "design", help="design the input that maximises the information about the free "
        "parameters; write input.csv, report.json and plots")
    scenario_args(p, measured_inputs=False)   # --input NAME=LO:HI: the designed inputs
    p.add_argument("--free", type=names, help="comma-separated parameters to identify "
                   "(default: the model file's FREE)")
    p.add_argument("--outputs", type=names, help="comma-separated measured outputs (default: "
                   "OUTPUTS)")
    p.add_argument("--start", action="append", type=assignment, default=[],
                   metavar="NAME=VALUE", help="design point: prior value of a free parameter "
                   "(default: START, else nominal)")
    p.add_argument("--input", action="append", type=bound, default=[], metavar="NAME=LO:HI",
                   help="a designed input and its bounds (default: DESIGN['inputs'])")
    p.add_argument("--start-input", action="append", type=assignment, default=[],
                   metavar="NAME=VALUE", help="constant start value of a designed input "
                   "(default: DESIGN['start_input'], else the scenario's input)")
    p.add_argument("--end", action="append", type=assignment, default=[],
                   metavar="NAME=TARGET", help="end condition on an output or a state "
                   "('q:NAME', 'v:NAME') (default: DESIGN['end'])")
    p.add_argument("--end-weight", type=float, help="gamma_end of the end penalty (default 1e3)")
    p.add_argument("--criterion", choices=["trace", "A", "D", "E", "cond"],
                   help="trace (default, the paper's 'A-optimality': maximise tr F~), A "
                   "(classical: minimise tr F~^-1), D, E, cond")
    p.add_argument("--map", dest="bound_map", choices=["arctan", "logistic", "box"],
                   help="bounded map of the input (default arctan, the paper's eq. 18)")
    p.add_argument("--knots", type=int, help="piecewise-linear input on this many equally "
                   "spaced knots (default: every grid sample)")
    p.add_argument("--optimizer", choices=["L-BFGS-B", "gradient"], help="L-BFGS-B (default) "
                   "or the paper's steepest descent")
    p.add_argument("--max-iterations", type=int, default=300, help="iteration limit")
    p.add_argument("--noise", action="append", default=[], metavar="[NAME=]SIGMA",
                   help="noise standard deviation of a measured output in the Fisher "
                   "information (default 1: R = I, the paper's)")
    p.add_argument("--truth", action="append", type=assignment, default=[],
                   metavar="NAME=VALUE", help="true parameter value of the synthetic data for "
                   "the E_RMS plot and the Monte Carlo study (default: nominal)")
    p.add_argument("--rms-noise", type=_numbers, default=[0.0], metavar="S1,S2,...",
                   help="noise levels of the data in rms.png (default 0)")
    p.add_argument("--rms-points", type=int, default=0, help="grid points per parameter of "
                   "rms.png over +-10 %% of the truth (default 41 for one parameter, 21 for "
                   "two; 0: default)")
    p.add_argument("--monte-carlo", type=int, default=0, metavar="RUNS", help="identify the "
                   "free parameters from RUNS noisy copies of the data of each input")
    p.add_argument("--mc-noise", action="append", default=[], metavar="[NAME=]SIGMA",
                   help="noise of the Monte Carlo data (required with --monte-carlo)")
    p.add_argument("--threads", type=int, default=2, help="threads of the Monte Carlo runs")
    p.add_argument("--no-plots", action="store_true", help="write no figures")
    p.add_argument("--quiet", action="store_true", help="no progress line per iteration")
    p.set_defaults(func=_cmd_design)


def _overrides(args, ns, model, scenario) -> dict:
    design = dict(ns.get("DESIGN", {}))
    out = {"scenario": scenario, "progress": not args.quiet,
           "max_iterations": args.max_iterations}
    if args.free:
        out["free"] = args.free
    if args.outputs:
        out["outputs"] = args.outputs
    params = {**dict(args.param), **dict(ns.get("START", {})), **dict(args.start)}
    out["params"] = params
    if args.input:
        out["inputs"] = {k: (lo, hi) for k, (lo, hi) in args.input}
        if any(lo is None or hi is None for lo, hi in out["inputs"].values()):
            from ..errors import InputError
            raise InputError("--input needs both bounds: NAME=LOWER:UPPER")
    if args.start_input:
        out["start_input"] = {**dict(design.get("start_input", {})), **dict(args.start_input)}
    if args.end:
        out["end"] = dict(args.end)
    for key in ("end_weight", "criterion", "bound_map", "optimizer"):
        if getattr(args, key) is not None:
            out[key] = getattr(args, key)
    if args.knots:
        from ..errors import InputError
        if args.knots < 2:
            raise InputError("--knots must be at least 2")
        out["parameterisation"] = {"knots": np.linspace(scenario.t0, scenario.t_end,
                                                        args.knots)}
    if args.noise:
        from ..identification.statistics import noise_from_text
        outs = out.get("outputs") or list(ns.get("OUTPUTS", []))
        out["noise"] = noise_from_text(args.noise, outs)
    return out


def _check_study_memory(args, ns, system, scenario, settings) -> None:
    """Before the design: refuse at once a --monte-carlo study that cannot fit (its runs at
    once each identify from their own data; a stand-in cost: what it allocates does not
    depend on the data). The design checks its own estimate as it starts."""
    import os

    from ..costs.time_domain import LeastSquares
    from ..identification.experiment import Experiment
    from ..identification.montecarlo import monte_carlo_estimate

    free = settings.get("free") or list(ns.get("FREE", []))
    outputs = settings.get("outputs") or list(ns.get("OUTPUTS", []))
    exp = Experiment(system, LeastSquares({o: None for o in outputs}, outputs), scenario)
    at_once = min(args.monte_carlo, max(args.threads, os.cpu_count() or 2))
    monte_carlo_estimate([exp], len(free), "least_squares", at_once).check()


def _cmd_design(args) -> int:
    from ..design.study import (
        compare_monte_carlo,
        model_design,
        rms_error_scan,
        study_inputs,
    )
    from ..errors import InputError
    from ..identification.statistics import noise_from_text

    model, ns, system, scenario, out = load(args)
    settings = _overrides(args, ns, model, scenario)
    if args.monte_carlo:
        _check_study_memory(args, ns, system, scenario, settings)
    t0 = time.perf_counter()
    design = model_design(model, ns, system=system, **settings)
    print(design.summary())
    csv_path = design.to_csv(out / "input.csv")
    report: dict[str, Any] = {"design": design.to_dict()}
    problem = design.problem
    assert problem is not None          # design_input keeps its problem
    free, outputs = list(problem.free), list(problem.outputs)
    nominal = dict(zip(model.parameter_names, model.nominal_values))
    truth = {**nominal, **dict(args.param), **dict(args.truth)}
    truth_free = {k: truth[k] for k in free}
    labels = study_inputs(design)
    if args.monte_carlo:
        if not args.mc_noise:
            raise InputError("--monte-carlo needs --mc-noise [NAME=]SIGMA (the noise of the "
                             "synthetic measurements)")
        noise = noise_from_text(args.mc_noise, outputs)
        start = {k: problem.params.get(k, nominal[k]) for k in free}
        with threads_pool(args.threads) as pool:
            mc = compare_monte_carlo(system, scenario, labels, outputs, free, start, noise,
                                     args.monte_carlo, truth=truth_free, executor=pool)
        report["monte_carlo"] = {k: r.to_dict() for k, r in mc.items()}
        for k, r in mc.items():
            print(f"\nMonte Carlo, {k} input:\n{r.table()}")
        ref = mc["start"].std
        print("\nstd(start) / std(input): " + ", ".join(
            f"{k} {np.array2string(ref / r.std, precision=3)}" for k, r in mc.items()))
    written = [csv_path]
    if not args.no_plots:
        from ..plots.design import (
            plot_design_convergence,
            plot_design_inputs,
            plot_design_outputs,
            plot_end_conditions,
            plot_rms_scans,
        )
        written += [plot_design_convergence(design, out / "convergence.png"),
                    plot_design_inputs(design, out / "inputs.png"),
                    plot_design_outputs(design, out / "outputs.png")]
        end_plot = plot_end_conditions(design, out / "end_conditions.png")
        if end_plot is not None:            # (None: the design has no end conditions)
            written.append(end_plot)
        points = args.rms_points or (41 if len(free) == 1 else 21)
        if len(free) <= 2:
            grid = {k: truth[k] * np.linspace(0.9, 1.1, points) for k in free}
            scans = rms_error_scan(system, scenario, labels, outputs, grid, truth=truth,
                                   noise=list(args.rms_noise))
            report["rms_scans"] = [{"noise": s.noise, "axes": {k: v.tolist() for k, v in
                                                              s.axes.items()},
                                    "minimum": {k: float(np.min(v)) for k, v in
                                                s.values.items()}} for s in scans]
            written.append(plot_rms_scans(scans, out / "rms.png"))
    write_text(out / "report.json", json.dumps(report, indent=1, default=float))
    written.append(out / "report.json")
    print(f"wrote {', '.join(str(w) for w in written)} ({time.perf_counter() - t0:.1f} s)",
          file=sys.stderr)
    return 0
