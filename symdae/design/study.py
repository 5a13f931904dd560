"""What follows a design: the design of a model file, and the identification experiments that
compare the designed input with others (the input-design paper's section 4 and spec 6.4, 7.3).

* :func:`model_design`: :func:`symdae.design_input` with the settings of a model file (its
  ``SCENARIO``, ``START`` = the design point, ``FREE``, ``OUTPUTS``, ``DESIGN`` = keyword
  arguments of design_input, ``REFERENCE_INPUTS`` = comparison inputs);
* :func:`input_experiments`: for each input an identification experiment on synthetic data
  from the true parameters (least squares on the measured outputs, eta = 1 as in eq. 19);
* :func:`rms_error_scan`: E_RMS(b) = sum_i 1/2 |y_data(t_i) - y(t_i; b)|^2 (eq. 19) on a grid of
  one or two parameters for each input, from noise-free or noisy data (Figs. 5 and 9);
* :func:`compare_monte_carlo`: many noisy identifications per input (symdae.monte_carlo) and
  the Cramer-Rao bound of each.
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from ..costs.time_domain import LeastSquares
from ..data.measurement import Measurement
from ..errors import InputError
from ..identification.experiment import Experiment
from ..identification.montecarlo import MonteCarloResult, monte_carlo
from ..simulation.compile import compile_model
from ..simulation.scenario import Scenario
from .driver import InputDesign, design_input

__all__ = ["model_design", "study_inputs", "input_experiments", "RMSScan", "rms_error_scan",
           "compare_monte_carlo"]


def _namespace(model, ns):
    if isinstance(model, str):
        from ..model.files import load_model
        return load_model(model)
    if ns is None:
        raise InputError("pass the model file's namespace (ns) with a Model")
    return model, ns


def model_design(model, ns: Mapping | None = None, *, system=None, **overrides) -> InputDesign:
    """Design the input of a model file (a bundled name, or a Model with its namespace ``ns``)
    with its DESIGN settings; ``overrides`` are keyword arguments of design_input."""
    model, ns = _namespace(model, ns)
    if "DESIGN" not in ns and "inputs" not in overrides:
        raise InputError(f"model file of {model.name!r} defines no DESIGN (the designed inputs "
                         "and their bounds): pass inputs={name: (lower, upper)}")
    system = system or compile_model(model)
    settings = {**dict(ns.get("DESIGN", {})), **overrides}
    settings.setdefault("params", dict(ns.get("START", {})))
    start = dict(settings.get("start_input") or {})
    # the reference inputs other than the start input are the comparisons
    settings.setdefault("compare", {
        k: {n: v for n in settings["inputs"]}
        for k, v in dict(ns.get("REFERENCE_INPUTS", {})).items()
        if not any(v is start.get(n) for n in settings["inputs"])})
    free = settings.pop("free", None) or list(ns.get("FREE", []))
    outputs = settings.pop("outputs", None) or list(ns.get("OUTPUTS", []))
    scenario = settings.pop("scenario", None) or ns.get("SCENARIO")
    if not free or not outputs or scenario is None:
        raise InputError(f"model file of {model.name!r} needs FREE, OUTPUTS and SCENARIO (or "
                         "pass free=, outputs=, scenario=)")
    return design_input(system, Scenario.make(scenario), free, outputs, **settings)


def study_inputs(design: InputDesign) -> dict:
    """{label: {input: samples}}: the start input, the optimum and the comparisons."""
    prob = design.problem
    if prob is None:
        raise InputError("the design carries no problem (its inputs alone): study_inputs "
                         "needs a design made by design_input")
    out = {"start": prob.inputs_of(design.start.U)}
    out.update({k: prob.inputs_of(v.U) for k, v in design.comparisons.items()})
    out["optimal"] = design.scenario_inputs()
    return out


def input_experiments(system, scenario: Scenario, inputs: Mapping, outputs: Sequence[str],
                      truth: Mapping | None = None) -> dict:
    """{label: Experiment}: least squares (eta = 1) on ``outputs`` against synthetic data
    simulated with ``truth`` (default: the nominal values) for each input of ``inputs``
    ({label: {input: values}})."""
    out = {}
    for label, values in inputs.items():
        sc = scenario.replace(inputs=dict(values))
        data = Measurement.from_trajectory(system.simulate(sc, params=truth), list(outputs))
        cost = LeastSquares(data, list(outputs), quadrature="sum")
        out[label] = Experiment(system, cost, sc, name=str(label))
    return out


@dataclass(frozen=True)
class RMSScan:
    """E_RMS on a grid: ``axes`` {parameter: values} (one or two), ``values`` {label: array
    of the grid's shape}, ``noise`` the standard deviation added to the data (0: none)."""

    axes: dict
    values: dict
    truth: dict
    noise: float

    def curvature(self, label: str) -> float:
        """E_RMS'' at the truth along a one-parameter scan (central second difference)."""
        (name, x), = self.axes.items()
        k = int(np.argmin(np.abs(x - self.truth[name])))
        y, hstep = self.values[label], x[1] - x[0]
        return float((y[k + 1] - 2 * y[k] + y[k - 1]) / hstep ** 2)


def rms_error_scan(system, scenario: Scenario, inputs: Mapping, outputs: Sequence[str],
                   grid: Mapping, truth: Mapping | None = None, noise=0.0,
                   seed: int = 2024):
    """E_RMS(b) (eq. 19) over ``grid`` ({parameter: values}, one or two parameters) for each
    input, from data simulated at ``truth`` plus N(0, noise^2) on every sample. ``noise``: one
    level (returns an RMSScan) or a sequence of levels (returns a list, one RMSScan each,
    the grid simulated once for all of them; each level's noise drawn from its own generator
    seeded with ``seed``, as one call per level would)."""
    if not 1 <= len(grid) <= 2:
        raise InputError("grid must scan one or two parameters")
    levels = [float(noise)] if np.ndim(noise) == 0 else [float(x) for x in noise]
    names = list(grid)
    axes = {k: np.asarray(v, dtype=float) for k, v in grid.items()}
    rngs = [np.random.default_rng(seed) for _ in levels]
    truth = dict(truth or {})
    values: list[dict] = [{} for _ in levels]
    for label, inp in inputs.items():
        sc = scenario.replace(inputs=dict(inp))
        run = system.simulate(sc, params=truth)
        data = [{o: run.outputs[o] + (rng.normal(0.0, s, run.t.size) if s else 0.0)
                 for o in outputs} for s, rng in zip(levels, rngs)]
        E = [np.zeros([axes[k].size for k in names]) for _ in levels]
        for idx in itertools.product(*(range(axes[k].size) for k in names)):
            p = {**truth, **{k: axes[k][i] for k, i in zip(names, idx)}}
            y = system.simulate(sc, params=p).outputs
            for Ej, dj in zip(E, data):
                Ej[idx] = 0.5 * sum(float(np.sum((dj[o] - y[o]) ** 2)) for o in outputs)
        for vj, Ej in zip(values, E):
            vj[label] = Ej
    scans = [RMSScan(axes, vj, {k: truth.get(k) for k in names}, s)
             for vj, s in zip(values, levels)]
    return scans[0] if np.ndim(noise) == 0 else scans


def compare_monte_carlo(system, scenario: Scenario, inputs: Mapping, outputs: Sequence[str],
                        free: Sequence[str], start: Mapping, noise, runs: int, *,
                        truth: Mapping | None = None, seed: int = 12345,
                        method: str = "least_squares", executor: Executor | None = None
                        ) -> dict:
    """{label: MonteCarloResult}: ``runs`` identifications of ``free`` from ``start`` on noisy
    copies of each input's synthetic data (``noise``: {output: sigma} or one sigma), with the
    Fisher prediction at the truth (default: the nominal values)."""
    nominal = dict(zip(system.model.parameter_names, system.model.nominal_values))
    truth = {k: (truth or {}).get(k, nominal[k]) for k in free}
    exps = input_experiments(system, scenario, inputs, outputs, truth)
    out: dict[str, MonteCarloResult] = {}
    for label, exp in exps.items():
        out[label] = monte_carlo([exp], list(free), dict(start), noise, runs, truth=truth,
                                 seed=seed, method=method, executor=executor)
    return out
