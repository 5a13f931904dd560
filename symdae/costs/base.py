"""The cost interface: a cost maps the output trajectory S (samples x outputs) to J and dJ/dS.

Every cost returns its value J and dJ/dS, the derivative with respect to every output sample;
the discrete adjoint takes dJ/dS as its source term, so any cost built on outputs gets an exact
gradient (:func:`symdae.sensitivity.adjoint_gradient`). Costs add with ``+``.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError, UnknownNameError

__all__ = ["Cost", "CostSum", "quadrature_weights", "QUADRATURES"]

QUADRATURES = ("left", "trapezoid", "sum")


def quadrature_weights(t: np.ndarray, rule="left") -> np.ndarray:
    """Weights eta_i of sum_i eta_i f(t_i) ~ integral of f.

    ``left``: eta_i = t_{i+1} - t_i, last sample 0 (the paper's eq. 4 with eta_i = h,
    i = 0..N-1); ``trapezoid``: the trapezoidal rule; ``sum``: eta_i = 1; or an array.
    """
    t = np.asarray(t, dtype=float)
    if not isinstance(rule, str):
        eta = np.asarray(rule, dtype=float)
        if eta.shape != t.shape:
            raise InputError(f"quadrature weights have shape {eta.shape}, expected {t.shape}")
        return eta
    if rule not in QUADRATURES:
        raise InputError(f"quadrature must be one of {QUADRATURES} or an array, got {rule!r}")
    if rule == "sum":
        return np.ones_like(t)
    dt = np.diff(t)
    if rule == "left":
        return np.concatenate([dt, [0.0]])
    eta = np.zeros_like(t)
    eta[:-1] += dt / 2
    eta[1:] += dt / 2
    return eta


class Cost:
    """Base class: ``evaluate(system, traj) -> (J, dJ/dS)`` with dJ/dS of shape (N+1, n_s)."""

    def evaluate(self, system, traj):  # pragma: no cover - interface
        raise NotImplementedError

    def __add__(self, other: "Cost") -> "CostSum":
        return CostSum([self, other])

    def __radd__(self, other):
        # lets sum([cost1, cost2]) start from 0
        if isinstance(other, (int, float)) and other == 0:
            return self
        return NotImplemented

    @staticmethod
    def _column(system, name: str) -> int:
        names = system.model.output_names
        if name not in names:
            raise UnknownNameError(f"the model has no output {name!r}; its outputs are {names}")
        return names.index(name)


class CostSum(Cost):
    """The sum of several costs on the same trajectory."""

    def __init__(self, costs):
        self.costs = []
        for c in costs:
            self.costs.extend(c.costs if isinstance(c, CostSum) else [c])

    def evaluate(self, system, traj):
        J, dS = 0.0, np.zeros((len(traj.t), system.sizes.n_s))
        for c in self.costs:
            j, d = c.evaluate(system, traj)
            J += j
            dS += d
        return J, dS


