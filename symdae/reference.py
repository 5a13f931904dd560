"""Pure-NumPy reference backend: the kernels of a DerivedSystem, lambdified.

This is the test oracle for the generated Cython kernels and a fallback where no C compiler
exists; it is never the fast path (no CSE across entries, one Python call per kernel).
:meth:`LambdifiedKernels.evaluate` has the signature and the flat output layout of
``Kernels.evaluate`` of the compiled core (see ``symdae/core/symdae_kernels.h``); accumulating
kernels (the ``*_vjp`` ones) return their contribution added to zero.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import sympy as sp

from .derivation import KERNEL_NAMES, DerivedSystem, kernel_table

__all__ = ["LambdifiedKernels", "lambdify_flat"]

_ARRAYS = ("q", "v", "a", "lam", "p", "u")


def lambdify_flat(ds: DerivedSystem, exprs) -> Callable[..., np.ndarray]:
    """f(t, q, v, a, lam, p, u, w) -> float array of ``exprs`` (expressions in ds's symbols).

    Each kernel symbol is replaced by an entry of one argument vector, so symbol names (which
    are not Python identifiers: ``q[0]``) never reach the generated function.
    """
    S = ds.symbols
    slots = [S.t] + [s for arr in _ARRAYS for s in getattr(S, arr)] + list(ds.w)
    X = sp.IndexedBase("X")
    rep = {s: X[i] for i, s in enumerate(slots)}
    exprs = [sp.sympify(e) for e in exprs]
    nonzero = [i for i, e in enumerate(exprs) if e != 0]
    f = sp.lambdify([X], [exprs[i].xreplace(rep) for i in nonzero], modules="numpy")
    size = len(exprs)
    sizes = [len(getattr(S, arr)) for arr in _ARRAYS]

    def evaluate(t, q, v, a, lam, p, u, w=None) -> np.ndarray:
        parts = [np.atleast_1d(np.asarray(t, dtype=float))]
        for arr, k, x in zip(_ARRAYS, sizes, (q, v, a, lam, p, u)):
            x = np.asarray(x, dtype=float).reshape(-1)
            if x.shape[0] != k:
                raise ValueError(f"{arr} has {x.shape[0]} entries, expected {k}")
            parts.append(x)
        wv = np.zeros(0) if w is None else np.asarray(w, dtype=float).reshape(-1)
        if wv.shape[0] > len(ds.w):
            raise ValueError(f"w has {wv.shape[0]} entries, at most {len(ds.w)}")
        parts.append(np.concatenate([wv, np.zeros(len(ds.w) - wv.shape[0])]))
        out = np.zeros(size)
        if nonzero:
            out[nonzero] = np.asarray(f(np.concatenate(parts)), dtype=float)
        return out

    return evaluate


class LambdifiedKernels:
    """Every kernel of ``derived`` as a NumPy function; same call and layout as the compiled
    ``Kernels.evaluate``. Lambdifies lazily, one kernel at a time."""

    def __init__(self, derived: DerivedSystem):
        self.derived = derived
        sz = derived.sizes
        self.n, self.m, self.n_p, self.n_u, self.n_s = (sz[k] for k in
                                                        ("n", "m", "n_p", "n_u", "n_s"))
        self._table = kernel_table(derived)
        self._fns: dict = {}

    def evaluate(self, name: str, t, q, v, a, lam, p, u, w=None) -> np.ndarray:
        """Evaluate kernel ``name`` at one state; returns its flat output.

        ``w`` (newton: (c_m, c_q, c_v); the vjp kernels: their weight vectors) fills the weight
        slots from the start, the rest are zero.
        """
        if name not in self._table:
            raise KeyError(f"unknown kernel {name!r}; kernels: {', '.join(KERNEL_NAMES)}")
        if name not in self._fns:
            self._fns[name] = lambdify_flat(self.derived, self._table[name][0])
        return self._fns[name](t, q, v, a, lam, p, u, w)
