"""Backends: the HHT sweeps behind a written contract (:mod:`symdae.backends.base`).

``compiled`` runs the Cython core over a generated kernel module (imported only when used, so
``import symdae`` works without a compiler or a built core); ``numpy`` runs lambdified kernels
and NumPy sweeps (the test oracle and the no-compiler fallback).
"""
from .base import (AdjointResult, Counters, ForwardResult, Grid, SweepReport, TangentArrays,
                   STATUSES)

__all__ = ["AdjointResult", "Counters", "ForwardResult", "Grid", "SweepReport",
           "TangentArrays", "STATUSES", "BACKENDS"]

BACKENDS = ("auto", "compiled", "numpy")
