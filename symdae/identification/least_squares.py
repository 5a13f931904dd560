"""Gauss-Newton / Levenberg-Marquardt identification with the exact residual Jacobian.

The summed least-squares costs of the experiments are J = 1/2 |r|^2 with
r = sqrt(w_k eta_i) (s_ik - sbar_ik) (:mod:`symdae.residuals`); the Jacobian dr/dp comes from
the tangent-linear sweep (one back-substitution per free parameter and step with the stored
factorisations), exact for the discrete scheme. Methods:

* ``"least_squares"``: ``scipy.optimize.least_squares(method="trf")``, a trust-region
  Gauss-Newton with bounds;
* ``"lm"``: ``scipy.optimize.least_squares(method="lm")``, MINPACK's Levenberg-Marquardt (no
  bounds);
* ``"gauss-newton-plain"``: the input-design paper's eq. (22) literally, full steps
  dp = -(J^T J)^-1 J^T r, for reproducing it. scipy has no undamped Gauss-Newton, hence the
  few lines here; each step is a linear least-squares solve (numpy.linalg.lstsq, SVD).

All work in the scaled variables w = p / scale of :func:`symdae.identify`.
"""
from __future__ import annotations

import time
from concurrent.futures import Executor

import numpy as np
from scipy import optimize

from ..analysis.pod import PODModeError
from ..errors import InputError, SimulationError
from ..progress import report
from .experiment import experiment_labels, map_calls
from .residuals import check_least_squares_costs, experiment_residuals

__all__ = ["LEAST_SQUARES_METHODS", "DEFAULT_LEAST_SQUARES_OPTIONS", "least_squares_fit",
           "Residuals", "residuals_and_jacobian"]

LEAST_SQUARES_METHODS = ("least_squares", "lm", "gauss-newton-plain")
# The cost of an exactly fitting model falls to round-off, so scipy's default 1e-8 would stop
# far too early: stop on a relative step of 1e-12, or when a step lowers J by < 1e-15 of J.
DEFAULT_LEAST_SQUARES_OPTIONS = {
    "least_squares": {"ftol": 1e-15, "xtol": 1e-12, "gtol": 1e-15},
    "lm": {"ftol": 1e-15, "xtol": 1e-12, "gtol": 1e-15},
    "gauss-newton-plain": {"xtol": 1e-12},
}


def _experiment_residuals(experiment, params, free, trajectory):
    # strict=False: least_squares_fit checked the costs once, before the first call
    return experiment_residuals(experiment, params, free, strict=False, trajectory=trajectory)


class Residuals:
    """r(w) and dr/dw of the summed least-squares costs at scaled free parameters w.

    Remembers the trajectories of the last point (scipy asks for the Jacobian where it last
    evaluated r), counts simulations and tangent sweeps.
    """

    def __init__(self, experiments, free, scales, executor: Executor | None = None):
        self.experiments, self.free, self.scales = list(experiments), list(free), scales
        self.executor = executor
        self.labels = experiment_labels(self.experiments)
        self.simulations = 0
        self.jacobians = 0
        self.size: int | None = None
        self._key: bytes | None = None
        self._results: list | None = None          # of the point self._key
        self._jac: tuple = (None, None)
        self.last_point: dict | None = None

    def physical(self, w) -> dict:
        return {k: float(v) for k, v in zip(self.free, np.asarray(w) * self.scales)}

    def _map(self, params, free, trajectories):
        # the residuals keep the trajectory (states only): the Jacobian at the same point runs
        # the tangent on it, refactorising each step's Newton matrix (the same numbers as
        # stored factorisations, and cheaper than writing one (n+m)^2 matrix per step)
        exps = self.experiments
        trajs = trajectories or [None] * len(exps)
        return map_calls(_experiment_residuals,
                         [(e, params, free, tr) for e, tr in zip(exps, trajs)], self.executor)

    def residuals(self, w) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        key = w.tobytes()
        if key != self._key:
            self._key, self._results = None, None
            params = self.last_point = self.physical(w)
            results = self._map(params, None, None)
            self.simulations += len(results)
            self._key, self._results = key, results
            self.size = sum(res.r.size for res in results)
        return np.concatenate([res.r for res in self._last_results()])

    def cost_parts(self) -> dict:
        """{experiment label: its cost 1/2 |r|^2} at the last point."""
        return {lab: 0.5 * float(np.dot(res.r, res.r))
                for lab, res in zip(self.labels, self._last_results())}

    def jacobian(self, w) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        key = w.tobytes()
        if key == self._jac[0]:
            return self._jac[1]
        if key != self._key:
            self.residuals(w)
        params = self.physical(w)
        trajs = [res.trajectory for res in self._last_results()]
        results = self._map(params, self.free, trajs)
        self.jacobians += len(results)
        J = np.vstack([res.jacobian() for res in results]) * self.scales
        self._jac = (key, J)
        return J

    def _last_results(self) -> list:
        """The experiments' residuals at the last point (``residuals`` computed them)."""
        if self._results is None:
            raise RuntimeError("no residuals yet: call residuals(w) first")
        return self._results

    def safe_residuals(self, w) -> np.ndarray:
        """residuals, or infinities where the simulation fails (trf then shrinks its
        trust region)."""
        try:
            return self.residuals(w)
        except (SimulationError, PODModeError):
            if self.size is None:
                raise
            self._key = None
            return np.full(self.size, np.inf)


def residuals_and_jacobian(experiments, free, values, executor=None
                           ) -> tuple[np.ndarray, np.ndarray]:
    """(r, dr/dp) of the experiments' least-squares costs at ``values`` of ``free``:
    r stacked over experiments and fitted outputs, dr/dp in physical units."""
    res = Residuals(experiments, free, np.ones(len(free)), executor)
    w = np.array([float(values[k]) for k in free])
    return res.residuals(w), res.jacobian(w)


def least_squares_fit(exps, free, start, scales, scaled_bounds, *, method, max_iterations,
                      options, progress, executor, result_type):
    """Run a sum-of-squares method; returns ``result_type`` (IdentificationResult) with
    ``n_simulations`` forward sweeps and ``n_gradients`` tangent sweeps (per experiment)."""
    if method not in LEAST_SQUARES_METHODS:
        raise InputError(f"not a least-squares method: {method!r}")
    if scaled_bounds and method != "least_squares":
        raise InputError(f"method {method!r} takes no bounds; use method='least_squares'")
    check_least_squares_costs(exps)
    res = Residuals(exps, free, scales, executor)
    w0 = np.array([start[k] for k in free]) / scales
    t_start = time.perf_counter()
    r0 = res.residuals(w0)
    if not np.all(np.isfinite(r0)):
        raise SimulationError(f"the residuals are not finite at the start values {start}")
    J0 = 0.5 * float(np.dot(r0, r0))
    history = []

    def record(w, r):
        entry = {"iteration": len(history), "cost": 0.5 * float(np.dot(r, r)),
                 "values": res.physical(w), "scaled": np.asarray(w).tolist()}
        history.append(entry)
        report(entry, progress)

    opts = {**DEFAULT_LEAST_SQUARES_OPTIONS[method], **dict(options or {})}
    try:
        w, message, success = _run(method, res, w0, scaled_bounds, record, opts,
                                   max_iterations)
    except SimulationError as exc:
        # only trf backs off from a failed simulation; lm and the plain steps cannot
        last = history[-1]["values"] if history else start
        raise SimulationError(f"method {method!r} stepped from {last} to {res.last_point}, "
                              "where the simulation fails; method 'least_squares' (trust "
                              f"region) backs off from such steps. {exc}") from exc
    n_iterations = max(len(history) - 1, 0)
    r = res.residuals(w)
    Jw = res.jacobian(w)
    g = Jw.T @ r / scales
    return result_type(
        free=list(free), start=dict(start), values=res.physical(w),
        scales=dict(zip(free, scales.tolist())), start_cost=J0, cost=0.5 * float(np.dot(r, r)),
        gradient=dict(zip(free, g.tolist())), history=history, n_iterations=n_iterations,
        n_simulations=res.simulations, n_gradients=res.jacobians,
        wall_time=time.perf_counter() - t_start, success=success, message=message,
        method=method, experiment_costs=res.cost_parts(),
    )


def _run(method, res, w0, scaled_bounds, record, opts, max_iterations):
    """(w, message, success) of one method from w0."""
    if method == "gauss-newton-plain":
        return _plain_gauss_newton(res, w0, record, opts, max_iterations)

    def jac(w):
        # scipy asks for the Jacobian once per accepted iterate: one history line each
        J = res.jacobian(w)
        record(w, res.residuals(w))
        return J

    lb = np.array([-np.inf if lo is None else lo for lo, _ in scaled_bounds]) \
        if scaled_bounds else -np.inf
    ub = np.array([np.inf if hi is None else hi for _, hi in scaled_bounds]) \
        if scaled_bounds else np.inf
    opts.setdefault("max_nfev", int(max_iterations))
    fun = res.safe_residuals if method == "least_squares" else res.residuals
    out = optimize.least_squares(fun, w0, jac=jac, bounds=(lb, ub),
                                 method="trf" if method == "least_squares" else "lm", **opts)
    return out.x, str(out.message), bool(out.status > 0)


def _plain_gauss_newton(res: Residuals, w, record, opts, max_iterations):
    """Eq. (22): w <- w - (J^T J)^-1 J^T r, full steps, until |dw| <= xtol (xtol + |w|)."""
    xtol = float(opts.get("xtol", 1e-12))
    unknown = set(opts) - {"xtol"}
    if unknown:
        raise InputError(f"gauss-newton-plain takes only the option xtol, got {sorted(unknown)}")
    w = np.asarray(w, dtype=float)
    for _ in range(int(max_iterations)):
        r = res.residuals(w)
        J = res.jacobian(w)
        record(w, r)
        dw = np.linalg.lstsq(J, -r, rcond=None)[0]
        w = w + dw
        if np.max(np.abs(dw)) <= xtol * (xtol + np.max(np.abs(w))):
            record(w, res.residuals(w))
            return w, f"converged: step {np.max(np.abs(dw)):.2e} <= xtol", True
    record(w, res.residuals(w))
    return w, f"stopped after {max_iterations} iterations without converging", False
