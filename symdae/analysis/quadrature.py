"""Quadrature weights of integrals over a time grid: sum_i eta_i f(t_i) ~ integral of f dt.

Shared by the costs, the POD decomposition, the Fisher information and input design.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["quadrature_weights", "QUADRATURES"]

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
