"""Reductions over a trajectory's arrays: the least-squares sum of one fitted output and the
first non-finite output sample.

The compiled core's (symdae/simulation/core/reductions.pyx: one pass, no temporary arrays),
or NumPy's where the core was not built; both give the same numbers bit for bit.
"""
from __future__ import annotations

import numpy as np

try:
    from .core import reductions as _compiled  # type: ignore[attr-defined]
except ImportError:          # the core was not built: NumPy's
    _compiled = None

__all__ = ["first_nonfinite", "least_squares"]


def least_squares(s: np.ndarray, ref: np.ndarray, w: np.ndarray,
                  g: np.ndarray | None = None) -> float:
    """sum_i w_i (s_i - ref_i)^2 of float64 vectors of one length (views may be strided),
    summed as ``np.sum`` sums; with ``g`` (a float64 vector, written in place) also
    g_i += w_i (s_i - ref_i)."""
    if _compiled is not None and s.dtype == np.float64:
        return _compiled.least_squares(s, ref, w, g)
    r = s - ref
    wr = w * r
    if g is not None:
        g += wr
    # the product in place (r is not needed after it); an elementwise sum, not np.dot: a BLAS
    # dot of >= 10 001 samples wakes OpenBLAS's thread pool (symdae/threads.py)
    return float(np.sum(np.multiply(wr, r, out=r)))


def first_nonfinite(S: np.ndarray) -> tuple[int, int] | None:
    """(row, column) of the first NaN or infinity of the float64 matrix S in row order, or
    None when every entry is finite."""
    if _compiled is not None and S.dtype == np.float64:
        return _compiled.first_nonfinite(S)
    if np.isfinite(S).all():
        return None
    i, j = np.argwhere(~np.isfinite(S))[0]
    return int(i), int(j)
