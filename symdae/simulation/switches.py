"""Switches of a non-smooth model along a trajectory: how often a switching function (the
argument of sign, Abs, Heaviside, a difference of Max's or Min's arguments, a Piecewise
condition; :func:`symdae.model.nonsmooth.switching_functions`) changes sign between two grid
points. Reported as ``counters["switches"]`` of a trajectory of a non-smooth model.

Counted from the grid values, after the sweep: the compiled core stays model-agnostic, and a
switch inside a step is exactly a sign change between its two grid points (two switches within
one step cancel and are not counted).
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ..model.nonsmooth import switching_functions

__all__ = ["SwitchCounter", "ROUNDOFF"]

# a switching function within this much of its largest value is on the switch: a step the
# Newton iteration ended on a switch leaves it at a few eps of its terms
ROUNDOFF = 64 * np.finfo(float).eps


def _model_expressions(model) -> list:
    exprs = list(model.forces) + list(model.constraints) + list(model.outputs.values())
    if model.mass_matrix is not None:
        exprs += list(model.mass_matrix)
    if model.lagrangian is not None:
        exprs.append(model.lagrangian)
    return [model.to_kernel(e) for e in exprs]


class SwitchCounter:
    """The switching functions of one model, lambdified once (NumPy, vectorised over time)."""

    def __init__(self, model):
        self.functions = switching_functions(_model_expressions(model))
        S = model.symbols
        self._args = (S.t,) + S.q + S.v + S.a + S.lam + S.p + S.u
        self._fn = None
        if self.functions:
            X = [sp.Dummy(f"x{i}") for i in range(len(self._args))]
            rep = dict(zip(self._args, X))
            self._fn = sp.lambdify([X], [f.xreplace(rep) for f in self.functions],
                                   modules="numpy")

    def values(self, t, q, v, a, lam, p, U) -> np.ndarray:
        """(N+1, n_f) values of the switching functions on the grid."""
        N = len(t)
        cols = [t] + [q[:, k] for k in range(q.shape[1])] + [v[:, k] for k in range(v.shape[1])] \
            + [a[:, k] for k in range(a.shape[1])] + [lam[:, k] for k in range(lam.shape[1])] \
            + [np.full(N, x) for x in p] + [U[:, k] for k in range(U.shape[1])]
        out = self._fn(cols)
        return np.column_stack([np.broadcast_to(np.asarray(f, dtype=float), (N,)) for f in out])

    def count(self, t, q, v, a, lam, p, U) -> tuple[int, int]:
        """(switches, steps on a switch): changes of the mode (-, 0, +) of every switching
        function between consecutive grid points, where 0 is a value within round-off of the
        switch (a step that ended on it, newton.pxd switch_search: a sticking friction), and
        the number of grid points where some switching function is there."""
        if self._fn is None:
            return 0, 0
        f = self.values(t, q, v, a, lam, p, U)
        floor = ROUNDOFF * np.max(np.abs(f), axis=0, initial=0.0)
        s = np.where(np.abs(f) <= floor, 0.0, np.sign(f))
        return int(np.count_nonzero(s[1:] != s[:-1])), int(np.count_nonzero(np.any(s == 0,
                                                                                axis=1)))
