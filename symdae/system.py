"""A compiled model: its kernels plus validated entry points to the compiled sweeps."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .core import _hht
from .errors import (InputError, ModelError, NewtonError, SimulationError, SingularMatrixError,
                     UnknownNameError)
from .initial import InitialState, initial_state
from .scenario import Scenario
from .trajectory import Trajectory

__all__ = ["System", "SweepData"]
_STATUS = _hht.STATUS


@dataclass
class SweepData:
    """What a forward sweep leaves for the tangent and adjoint sweeps."""

    p: np.ndarray          # padded to length >= 1
    U: np.ndarray          # (N+1, n_u)
    LU: np.ndarray | None  # (N+1, nm, nm) factorised Newton matrices at accepted states
    PIV: np.ndarray | None
    TAU: np.ndarray | None  # (N+1, n_tau) the hoisted time terms at each state
    x0: InitialState
    t0: float
    h: float
    N: int
    alpha: float


def _call_on_grid(f, t: np.ndarray, name: str) -> np.ndarray:
    """f on the whole grid; a scalar function (math.sin) is called sample by sample."""
    try:
        x = np.asarray(f(t), dtype=float)
    except TypeError:
        x = None
    if x is None or x.shape != t.shape:
        try:
            x = np.array([float(f(float(ti))) for ti in t])
        except (TypeError, ValueError) as exc:
            raise InputError(f"input {name!r}: the callable accepts neither the time grid "
                             f"(an array) nor a single time: {exc}") from None
    return x


class System:
    """A model whose kernels are compiled and loaded. Made by :meth:`Model.compile`.

    Attributes: ``model``, ``kernels`` (the core's view of the kernel table), ``build_info``
    (cache key, folder, whether the cache was hit, timings of a cold build).
    """

    def __init__(self, model, module, build_info: dict | None = None):
        self.model = model
        self.module = module
        self.kernels = _hht.Kernels(module)
        self.build_info = dict(build_info or {})
        k = self.kernels
        expected = (model.n, model.m, len(model.parameters), len(model.inputs),
                    len(model.outputs))
        if (k.n, k.m, k.n_p, k.n_u, k.n_s) != expected:
            raise ModelError(f"compiled module {module.__name__} has sizes "
                             f"{(k.n, k.m, k.n_p, k.n_u, k.n_s)}, the model {expected}")

    # ------------------------------------------------------------------ run-time data
    def parameter_vector(self, params: Mapping | None = None) -> np.ndarray:
        """Nominal values overridden by ``params`` ({name: value}), in model order."""
        names = self.model.parameter_names
        p = np.array(self.model.nominal_values, dtype=float)
        for key, val in (params or {}).items():
            name = key if isinstance(key, str) else getattr(key, "name", str(key))
            if name not in names:
                raise UnknownNameError(f"unknown parameter {name!r}; the model's parameters "
                                       f"are {names}")
            try:
                x = float(val)
            except (TypeError, ValueError):
                raise InputError(f"value of parameter {name!r} is not a number: {val!r}") \
                    from None
            if not math.isfinite(x):
                raise InputError(f"value of parameter {name!r} is not finite: {val!r}")
            p[names.index(name)] = x
        return p

    def input_array(self, inputs: Mapping | None, t: np.ndarray) -> np.ndarray:
        """(N+1, n_u) input values on the grid from {name: array | callable | number}."""
        names = self.model.input_names
        U = np.zeros((len(t), len(names)))
        given = dict(inputs or {})
        for key in given:
            if key not in names:
                raise UnknownNameError(f"unknown input {key!r}; the model's inputs are {names}")
        for k, name in enumerate(names):
            if name not in given:
                raise InputError(f"no values for input {name!r}: pass inputs={{{name!r}: "
                                 "array on the time grid, callable f(t) or constant}")
            val = given[name]
            x = np.asarray(_call_on_grid(val, t, name) if callable(val) else val, dtype=float)
            x = np.broadcast_to(x, t.shape) if x.ndim == 0 else x
            if x.shape != t.shape:
                raise InputError(f"input {name!r} has shape {x.shape}, expected {t.shape} "
                                 "(one value per time step, t0..t_end)")
            bad = np.flatnonzero(~np.isfinite(x))
            if bad.size:
                raise InputError(f"input {name!r} is NaN or infinite at t = {t[bad[0]]:g} "
                                 f"(step {bad[0]})")
            U[:, k] = x
        return U

    # ------------------------------------------------------------------ forward
    def simulate(self, scenario: Scenario | Mapping | None = None, *,
                 params: Mapping | None = None, store_factorizations: bool = False,
                 **fields) -> Trajectory:
        """Integrate with the HHT scheme of the discrete-adjoint paper, eq. (15).

        Parameters
        ----------
        scenario:
            A :class:`Scenario` (time grid, alpha, inputs, initial state, Newton options);
            its fields may also be given, or overridden, as keywords:
            ``simulate(t_end=1.0, h=1e-4, alpha=-0.1)``.
        params:
            {name: value} overriding the nominal values. Never triggers a recompile.
        store_factorizations:
            Keep the factorised Newton matrix of every step for tangent/adjoint sweeps.

        Returns a Trajectory. Raises InconsistentInitialStateError, SingularMatrixError,
        NewtonError or SimulationError with the time step and residual.
        """
        t_start = time.perf_counter()
        sc = Scenario.make(scenario, **fields)
        model, k = self.model, self.kernels
        n, m, nm = model.n, model.m, model.n + model.m
        N, t0, h, alpha = sc.n_steps, sc.t0, sc.h, sc.alpha
        sc.check_memory(8 * (3 * n + m + k.n_s + k.n_u + 1))
        if store_factorizations:
            sc.check_memory(8 * (nm * nm + k.n_tau) + 4 * nm + 8 * (3 * n + m + k.n_s),
                            "the trajectory and the stored factorisations")
        t = sc.times
        p = self.parameter_vector(params)
        U = self.input_array(sc.inputs, t)
        x0 = initial_state(k, model, p, t0, U[0], sc.q0, sc.v0, tol=sc.init_tol,
                           project=sc.project)

        Q, V, A = np.empty((N + 1, n)), np.empty((N + 1, n)), np.empty((N + 1, n))
        L = np.empty((N + 1, m))
        S = np.zeros((N + 1, k.n_s))
        Q[0], V[0], A[0], L[0] = x0.q, x0.v, x0.a, x0.lam
        if store_factorizations:
            # every entry is written by the sweep
            LU = np.empty((N + 1, nm, nm))
            PIV = np.empty((N + 1, nm), dtype=np.intc)
            TAU = np.empty((N + 1, k.n_tau))
        else:
            LU = PIV = TAU = None
        counters = np.zeros(4, dtype=np.intp)
        info = np.array([0.0, 0.0, 0.0, 0.0, -1.0, 0.0])
        p_pad = np.concatenate([p, [0.0]])
        status = _hht.forward(k, t0, h, N, alpha, p_pad, U, Q, V, A, L, S,
                              LU, PIV, TAU, sc.rtol, sc.max_iter, counters, info)
        if status != _STATUS["OK"]:
            self._raise(status, info, N, h)
        wall = time.perf_counter() - t_start
        return Trajectory(
            t=t, q=Q, v=V, a=A, lam=L,
            outputs={name: S[:, j] for j, name in enumerate(model.output_names)},
            counters=dict(steps=int(counters[0]), newton_iterations=int(counters[1]),
                          factorizations=int(counters[2]),
                          jacobian_refreshes=int(counters[3])),
            params=dict(zip(model.parameter_names, p.tolist())), scenario=sc,
            coordinate_names=model.coordinate_names, wall_time=wall,
            _sweep=SweepData(p_pad, U, LU, PIV, TAU, x0, t0, h, N, alpha),
        )

    def _raise(self, status: int, info: np.ndarray, N: int, h: float):
        t, step, iters, rnorm, idx, r_first = info
        where = f"t = {t:.9g} (step {int(step)} of {N}, h = {h:g})"
        if status == _STATUS["NEWTON_FAILED"]:
            how = "did not converge"
            if idx >= 0:
                how = ("diverged (the Newton matrix became singular at an iterate far from the "
                       "solution)")
            elif rnorm > 1e3 * r_first:
                how = "diverged"
            raise NewtonError(
                f"Newton's method {how} at {where} after {int(iters)} iterations; residual "
                f"max-norm {r_first:.3e} at the first iterate, {rnorm:.3e} at the last. Reduce "
                "h, check the parameter values, or raise max_iter.", time=float(t),
                step=int(step), iterations=int(iters), residual_norm=float(rnorm))
        if status == _STATUS["SINGULAR"]:
            names = self.model.coordinate_names + [f"constraint {j}" for j in range(self.model.m)]
            j = int(idx)
            what = names[j] if 0 <= j < len(names) else f"row {j}"
            raise SingularMatrixError(
                f"the Newton matrix of eq. (16) is singular at {where}: pivot {j} (about "
                f"{what}) vanished; a zero mass or redundant constraints make the augmented "
                "matrix singular")
        if status == _STATUS["NOT_FINITE"]:
            raise SimulationError(f"NaN or infinity in the residual or Newton matrix at {where}"
                                  f" (residual max-norm {rnorm:.3e}); check the model's "
                                  "expressions (division by zero, overflow) and the step h")
        raise SimulationError(f"HHT sweep failed with status {status} at {where}")

    # ------------------------------------------------------------------ kernels
    def evaluate(self, kernel: str, t: float, q, v, a, lam, params: Mapping | None = None,
                 u=None, w=None) -> np.ndarray:
        """Evaluate one generated kernel at one state (flat output, see symdae_kernels.h)."""
        p = self.parameter_vector(params)
        u = np.zeros(self.kernels.n_u) if u is None else u
        return self.kernels.evaluate(kernel, float(t), q, v, a, lam, p, u, w=w)

    def __repr__(self) -> str:
        return f"System({self.model!r}, folder={self.build_info.get('folder')!r})"
