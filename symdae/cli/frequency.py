"""``symdae identify MODEL --domain frequency``: identification on the Fourier amplitudes of an
output in a band, with its report and the frequency-domain paper's figures.

It fits eq. (5) (or another :data:`symdae.costs.KINDS` cost) on the lines k/L of one window
inside the band, from measured or synthetic data, optionally with a deliberate model error
(``--model-param`` or the model file's ``MODEL_ERROR``: parameter values that only the
identification model uses). Written to the output folder: ``report.json`` (result, spectra,
analysis, the time-domain least-squares contrast from the same start, the cost grid),
``spectra.png`` (Figs. 2-3), ``time.png`` (Fig. 4), ``convergence.png`` (Fig. 5a),
``contour.png`` (Fig. 5b, two free parameters) and, for synthetic data, ``data.csv``.
"""
from __future__ import annotations

import functools
import json
import math
import operator
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..atomic import write_text
from ..threads import pool as threads_pool
from .common import assignment, identify_estimate, load, number_range

if TYPE_CHECKING:       # (imported where used: the command line's --help stays fast)
    from ..costs.base import Cost
    from ..costs.fourier import Window
    from ..data.measurement import Measurement
    from ..identification.experiment import Experiment
    from ..model.definition import Model
    from ..simulation.scenario import Scenario
    from ..simulation.system import System

__all__ = ["add_frequency_options", "identify_in_frequency_domain", "cost_grid", "CostGrid",
           "grid_axis", "FrequencyProblem"]


MAX_DISPLAY_LINES = 4000   # lines of the plotted spectrum (the cost uses only the band's)


def add_frequency_options(parser, time_domain) -> None:
    """Add the frequency-domain options to the ``identify`` parser (its ``--domain`` is
    cli.py's); ``time_domain`` is the command run for the other domains."""
    from ..costs.frequency import KINDS

    g = parser.add_argument_group("frequency domain (--domain frequency)")
    g.add_argument("--band", type=number_range, metavar="LO:HI",
                   help="band in Hz; the cost uses every line k/L inside it, edges included "
                   "(default: the model file's BAND)")
    g.add_argument("--window", default="rectangular",
                   help="window: rectangular (default), hann (amplitude-corrected, g_c = 2) "
                   "or any scipy.signal.windows name")
    g.add_argument("--window-span", type=number_range, metavar="START:END",
                   help="interval of the analysis window in s (default: the whole run)")
    g.add_argument("--kind", choices=list(KINDS), default="power",
                   help="power: eq. (5) on squared amplitudes (default); amplitude; complex "
                   "(phase-aware); log")
    g.add_argument("--model-param", action="append", type=assignment, default=None,
                   metavar="NAME=VALUE", help="a parameter value used by the identification "
                   "model only, not by the synthetic data (a deliberate model error; default: "
                   "the model file's MODEL_ERROR)")
    g.add_argument("--contour", type=int, default=17, metavar="N",
                   help="two N x N grids of J over two free parameters (overview and zoom on "
                   "the minimum) for contour.png (0: none)")
    g.add_argument("--no-contrast", action="store_true",
                   help="skip the time-domain least-squares fit from the same start")

    def run(args):
        if args.domain == "frequency":
            return identify_in_frequency_domain(args)
        args.method = args.method or "auto"
        return time_domain(args)

    parser.set_defaults(func=run, method=None)


# ---------------------------------------------------------------------------- cost grid
@dataclass(frozen=True)
class CostGrid:
    """J on a grid of two parameters: ``J[i, j]`` at ``x[j]``, ``y[i]``."""

    names: tuple
    x: np.ndarray
    y: np.ndarray
    J: np.ndarray
    log_y: bool

    def to_dict(self) -> dict:
        return {"names": list(self.names), "x": self.x.tolist(), "y": self.y.tolist(),
                "J": [[v if math.isfinite(v) else None for v in row] for row in self.J.tolist()],
                "log_y": self.log_y}


def grid_axis(values: Sequence[float], n: int) -> tuple[np.ndarray, bool]:
    """An axis covering ``values`` with margin: logarithmic when they span more than 3x."""
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo > 3:
        return np.geomspace(lo / 1.5, hi * 1.5, n), True
    pad = 0.1 * max(abs(lo), abs(hi), 1e-300)
    return np.linspace(lo - pad, hi + pad, n), False


def cost_grid(experiment, names: Sequence[str], x: np.ndarray, y: np.ndarray,
              log_y: bool = False, workers: int | None = None) -> CostGrid:
    """J of ``experiment`` on the grid (no gradients; failed simulations give NaN). The
    compiled sweeps release the GIL, so a thread pool evaluates points concurrently."""
    from ..errors import SimulationError

    def one(point):
        try:
            return experiment.evaluate(dict(zip(names, point))).cost
        except SimulationError:
            return float("nan")

    points = [(xv, yv) for yv in y for xv in x]
    with threads_pool(workers or os.cpu_count() or 1) as pool:
        J = np.array(list(pool.map(one, points))).reshape(len(y), len(x))
    return CostGrid(tuple(names), np.asarray(x), np.asarray(y), J, log_y)


def _contour_grids(experiment, free, start, identified, truth, n: int) -> list:
    """An overview over start, identified and true values, and a zoom on the minimum."""
    names = list(free)
    vals = [[start[k], identified[k]] + ([truth[k]] if truth else []) for k in names]
    x, _ = grid_axis(vals[0], n)
    y, log_y = grid_axis(vals[1], n)
    overview = cost_grid(experiment, names, x, y, log_y)
    # the minimum of a resonance fit is a narrow valley: resolve it on its own grid, wide
    # enough to show the true values (and at least +-2 % / +-20 %)
    around = []
    for k, rel in zip(names, (0.02, 0.2)):
        c = identified[k]
        half = max(rel * abs(c), 1.3 * abs((truth or {}).get(k, c) - c))
        around.append(np.linspace(c - half, c + half, n))
    return [overview, cost_grid(experiment, names, around[0], around[1], False)]


# ---------------------------------------------------------------------------- the command
def _display_analysis(window, band, nyquist: float):
    """The analysis plotted as 'the spectrum': the cost's window, every line k/L up to a few
    times the band (the cost itself uses only the band's lines)."""
    from ..costs.fourier import Window

    L = window.length
    f_max = min(nyquist, max(3.0 * band[1], band[1] + 2.0 / L), MAX_DISPLAY_LINES / L)
    return Window.over_band(window.start, window.end, 1.0 / L, f_max,
                            shape=window.shape, gain=window.gain)


@dataclass
class FrequencyProblem:
    """Everything the frequency-domain command sets up from its arguments."""

    model: Model
    system: System
    scenario: Scenario
    out: Path
    free: list
    start: dict
    outputs: list
    band: tuple
    window: Window
    data: Measurement
    data_info: dict
    truth: dict | None
    fixed: dict
    model_error: dict
    costs: list
    experiment: Experiment
    method: str

    @property
    def model_params(self) -> dict:
        return {**self.fixed, **self.model_error}


def _problem(args) -> FrequencyProblem:
    """Free parameters, start, band, window, data (measured or synthetic), model error and
    the experiment, from the arguments and the model file."""
    from ..costs.fourier import Window
    from ..costs.frequency import FourierCost
    from ..costs.time_domain import LeastSquares
    from ..data.measurement import Measurement
    from ..errors import InputError, UnknownNameError
    from ..identification.experiment import Experiment
    from ..simulation.memory import MemoryEstimate, forward_bytes, largest

    model, ns, system, scenario, out = load(args)
    fixed = dict(args.param)
    nominal = dict(zip(model.parameter_names, model.nominal_values))
    free = args.free or list(ns.get("FREE", []))
    if not free:
        raise InputError("no free parameters: pass --free (or define FREE in the model file)")
    for k in free:
        if k not in nominal:
            raise UnknownNameError(f"unknown parameter {k!r}; parameters: "
                                   f"{model.parameter_names}")
    start = {k: v for k, v in dict(ns.get("START", {})).items() if k in free}
    start.update(dict(args.start))
    for k in free:
        start.setdefault(k, nominal[k])
    outputs = args.outputs or list(ns.get("OUTPUTS", [])) or model.output_names[:1]
    band = args.band or ns.get("BAND")
    if band is None:
        raise InputError("no band: pass --band LO:HI (Hz) or define BAND in the model file")
    if args.quadrature not in ("left", "trapezoid"):
        raise InputError(f"--quadrature {args.quadrature}: Fourier coefficients take 'left' "
                         "(the DFT rule) or 'trapezoid'")
    span = args.window_span or (scenario.t0, scenario.t_end)
    window = Window.over_band(span[0], span[1], band[0], band[1], shape=args.window)
    # before the synthetic data: the costs with stand-in amplitudes (what they allocate does
    # not depend on them), and the time-domain contrast
    stand_in: list[Cost] = [functools.reduce(
        operator.add, (FourierCost(o, window, np.ones(len(window.lines)),
                                   quadrature=args.quadrature) for o in outputs))]
    if not args.no_contrast:
        stand_in.append(LeastSquares({o: None for o in outputs}, outputs))
    phases = [identify_estimate(system, scenario, stand_in, free, args.method or "BFGS",
                                signals=len(outputs),
                                data_h=args.data_h if args.data is None else None,
                                name=f"{model.name}-frequency")]
    if args.contour > 0 and len(free) == 2:    # a run and its cost on every worker at once
        per, map_bytes = stand_in[0].memory(system.sizes, scenario)
        workers = os.cpu_count() or 1
        phases.append(MemoryEstimate(f"the contour grid, {workers} points at once",
                                     scenario.n_steps + 1,
                                     workers * (forward_bytes(system.sizes, scenario.scheme)
                                                + per), map_bytes,
                                     "a larger --h, a shorter --t-end or --contour 0"))
    largest(*phases).check()

    truth = None
    if args.data is not None:
        data = Measurement.from_csv(args.data, time_column=args.time_column)
        data_info = {"source": str(args.data), "synthetic": False}
        model_error = dict(args.model_param or {})
    else:
        truth = {k: fixed.get(k, nominal[k]) for k in free}
        data_sc = scenario.replace(h=args.data_h or scenario.h)
        true_run = system.simulate(data_sc, params=fixed)
        data = Measurement.from_trajectory(true_run, outputs)
        del true_run        # its states are not needed beside the data
        data.to_csv(out / "data.csv")
        data_info = {"source": str(out / "data.csv"), "synthetic": True,
                     "data_h": data_sc.h, "true_values": truth}
        model_error = dict(ns.get("MODEL_ERROR", {}) if args.model_param is None
                           else args.model_param)
    for k in model_error:
        if k not in nominal:
            raise UnknownNameError(f"--model-param {k}: the model has no such parameter; "
                                   f"parameters: {model.parameter_names}")
    costs = [FourierCost(o, window, data, kind=args.kind, amplitude_scale="data",
                         quadrature=args.quadrature) for o in outputs]
    exp = Experiment(system, functools.reduce(operator.add, costs), scenario,
                     params={**fixed, **model_error},
                     name=f"{model.name}-frequency")
    return FrequencyProblem(model, system, scenario, out, free, start, outputs, tuple(band),
                            window, data, data_info, truth, fixed, model_error, costs, exp,
                            args.method or "BFGS")


def _report(pb: FrequencyProblem, args, result, runs, contrast) -> dict:
    """report.json: setup, analysis, result, spectra and the time-domain contrast."""
    w, sc = pb.window, pb.scenario
    report = {
        "model": pb.model.name, "domain": "frequency",
        "scenario": {"t_end": sc.t_end, "h": sc.h, "alpha": sc.alpha, "t0": sc.t0,
                     "fixed_parameters": pb.fixed},
        "model_parameters": pb.model_params, "model_error": pb.model_error,
        "data": pb.data_info, "outputs": pb.outputs,
        "analysis": {"band_hz": list(pb.band), "window": w.shape_name,
                     "window_span_s": [w.start, w.end], "gain": w.gain,
                     "lines_hz": w.frequencies.tolist(), "kind": args.kind,
                     "quadrature": args.quadrature,
                     "amplitude_scale": {c.output: c.amplitude_scale for c in pb.costs},
                     "note": "J is evaluated on amplitudes divided by amplitude_scale "
                             "(the largest measured amplitude in the band)"},
        "result": result.to_dict(),
        "spectra": {c.output: {**{k: c.spectrum(tr).to_dict() for k, tr in runs.items()},
                               "measured": c.measured.to_dict()} for c in pb.costs},
    }
    if pb.truth is not None:
        report["relative_error"] = result.relative_error(pb.truth)
    if contrast is not None:
        report["time_domain_contrast"] = contrast.to_dict()
        if pb.truth is not None:
            report["time_domain_contrast"]["relative_error"] = contrast.relative_error(pb.truth)
    return report


def _figures(pb: FrequencyProblem, result, runs, contrast, n_contour: int):
    """spectra.png (Figs. 2-3), time.png (Fig. 4), convergence.png (Fig. 5a) and, for two free
    parameters, contour.png (Fig. 5b). Returns the files and the cost grids."""
    from ..costs.fourier import fourier_coefficients
    from ..plots.base import plot_convergence, plot_fit
    from ..plots.frequency import plot_cost_contour, plot_spectra

    out, first, free = pb.out, pb.outputs[0], pb.free
    shown = _display_analysis(pb.window, pb.band, 0.5 / pb.scenario.h)
    t = runs["start"].t
    where = pb.data.align(t, first)
    spectra = {"measured": fourier_coefficients(where.t, where.values, [shown]).amplitude}
    for label, tr in runs.items():
        spectra[label] = fourier_coefficients(tr.t, tr.outputs[first], [shown]).amplitude
    files = [plot_spectra(shown.frequencies, spectra, pb.band, out / "spectra.png", first,
                          pb.window.frequencies),
             plot_fit({first: (where.t, where.values, {k: where.at(tr.outputs[first])
                                                       for k, tr in runs.items()})},
                      out / "time.png", pb.model.units),
             plot_convergence(result, out / "convergence.png", reference=pb.truth)]
    grids = []
    if n_contour > 0 and len(free) == 2:
        grids = _contour_grids(pb.experiment, free, pb.start, result.values, pb.truth,
                               n_contour)
        paths = {f"{result.method} path (frequency domain)":
                 ([e["values"][free[0]] for e in result.history],
                  [e["values"][free[1]] for e in result.history])}
        points = {"start": (pb.start[free[0]], pb.start[free[1]]),
                  "identified": (result.values[free[0]], result.values[free[1]])}
        if pb.truth:
            points["true"] = (pb.truth[free[0]], pb.truth[free[1]])
        if contrast is not None:
            points["time-domain fit"] = (contrast.values[free[0]], contrast.values[free[1]])
        files.append(plot_cost_contour(grids, out / "contour.png", paths, points))
    return files, grids


def identify_in_frequency_domain(args) -> int:
    """The ``--domain frequency`` branch of ``symdae identify`` (see the module docstring)."""
    from ..costs.time_domain import LeastSquares
    from ..identification.experiment import Experiment
    from ..identification.identify import identify

    pb = _problem(args)
    w, bounds = pb.window, dict(args.bound) or None
    print(f"identifying {pb.free} of {pb.model.name} in the frequency domain: {args.kind} "
          f"cost on {len(w.lines)} lines in [{pb.band[0]:g}, {pb.band[1]:g}] Hz of "
          f"{pb.outputs}, {w.shape_name} window [{w.start:g}, {w.end:g}] s, model parameters "
          f"{pb.model_params or 'nominal'}, {pb.method}", file=sys.stderr)
    result = identify(pb.experiment, pb.free, pb.start, bounds=bounds, method=pb.method,
                      max_iterations=args.max_iterations, progress=not args.quiet)
    print(result.summary())
    if pb.truth is not None:
        errs = ", ".join(f"{k} {v:.3e}" for k, v in result.relative_error(pb.truth).items())
        print(f"relative errors against the true values: {errs}")
    t0 = time.perf_counter()
    contrast = None
    if not args.no_contrast:
        ls = Experiment(pb.system, LeastSquares(pb.data, pb.outputs), pb.scenario,
                        params=pb.model_params, name=f"{pb.model.name}-time")
        contrast = identify(ls, pb.free, pb.start, bounds=bounds, method=pb.method,
                            max_iterations=args.max_iterations, progress=False)
        print("time-domain contrast (least squares on the same data, model and start): "
              + ", ".join(f"{k} {contrast.values[k]:.6g}" for k in pb.free)
              + f", cost {contrast.cost:.3e}")
        if pb.truth is not None:
            errs = ", ".join(f"{k} {v:.3e}" for k, v in
                             contrast.relative_error(pb.truth).items())
            print(f"  relative errors against the true values: {errs}")
    runs = {"start": pb.experiment.simulate(pb.start),
            "identified": pb.experiment.simulate(result.values)}
    report = _report(pb, args, result, runs, contrast)
    files, grids = _figures(pb, result, runs, contrast, args.contour)
    if grids:
        report["cost_grids"] = [g.to_dict() for g in grids]
    report_path = pb.out / "report.json"
    write_text(report_path, json.dumps(report, indent=1, default=_json_default))

    names = ", ".join(Path(f).name for f in [report_path, *files])
    print(f"wrote {pb.out}/: {names} ({time.perf_counter() - t0:.2f} s for the contrast, "
          "report and plots)")
    return 0


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, Mapping):
        return dict(x)
    return float(x)
