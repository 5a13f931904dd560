"""Scan one parameter on a grid, then refine the best grid point with the exact gradient.

Costs on high POD modes (or on any oscillatory signal over a long record) are multimodal in a
stiffness-like parameter: a frequency error Delta f drifts the phase by 2 pi Delta f T, so the
basin of the true minimum is narrow and a local optimiser started outside it runs away. For one
or two parameters a grid scan finds the basin; a bounded gradient run (L-BFGS-B between the
neighbouring grid points) then finds the minimum to round-off. One simulation per grid point
serves every cost compared on it.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from ..analysis.pod import PODModeError
from ..costs.base import Cost
from ..errors import InputError, SimulationError
from .experiment import Experiment
from .identify import IdentificationResult, identify

__all__ = ["ScanResult", "GridMinimum", "scan", "refine", "scan_refine"]


@dataclass(frozen=True)
class GridMinimum:
    """The lowest grid point of one cost: its value, index, whether it lies on the scan's
    edge, and its basin (the grid interval around it on which J falls monotonically towards
    it from both sides)."""

    value: float
    index: int
    cost: float
    at_edge: bool
    basin: tuple
    neighbours: tuple[float, float]   # the grid values either side (itself at an edge)


@dataclass(frozen=True)
class ScanResult:
    """J of every cost at every grid value of parameter ``name``.

    ``costs[label]`` is an array over ``grid``; NaN where the simulation or the cost failed
    (``failures[label]`` keeps the first message of each failing grid value).
    """

    name: str
    grid: np.ndarray
    costs: dict
    failures: dict

    def minimum(self, label: str) -> GridMinimum:
        """The best grid point of cost ``label`` and its neighbours (a ``GridMinimum``)."""
        J = self.costs[label]
        if np.all(np.isnan(J)):
            raise SimulationError(f"scan of {self.name}: cost {label!r} failed at every grid "
                                  f"point ({next(iter(self.failures[label].values()), '')})")
        k = int(np.nanargmin(J))
        lo = k
        while lo > 0 and J[lo - 1] >= J[lo]:
            lo -= 1
        hi = k
        while hi < len(J) - 1 and J[hi + 1] >= J[hi]:
            hi += 1
        return GridMinimum(float(self.grid[k]), k, float(J[k]), k in (0, len(J) - 1),
                           (float(self.grid[lo]), float(self.grid[hi])),
                           (float(self.grid[max(k - 1, 0)]),
                            float(self.grid[min(k + 1, len(J) - 1)])))


def _grid(grid) -> np.ndarray:
    g = np.asarray(grid, dtype=float).ravel()
    if g.size < 3 or np.any(~np.isfinite(g)) or np.any(np.diff(g) <= 0):
        raise InputError("a scan grid needs at least 3 finite, strictly increasing values")
    return g


def scan(system, scenario, costs: Mapping[str, Cost] | Cost, name: str, grid,
         params: Mapping | None = None, executor: Executor | None = None,
         progress: bool = False) -> ScanResult:
    """J of each cost at every value of parameter ``name`` on ``grid``, one simulation per
    grid value (``params`` fixes the others). ``executor`` runs grid points concurrently;
    ``progress`` prints a line to stderr at every tenth of the grid."""
    g = _grid(grid)
    costs = {"J": costs} if isinstance(costs, Cost) else dict(costs)
    if name not in system.model.parameter_names:
        raise InputError(f"scan: the model has no parameter {name!r}; its parameters are "
                         f"{system.model.parameter_names}")
    fixed = dict(params or {})

    def one(x):
        out, errs = {}, {}
        try:
            traj = system.simulate(scenario, params={**fixed, name: float(x)})
        except SimulationError as exc:
            msg = str(exc).splitlines()[0]
            return {k: math.nan for k in costs}, {k: msg for k in costs}
        for label, cost in costs.items():
            try:
                out[label] = float(cost.evaluate(system, traj)[0])
            except PODModeError as exc:
                out[label], errs[label] = math.nan, str(exc)
        return out, errs

    every = max(1, len(g) // 10)
    t0 = time.perf_counter()

    def counted(k_x):
        k, x = k_x
        r = one(x)
        if progress and ((k + 1) % every == 0 or k + 1 == len(g)):
            print(f"scan of {name}: {k + 1} of {len(g)} grid points "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
        return r

    points = list(enumerate(g))
    results = list(executor.map(counted, points)) if executor is not None else \
        [counted(p) for p in points]
    values = {k: np.array([r[0][k] for r in results]) for k in costs}
    failures = {k: {float(x): r[1][k] for x, r in zip(g, results) if k in r[1]} for k in costs}
    return ScanResult(name, g, values, failures)


class _ScaledCost(Cost):
    """factor * cost: the costs of weak POD modes are ~1e-18, where L-BFGS-B's line search
    gives up at its first step; the optimiser sees J / J(start) instead."""

    def __init__(self, cost: Cost, factor: float):
        self.cost, self.factor = cost, factor

    def evaluate(self, system, traj):
        J, dS = self.cost.evaluate(system, traj)
        return self.factor * J, self.factor * dS

    def value(self, system, traj) -> float:
        return self.factor * self.cost.value(system, traj)


def refine(experiment: Experiment, name: str, start: float, lower: float, upper: float,
           method: str = "L-BFGS-B", progress=False, normalise: bool = True,
           **options) -> IdentificationResult:
    """Minimise the experiment's cost in ``name`` on [lower, upper] from ``start``, with the
    exact gradient (:func:`symdae.identify`). With ``normalise`` the optimiser works on
    J / J(start) (the result's costs are then relative to the start) and L-BFGS-B stops when
    an iteration lowers that by less than 1e-12 (``options={"ftol": ...}`` to change it): at
    round-off its line search would spend tens of simulations for no visible change."""
    if not lower <= start <= upper:
        raise InputError(f"refine: start {start!r} lies outside [{lower!r}, {upper!r}]")
    if normalise:
        J0 = experiment.evaluate({name: start}).cost
        if J0 > 0 and math.isfinite(J0):
            experiment = dataclasses.replace(experiment, cost=_ScaledCost(experiment.cost,
                                                                           1.0 / J0))
            if method == "L-BFGS-B":
                options = {**options, "options": {"ftol": 1e-12,
                                                  **dict(options.get("options") or {})}}
    return identify(experiment, [name], {name: start}, bounds={name: (lower, upper)},
                    method=method, progress=progress, **options)


def scan_refine(experiment: Experiment, name: str, grid, *, method: str = "L-BFGS-B",
                progress=False, executor: Executor | None = None):
    """Scan ``name`` on ``grid`` with the experiment's cost, then refine the best grid point
    between its neighbours. Returns (ScanResult, GridMinimum, IdentificationResult)."""
    s = scan(experiment.system, experiment.scenario, {"J": experiment.cost}, name, grid,
             experiment.params, executor)
    best = s.minimum("J")
    result = refine(experiment, name, best.value, *best.neighbours, method, progress)
    return s, best, result
