"""Backends: the HHT sweeps behind a written contract (:mod:`symdae.simulation.backends.base`).

``compiled`` runs the Cython core over a generated kernel module (imported only when used, so
``import symdae`` works without a compiler or a built core); ``numpy`` runs lambdified kernels
and NumPy sweeps (the test oracle and the no-compiler fallback).
"""
