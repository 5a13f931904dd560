"""Parameter identification: minimise the sum of experiment costs with scipy.optimize, driven
by the exact discrete-adjoint gradient.

Free parameters are optimised in scaled form w_j = p_j / scale_j (by default scale = start
value): the engine mount's parameters span ten orders of magnitude, and an optimiser working
in raw units would see a hopelessly ill-scaled problem.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy import optimize

from .costs import Cost
from .errors import SimulationError
from .sensitivity import adjoint_gradient
from .system import DEFAULT_ALPHA, System

__all__ = ["Experiment", "IdentificationResult", "identify", "DEFAULT_OPTIONS"]

# L-BFGS-B's ftol is relative to max(|J|, 1): once J < 1 it acts as an absolute threshold and
# stops long before the cost reaches round-off, so symdae switches it off and stops on the
# projected gradient or when the line search can make no further progress.
DEFAULT_OPTIONS = {
    "L-BFGS-B": {"ftol": 0.0, "gtol": 0.0},
    "BFGS": {"gtol": 0.0},
    "trust-constr": {"gtol": 1e-300, "xtol": 1e-15},
}


@dataclass
class Experiment:
    """One experiment: a system, its inputs and initial state, a cost on its outputs.

    ``params`` fixes parameter values for this experiment (e.g. its excitation amplitude);
    the free parameters of :func:`identify` override them.
    """

    system: System
    cost: Cost
    t_end: float
    h: float
    alpha: float = DEFAULT_ALPHA
    params: Mapping = field(default_factory=dict)
    inputs: Mapping | None = None
    q0: Sequence | None = None
    v0: Sequence | None = None
    t0: float = 0.0
    name: str = "experiment"
    simulate_options: Mapping = field(default_factory=dict)

    def simulate(self, params: Mapping | None = None, *, gradient: bool = False):
        merged = {**dict(self.params), **dict(params or {})}
        return self.system.simulate(self.t_end, self.h, self.alpha, params=merged,
                                    inputs=self.inputs, q0=self.q0, v0=self.v0, t0=self.t0,
                                    store_factorizations=gradient, **dict(self.simulate_options))

    def evaluate(self, params: Mapping | None = None, *, gradient: bool = False):
        """(J, dJ/dp for all model parameters or None, trajectory)."""
        traj = self.simulate(params, gradient=gradient)
        J, dS = self.cost.evaluate(self.system, traj)
        grad = adjoint_gradient(self.system, traj, dS) if gradient else None
        return J, grad, traj


@dataclass
class IdentificationResult:
    """What :func:`identify` found, and how."""

    free: list
    start: dict
    values: dict
    scales: dict
    start_cost: float
    cost: float
    gradient: dict
    history: list
    n_iterations: int
    n_simulations: int
    n_gradients: int
    wall_time: float
    success: bool
    message: str
    method: str
    experiment_costs: dict

    def relative_error(self, truth: Mapping) -> dict:
        """|identified - truth| / |truth| per free parameter (absolute error where truth = 0)."""
        return {k: abs(self.values[k] - truth[k]) / (abs(truth[k]) or 1.0) for k in self.free}

    def to_dict(self) -> dict:
        return {
            "method": self.method, "free": self.free, "start": self.start,
            "identified": self.values, "scales": self.scales, "start_cost": self.start_cost,
            "cost": self.cost, "cost_reduction_orders": _orders(self.start_cost, self.cost),
            "gradient": self.gradient, "iterations": self.n_iterations,
            "simulations": self.n_simulations, "gradients": self.n_gradients,
            "wall_time_s": self.wall_time, "success": self.success, "message": self.message,
            "experiment_costs": self.experiment_costs, "history": self.history,
        }

    def summary(self) -> str:
        lines = [f"{self.method}: {self.message}",
                 f"cost {self.start_cost:.6e} -> {self.cost:.6e} "
                 f"({_orders(self.start_cost, self.cost):.1f} orders) in {self.n_iterations} "
                 f"iterations, {self.n_simulations} simulations, {self.n_gradients} gradients, "
                 f"{self.wall_time:.3f} s"]
        for k in self.free:
            lines.append(f"  {k:>12s}: {self.start[k]:.10g} -> {self.values[k]:.10g}")
        return "\n".join(lines)


def _orders(a: float, b: float) -> float:
    if a > 0 and b > 0:
        return math.log10(a / b)
    return float("inf") if b == 0 and a > 0 else float("nan")


def _scales(free, start, scaling) -> np.ndarray:
    if scaling == "start":
        return np.array([abs(start[k]) if start[k] != 0 else 1.0 for k in free])
    if scaling in (None, "none"):
        return np.ones(len(free))
    if isinstance(scaling, Mapping):
        unknown = [k for k in scaling if k not in free]
        if unknown:
            raise KeyError(f"scales given for {unknown}, which are not free ({list(free)})")
        s = np.array([float(scaling.get(k, abs(start[k]) or 1.0)) for k in free])
        if np.any(~np.isfinite(s)) or np.any(s <= 0):
            raise ValueError(f"scales must be positive and finite: {dict(zip(free, s))}")
        return s
    raise ValueError(f"scaling must be 'start', 'none' or {{name: scale}}, got {scaling!r}")


def identify(experiments, free: Sequence[str], start: Mapping | None = None,
             bounds: Mapping | None = None, *, method: str = "L-BFGS-B", scaling="start",
             max_iterations: int = 500, options: Mapping | None = None,
             progress: bool | Callable = True) -> IdentificationResult:
    """Identify the ``free`` parameters by minimising the summed cost of ``experiments``.

    Parameters
    ----------
    experiments:
        An :class:`Experiment` or a list of them (each with its own inputs, initial state,
        data and cost); their costs are summed into one objective.
    free:
        Names of the parameters to identify (they must exist in every experiment's model).
    start:
        ``{name: start value}``; default the nominal values of the first experiment's model.
    bounds:
        ``{name: (lower, upper)}`` in physical units (None for no bound on a side).
    method:
        ``"L-BFGS-B"`` (default), ``"BFGS"`` or ``"trust-constr"``.
    scaling:
        ``"start"`` (optimise w = p / p_start), ``"none"`` or ``{name: scale}``.
    options:
        Passed to scipy.optimize.minimize, on top of :data:`DEFAULT_OPTIONS`.
    progress:
        True prints one line per iteration to stderr; a callable receives each history entry.
    """
    exps = [experiments] if isinstance(experiments, Experiment) else list(experiments)
    if not exps:
        raise ValueError("no experiments")
    free = list(free)
    if not free or len(set(free)) != len(free):
        raise ValueError(f"free parameters must be a non-empty list of distinct names: {free}")
    cols = []
    for e in exps:
        names = e.system.model.parameter_names
        missing = [k for k in free if k not in names]
        if missing:
            raise KeyError(f"experiment {e.name!r}: model {e.system.model.name!r} has no "
                           f"parameter(s) {missing}; its parameters are {names}")
        cols.append([names.index(k) for k in free])
    nominal = dict(zip(exps[0].system.model.parameter_names,
                       exps[0].system.model.nominal_values))
    start = {k: nominal[k] for k in free} if start is None else dict(start)
    missing = [k for k in free if k not in start]
    if missing:
        raise KeyError(f"no start value for free parameter(s) {missing}")
    start = {k: float(start[k]) for k in free}
    scales = _scales(free, start, scaling)
    w0 = np.array([start[k] for k in free]) / scales
    if method not in DEFAULT_OPTIONS:
        raise ValueError(f"method must be one of {list(DEFAULT_OPTIONS)}, got {method!r}")
    if bounds and method == "BFGS":
        raise ValueError("BFGS does not take bounds; use L-BFGS-B or trust-constr")
    names = [e.name for e in exps]
    labels = [n if names.count(n) == 1 else f"{n}[{k}]" for k, n in enumerate(names)]

    sb = None
    if bounds:
        unknown = [k for k in bounds if k not in free]
        if unknown:
            raise KeyError(f"bounds given for {unknown}, which are not free ({free})")
        sb = []
        for k, s in zip(free, scales):
            lo, hi = bounds.get(k, (None, None))
            if (lo is not None and start[k] < lo) or (hi is not None and start[k] > hi):
                raise ValueError(f"start value of {k} ({start[k]:g}) lies outside its bounds "
                                 f"[{lo}, {hi}]")
            sb.append((None if lo is None else lo / s, None if hi is None else hi / s))

    def feasible(w) -> bool:
        if sb is None:
            return True
        return all((lo is None or x >= lo) and (hi is None or x <= hi)
                   for x, (lo, hi) in zip(w, sb))

    evaluations = [0]          # each is one simulation + one adjoint gradient per experiment
    cache: dict = {}
    per_exp: dict = {}

    def physical(w):
        return {k: float(v) for k, v in zip(free, np.asarray(w) * scales)}

    def objective(w):
        key = np.asarray(w, dtype=float).tobytes()
        if key in cache:
            return cache[key]
        p = physical(w)
        J, g = 0.0, np.zeros(len(free))
        try:
            for e, c, label in zip(exps, cols, labels):
                j, grad, _ = e.evaluate(p, gradient=True)
                evaluations[0] += 1
                J += j
                g += grad[c]
                per_exp[label] = j
        except SimulationError as exc:
            # a trial point the line search should back off from
            if progress:
                print(f"  simulation failed at {p}: {str(exc).splitlines()[0]}",
                      file=sys.stderr)
            cache.clear()
            return float("inf"), np.zeros(len(free))
        out = (J, g * scales)
        cache.clear()
        cache[key] = out
        return out

    t_start = time.perf_counter()
    J0, g0 = objective(w0)
    if not math.isfinite(J0):
        raise SimulationError(f"the simulation fails at the start values {start}")
    history = [{"iteration": 0, "cost": J0, "values": physical(w0), "scaled": w0.tolist()}]

    def report(entry):
        if progress is True:
            vals = "  ".join(f"{k}={v:.8g}" for k, v in entry["values"].items())
            print(f"iter {entry['iteration']:4d}  J = {entry['cost']:.6e}  {vals}",
                  file=sys.stderr)
        elif callable(progress):
            progress(entry)

    report(history[0])

    def callback(intermediate_result):
        w = intermediate_result.x
        entry = {"iteration": len(history), "cost": float(intermediate_result.fun),
                 "values": physical(w), "scaled": np.asarray(w).tolist()}
        history.append(entry)
        report(entry)

    opts = {**DEFAULT_OPTIONS[method], **dict(options or {})}
    opts.setdefault("maxiter", int(max_iterations))
    kwargs = {}
    if method == "trust-constr":
        kwargs["hess"] = optimize.BFGS()
    res = optimize.minimize(objective, w0, jac=True, method=method, bounds=sb,
                            options=opts, callback=callback, **kwargs)
    w_best = res.x
    J_best, g_best = objective(w_best)
    # the optimiser may end on a trial point; keep the best feasible iterate seen
    # (trust-constr does not keep its iterates inside the bounds)
    candidates = [e for e in history if feasible(e["scaled"])]
    best = min(candidates, key=lambda e: e["cost"]) if candidates else None
    if best is not None and (best["cost"] < J_best or not feasible(w_best)):
        w_best = np.array(best["scaled"])
        J_best, g_best = objective(w_best)
    wall = time.perf_counter() - t_start
    values = physical(w_best)
    message = str(res.message)
    success = bool(res.success)
    stalled = ("ABNORMAL" in message or "precision loss" in message.lower())
    if stalled and method in ("L-BFGS-B", "BFGS"):
        # with ftol = gtol = 0 this is the normal end: no step along the search direction
        # lowers J any more. Call it converged when the gradient has also collapsed.
        g_rel = float(np.max(np.abs(g_best)) / max(np.max(np.abs(g0)), 1e-300))
        success = g_rel <= 1e-6
        message = ("stopped because the line search could not lower the cost any further; "
                   f"max|gradient| fell to {g_rel:.1e} of its start value "
                   f"(scipy: {message.strip()})")
    return IdentificationResult(
        free=free, start=start, values=values, scales=dict(zip(free, scales.tolist())),
        start_cost=J0, cost=J_best, gradient=dict(zip(free, (g_best / scales).tolist())),
        history=history, n_iterations=int(getattr(res, "nit", len(history) - 1)),
        n_simulations=evaluations[0], n_gradients=evaluations[0], wall_time=wall,
        success=success, message=message, method=method,
        experiment_costs=dict(per_exp),
    )
