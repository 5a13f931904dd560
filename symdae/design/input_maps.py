"""Bounded input parameterisations for optimal input design.

An input u with bounds u- < u+ is written as u = psi(z) on an unconstrained variable z
(input-design paper, section 2.4), so that a quasi-Newton method can run without bounds:

* ``"arctan"`` (eq. 18, the paper's): psi(z) = (u+ + u-)/2 + s arctan(z / s), s = (u+ - u-)/pi;
* ``"logistic"`` (eq. 17): psi(z) = u+ - (u+ - u-) / (1 + exp(s z)), s = 4 / (u+ - u-);
* ``"box"``: psi(z) = z, with the bounds handed to L-BFGS-B instead.

Both smooth maps have psi(0) = (u+ + u-)/2 and psi'(0) = 1. The input samples U_1..U_N of a
designed input are psi(B c): the grid itself (B = I, the paper's), piecewise-linear on knots
(B: hat functions) or a user basis B (N x K). U_0 is held fixed (symdae.input_adjoint).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

__all__ = ["BOUND_MAPS", "BoundMap", "bound_map", "knot_basis", "InputBasis", "input_basis"]

BOUND_MAPS = ("arctan", "logistic", "box")


@dataclass(frozen=True)
class BoundMap:
    """u = psi(z) into [lower, upper] (``kind``: arctan, logistic or box)."""

    kind: str
    lower: float
    upper: float

    @property
    def _mid(self) -> float:
        return 0.5 * (self.upper + self.lower)

    @property
    def _s(self) -> float:
        width = self.upper - self.lower
        return width / math.pi if self.kind == "arctan" else 4.0 / width

    def value(self, z: np.ndarray) -> np.ndarray:
        """The bounded input value of the unbounded variable ``z``."""
        z = np.asarray(z, dtype=float)
        if self.kind == "arctan":
            return self._mid + self._s * np.arctan(z / self._s)
        if self.kind == "logistic":
            # the same function written so that exp never overflows
            return self.lower + (self.upper - self.lower) * _expit(self._s * z)
        return z.copy()

    def derivative(self, z: np.ndarray) -> np.ndarray:
        """The map's derivative at ``z``."""
        z = np.asarray(z, dtype=float)
        if self.kind == "arctan":
            return 1.0 / (1.0 + (z / self._s) ** 2)
        if self.kind == "logistic":
            e = _expit(self._s * z)
            return (self.upper - self.lower) * self._s * e * (1.0 - e)
        return np.ones_like(z)

    def inverse(self, u: np.ndarray, name: str = "u") -> np.ndarray:
        """z with psi(z) = u; InputError if u is not inside the bounds (strictly inside for
        the smooth maps, which reach the bounds only at infinity)."""
        u = np.asarray(u, dtype=float)
        if self.kind == "box":
            bad = (u < self.lower) | (u > self.upper)
        else:
            bad = (u <= self.lower) | (u >= self.upper)
        if np.any(bad):
            k = int(np.flatnonzero(bad)[0])
            where = "inside" if self.kind == "box" else "strictly inside"
            raise InputError(f"the initial input {name!r} is {float(u.flat[k]):.6g} at sample "
                             f"{k + 1}, outside its bounds: it must lie {where} "
                             f"[{self.lower:g}, {self.upper:g}] (the {self.kind} map)")
        if self.kind == "arctan":
            return self._s * np.tan((u - self._mid) / self._s)
        if self.kind == "logistic":
            return np.log((u - self.lower) / (self.upper - u)) / self._s
        return u.copy()


def _expit(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def bound_map(kind: str, lower, upper, name: str = "u") -> BoundMap:
    """A validated BoundMap (InputError names the input when lower >= upper)."""
    if kind not in BOUND_MAPS:
        raise InputError(f"unknown bound map {kind!r}; maps: {', '.join(BOUND_MAPS)}")
    try:
        lo, hi = float(lower), float(upper)
    except (TypeError, ValueError):
        raise InputError(f"bounds of input {name!r} must be two numbers (lower, upper), got "
                         f"{(lower, upper)!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InputError(f"bounds of input {name!r} must be finite, got ({lo}, {hi})")
    if not lo < hi:
        raise InputError(f"bounds of input {name!r}: the lower bound {lo:g} must be below the "
                         f"upper bound {hi:g}")
    return BoundMap(kind, lo, hi)


def knot_basis(t: np.ndarray, knots) -> np.ndarray:
    """(len(t), K) hat functions on the knot times: piecewise-linear interpolation of the
    knot values (a partition of unity, so knot values inside bounds keep U inside them)."""
    t = np.asarray(t, dtype=float)
    knots = np.asarray(knots, dtype=float)
    if knots.ndim != 1 or knots.size < 2 or np.any(np.diff(knots) <= 0):
        raise InputError("knots must be at least two strictly increasing times")
    if knots[0] > t[0] + 1e-12 or knots[-1] < t[-1] - 1e-12:
        raise InputError(f"knots [{knots[0]:g}, {knots[-1]:g}] must cover the designed "
                         f"samples [{t[0]:g}, {t[-1]:g}]")
    return np.column_stack([np.interp(t, knots, np.eye(knots.size)[k])
                            for k in range(knots.size)])


@dataclass(frozen=True)
class InputBasis:
    """U_1..U_N = B c for one designed input (``kind``: grid, knots or basis; B None for the
    grid, which is the identity)."""

    kind: str
    B: np.ndarray | None

    @property
    def partition_of_unity(self) -> bool:
        """Whether the basis functions sum to one (the grid, knots), so bounds on c bound U."""
        return self.B is None or self.kind == "knots"

    def size(self, N: int) -> int:
        """The number of coefficients on a grid of ``N`` steps."""
        return N if self.B is None else self.B.shape[1]

    def expand(self, c: np.ndarray) -> np.ndarray:
        """The input samples of the coefficients ``c`` (``B c``, or ``c`` on the grid)."""
        return c.copy() if self.B is None else self.B @ c

    def pullback(self, g: np.ndarray) -> np.ndarray:
        """d/dc of a function of U_1..N from its gradient g there."""
        return g.copy() if self.B is None else self.B.T @ g

    def fit(self, values: np.ndarray) -> np.ndarray:
        """c whose expansion is closest to ``values`` (least squares; exact for the grid)."""
        if self.B is None:
            return values.copy()
        return np.linalg.lstsq(self.B, values, rcond=None)[0]


def input_basis(spec, t_design: np.ndarray, name: str = "u") -> InputBasis:
    """``"grid"`` (default), ``{"knots": times}`` or ``{"basis": B}`` (N x K) for the N designed
    samples t_design = t_1..t_N."""
    N = t_design.size
    if spec is None or (isinstance(spec, str) and spec == "grid"):
        return InputBasis("grid", None)
    if isinstance(spec, dict) and set(spec) == {"knots"}:
        return InputBasis("knots", knot_basis(t_design, spec["knots"]))
    if isinstance(spec, dict) and set(spec) == {"basis"}:
        B = np.asarray(spec["basis"], dtype=float)
        if B.ndim != 2 or B.shape[0] != N or B.shape[1] < 1:
            raise InputError(f"the basis of input {name!r} must be an ({N}, K) matrix (one row "
                             f"per designed sample t_1..t_N), got shape {B.shape}")
        if not np.all(np.isfinite(B)):
            raise InputError(f"the basis of input {name!r} contains NaN or infinity")
        return InputBasis("basis", B)
    raise InputError(f"parameterisation of input {name!r} must be 'grid', {{'knots': times}} "
                     f"or {{'basis': matrix}}, got {spec!r}")
