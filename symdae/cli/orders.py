"""``symdae identify MODEL --domain orders``: identification on engine orders in a run-up.

The frequency-domain paper's second example (section 5.2): eq. (5) (or another
:data:`symdae.costs.KINDS` cost, ``--kind``) on the amplitude of one or several engine orders
of an output against speed, each speed point a Hann window of two cycles centred where the
run-up ramp reaches it (:mod:`symdae.costs.orders`). The ramp comes from the model's parameters
``n0, n1, t0, t1`` (rpm, rpm, s, s); the model file may define ``ORDERS``, ``BAND_RPM``,
``SPEED_STEP_RPM`` and, for ``--reduced``, ``REDUCED`` (parameter values of a shorter run-up),
``REDUCED_SCENARIO``, ``REDUCED_BAND_RPM``, ``REDUCED_SPEED_STEP_RPM``. Written to the output
folder: ``report.json`` (setup, result, order curves, errors), ``window.png`` (Fig. 11),
``order.png`` (Fig. 12), ``orders.png`` (Fig. 13), ``convergence.png`` and, for synthetic
data, ``data.csv``. :func:`order_identification` runs the same from Python.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..atomic import write_text
from .common import identify_estimate, load, number_range

if TYPE_CHECKING:       # (imported where used: the command line's --help stays fast)
    from ..costs.orders import OrderAnalysis, OrderCost
    from ..data.measurement import Measurement
    from ..identification.experiment import Experiment
    from ..identification.identify import IdentificationResult
    from ..simulation.scenario import Scenario
    from ..simulation.system import System

__all__ = ["add_order_options", "identify_orders", "OrderProblem", "OrderStudy",
           "order_problem", "order_identification", "analysis_speeds"]

PLOT_ORDERS = (2, 4, 8)


def _numbers(text: str) -> list[float]:
    try:
        out = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 4,6,8, got {text!r}") from None
    if not out:
        raise argparse.ArgumentTypeError(f"expected numbers like 4,6,8, got {text!r}")
    return out


def add_order_options(parser) -> None:
    """Add the ``--domain orders`` options to the ``identify`` parser and route that domain
    here (the other domains keep the command already set)."""

    g = parser.add_argument_group("engine orders in a run-up (--domain orders)")
    g.add_argument("--orders", type=_numbers, metavar="I,J",
                   help="orders in the cost (default: the model file's ORDERS)")
    g.add_argument("--order-weights", type=_numbers, metavar="W,V",
                   help="weight of each order in the cost (default 1)")
    g.add_argument("--band-rpm", type=number_range, metavar="LO:HI",
                   help="speed band of the cost in rpm (default: BAND_RPM)")
    g.add_argument("--speed-step", type=float, metavar="RPM",
                   help="spacing of the speed points (default: SPEED_STEP_RPM, else 25)")
    g.add_argument("--tracking", choices=["frequency", "angle"], default="frequency",
                   help="frequency: cos(2 pi i n_s t) per window (the paper's); angle: "
                   "cos(i theta(t)) with the ramp's prescribed angle (no chirp)")
    g.add_argument("--reduced", action="store_true",
                   help="the model file's reduced run-up (REDUCED, REDUCED_SCENARIO, "
                   "REDUCED_BAND_RPM, REDUCED_SPEED_STEP_RPM)")
    g.add_argument("--plot-orders", type=_numbers, default=list(PLOT_ORDERS), metavar="I,J",
                   help="orders drawn before and after (Fig. 13; default 2,4,8)")
    other = parser.get_default("func")

    def run(args):
        if args.domain == "orders":
            return identify_orders(args)
        return other(args)

    parser.set_defaults(func=run)


def analysis_speeds(runup, step: float, cycles: int = 2, domain: str = "time") -> np.ndarray:
    """Speed points every ``step`` rpm over the whole ramp whose windows fit inside it."""
    lo, hi = sorted((runup.n0, runup.n1))
    grid = np.arange(math.ceil(lo / step) * step, hi + 1e-9, step)
    from ..costs.order_tracking import angle_window_fits

    def fits(n):
        return angle_window_fits(runup, n, cycles)[0] if domain == "angle" else \
            runup.fits(n, cycles)
    return np.array([n for n in grid if fits(n)])


@dataclass
class OrderProblem:
    """An order identification set up: the system, scenario, ramp, analysis, data, cost."""

    system: System
    scenario: Scenario
    params: dict            # the identification model's fixed parameters (ramp included)
    runup: Any              # a RunUp, or a measured SpeedTrace
    analysis: OrderAnalysis
    data: Measurement
    cost: OrderCost
    experiment: Experiment
    free: list
    start: dict
    truth: dict | None = None
    data_info: dict = field(default_factory=dict)
    output: str = "twist"


@dataclass
class OrderStudy:
    """What :func:`order_identification` found: the result, order curves, figures, report."""

    result: IdentificationResult
    curves: dict             # {"data" | "start" | "identified": OrderCurves over all orders}
    report: dict
    files: list


def order_problem(system, scenario, *, free: Sequence[str], start: Mapping, output: str,
                  orders: Sequence[float], band_rpm: tuple, step_rpm: float,
                  params: Mapping | None = None, weights: Sequence[float] = (),
                  tracking: str = "frequency", kind: str = "power", data=None,
                  data_params: Mapping | None = None, runup=None,
                  domain: str = "time", method: str = "L-BFGS-B") -> OrderProblem:
    """Set up an order identification. ``params``: fixed parameters of the model (the ramp's
    n0, n1, t0, t1 among them or nominal); ``data``: a Measurement, or None for synthetic
    data from the nominal values with ``params`` and ``data_params`` on top. A run that
    cannot fit (the identification by ``method``) is refused before the synthetic data."""
    from ..costs.orders import OrderAnalysis, OrderCost, RunUp
    from ..data.measurement import Measurement
    from ..identification.experiment import Experiment

    model = system.model
    params = dict(params or {})
    values = dict(zip(model.parameter_names, model.nominal_values)) | params
    runup = runup or RunUp.of(values)         # a measured SpeedTrace, else the model's ramp
    analysis = OrderAnalysis.over_band(runup, band_rpm, step_rpm, orders, weights=weights,
                                       tracking=tracking, domain=domain)
    # stand-in amplitudes: what the cost allocates does not depend on them
    stand_in = OrderCost(output, analysis, np.ones((len(analysis.orders), analysis.n_speeds)))
    identify_estimate(system, scenario, [stand_in], free, method, signals=1,
                      statistics=False, name=f"{model.name}-orders").check()
    truth = None
    if data is None:
        true_params = {**params, **dict(data_params or {})}
        truth = {k: float(true_params[k] if k in true_params else values[k]) for k in free}
        data = Measurement.from_trajectory(system.simulate(scenario, params=true_params),
                                           [output])
        info = {"synthetic": True, "true_values": truth, "data_params": dict(data_params or {})}
    else:
        info = {"synthetic": False, "source": str(getattr(data, "source", "data"))}
    cost = OrderCost(output, analysis, data, kind=kind, amplitude_scale="data")
    exp = Experiment(system, cost, scenario, params=params, name=f"{model.name}-orders")
    return OrderProblem(system, scenario, params, runup, analysis, data, cost, exp, list(free),
                        {k: float(start[k]) for k in free}, truth, info, output)


def _curves(pb: OrderProblem, runs: Mapping, orders, step: float) -> tuple:
    from ..costs.orders import OrderAnalysis

    domain = pb.analysis.domain
    shown = OrderAnalysis(pb.runup, tuple(analysis_speeds(pb.runup, step, domain=domain)),
                          tuple(orders), tracking=pb.analysis.tracking, domain=domain)
    t = pb.data.t
    out = {"data": shown.curves(t, pb.data.values[pb.output], what="the data")}
    for label, tr in runs.items():
        out[label] = shown.curves(tr.t, tr.outputs[pb.output], what=label)
    return shown, out


def order_identification(pb: OrderProblem, out: Path, *, method: str = "L-BFGS-B",
                         max_iterations: int = 500, progress: bool = True,
                         plot_orders: Sequence[float] = PLOT_ORDERS,
                         figure_order: float | None = None) -> OrderStudy:
    """Identify, then write report.json and the figures (Figs. 11-13, convergence) to
    ``out``. ``figure_order``: the fitted order of Figs. 11-12 (default: the one with the
    largest weight)."""
    from ..identification.identify import identify
    from ..plots.base import plot_convergence
    from ..plots.orders import plot_order_curve, plot_orders as plot_other, plot_window

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = identify(pb.experiment, pb.free, pb.start, method=method,
                      max_iterations=max_iterations, progress=progress, statistics=False)
    runs = {"start": pb.experiment.simulate(pb.start),
            "identified": pb.experiment.simulate(result.values)}
    an = pb.analysis
    step = float(np.min(np.diff(an.speeds))) if an.n_speeds > 1 else 50.0
    all_orders = sorted(set(an.orders) | set(plot_orders))
    shown, curves = _curves(pb, runs, all_orders, step)
    band = (an.speeds[0], an.speeds[-1])
    fitted = figure_order if figure_order is not None and figure_order in an.orders else \
        an.orders[int(np.argmax(an.weights))]
    # the fitted order on the cost's own speed points: the identified curve against the data
    fit_sim = pb.cost.curves(runs["identified"])
    fit_data = pb.cost.measured_curves
    worst = {f"{i:g}": float(np.max(np.abs(fit_sim.order(i) - fit_data.order(i))) /
                             np.max(fit_data.order(i))) for i in an.orders}
    files = [plot_window(pb.data.t, pb.data.values[pb.output],
                         an.windows()[int(np.argmax(fit_data.order(fitted)))], out / "window.png",
                         pb.output, an.speeds[int(np.argmax(fit_data.order(fitted)))]),
             plot_order_curve(shown.speeds, {k: c.order(fitted) for k, c in curves.items()},
                              band, out / "order.png", fitted, pb.output),
             plot_other(shown.speeds, {i: {k: c.order(i) for k, c in curves.items()}
                                       for i in plot_orders}, out / "orders.png", pb.output),
             plot_convergence(result, out / "convergence.png", reference=pb.truth)]
    report = {
        "model": pb.system.model.name, "domain": "orders",
        "scenario": {"t_end": pb.scenario.t_end, "h": pb.scenario.h,
                     "alpha": pb.scenario.alpha, "steps": pb.scenario.n_steps},
        "parameters": pb.params, "data": pb.data_info, "output": pb.output,
        "analysis": {**an.to_dict(), "kind": pb.cost.kind,
                     "amplitude_scale": pb.cost.amplitude_scale,
                     "note": "J is evaluated on amplitudes divided by amplitude_scale (the "
                             "largest measured amplitude)"},
        "result": result.to_dict(),
        "figure_order": fitted,
        "cost_orders_of_magnitude": math.log10(result.start_cost / result.cost)
        if result.cost > 0 else float("inf"),
        "fitted_curve_error_of_data_peak": worst,
        "curves": {k: c.to_dict() for k, c in curves.items()},
        "relative_change_of_other_orders": _changes(shown, curves, plot_orders, fitted),
    }
    if pb.truth is not None:
        report["relative_error"] = result.relative_error(pb.truth)
    path = out / "report.json"
    write_text(path, json.dumps(report, indent=1, default=float))
    return OrderStudy(result, curves, report, [path, *files])


def _changes(shown, curves, orders, fitted) -> dict:
    """max |identified - start| / max(start) per order, outside the crossing of the order with
    the fitted order's resonance (the data's peak of the fitted order, moved to order i)."""
    d = curves["data"].order(fitted)
    speeds = np.asarray(shown.speeds)
    n_res = float(speeds[int(np.argmax(d))])
    out = {}
    for i in orders:
        crossing = n_res * fitted / i
        keep = np.abs(speeds - crossing) > 250.0
        s, e = curves["start"].order(i), curves["identified"].order(i)
        out[f"{i:g}"] = {"crossing_rpm": crossing,
                         "max_relative_change": float(np.max(np.abs(e - s)[keep]) /
                                                      np.max(s[keep])) if keep.any() else None}
    return out


# ---------------------------------------------------------------------------- the command
def identify_orders(args) -> int:
    """The ``--domain orders`` branch of ``symdae identify`` (see the module docstring)."""
    from ..errors import InputError, UnknownNameError

    model, ns, system, scenario, out = load(args)
    names = model.parameter_names
    fixed = dict(args.param)
    if args.reduced:
        missing = [k for k in ("REDUCED", "REDUCED_SCENARIO") if k not in ns]
        if missing:
            raise InputError(f"--reduced: the model file defines no {missing}")
        fixed = {**ns["REDUCED"], **fixed}
        given = {k: v for k, v in (("t_end", args.t_end), ("h", args.h), ("alpha", args.alpha))
                 if v is not None}
        scenario = ns["REDUCED_SCENARIO"].replace(**given) if given else ns["REDUCED_SCENARIO"]
    prefix = "REDUCED_" if args.reduced else ""
    free = args.free or list(ns.get("FREE", []))
    if not free:
        raise InputError("no free parameters: pass --free (or define FREE in the model file)")
    for k in list(free) + list(fixed):
        if k not in names:
            raise UnknownNameError(f"unknown parameter {k!r}; parameters: {names}")
    start = {k: v for k, v in dict(ns.get("START", {})).items() if k in free}
    start.update(dict(args.start))
    nominal = dict(zip(names, model.nominal_values))
    for k in free:
        start.setdefault(k, nominal[k])
    orders = args.orders or list(ns.get("ORDERS", ()))
    band = args.band_rpm or ns.get(prefix + "BAND_RPM")
    if not orders or band is None:
        raise InputError("no orders or band: pass --orders and --band-rpm LO:HI (or define "
                         "ORDERS and BAND_RPM in the model file)")
    step = args.speed_step or ns.get(prefix + "SPEED_STEP_RPM", 25.0)
    outputs = args.outputs or list(ns.get("OUTPUTS", [])) or model.output_names[:1]
    data = speed = None
    if args.data is not None:
        from .measurement import load_data, speed_trace
        data = load_data(args, scenario, lambda: system.simulate(scenario,
                                                                 params={**fixed, **start}))
        speed = speed_trace(args, scenario)
    pb = order_problem(system, scenario, free=free, start=start, output=outputs[0],
                       orders=orders, band_rpm=tuple(band), step_rpm=step, params=fixed,
                       weights=args.order_weights or (), tracking=args.tracking,
                       kind=args.kind, data=data, data_params=dict(args.data_param),
                       runup=speed, domain=args.order_domain,
                       method=args.method or "L-BFGS-B")
    if data is None:
        pb.data.to_csv(out / "data.csv")
        pb.data_info["source"] = str(out / "data.csv")
    an = pb.analysis
    print(f"identifying {free} of {model.name} on orders {list(an.orders)} of {pb.output!r}: "
          f"{an.n_speeds} speed points in [{an.speeds[0]:g}, {an.speeds[-1]:g}] rpm, "
          f"{args.kind} cost, {args.tracking} tracking, run-up {pb.runup.n0:g} -> "
          f"{pb.runup.n1:g} rpm on [{pb.runup.t0:g}, {pb.runup.t1:g}] s, "
          f"{scenario.n_steps} steps of h = {scenario.h:g}", file=sys.stderr)
    t0 = time.perf_counter()
    study = order_identification(pb, out, method=args.method or "L-BFGS-B",
                                 max_iterations=args.max_iterations, progress=not args.quiet,
                                 plot_orders=args.plot_orders,
                                 figure_order=next(iter(ns.get("ORDERS", ())), None))
    print(study.result.summary())
    rep = study.report
    if "relative_error" in rep:
        errs = ", ".join(f"{k} {v:.3e}" for k, v in rep["relative_error"].items())
        print(f"relative errors against the true values: {errs}")
    print("largest deviation of the fitted order(s) from the data, relative to the data's "
          "peak: " + ", ".join(f"order {k}: {v:.2e}" for k, v in
                               rep["fitted_curve_error_of_data_peak"].items()))
    print(f"wrote {out}/: {', '.join(Path(f).name for f in study.files)} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0
