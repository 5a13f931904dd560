"""Costs on the output trajectory: each returns J and dJ/dS, the adjoint's source term.

``base``: the interface, sums and quadrature weights; ``time_domain``: least squares against
data and output integrals.
"""
from .base import QUADRATURES, Cost, CostSum, quadrature_weights
from .time_domain import LeastSquares, OutputIntegral

__all__ = ["Cost", "CostSum", "quadrature_weights", "QUADRATURES", "LeastSquares",
           "OutputIntegral"]
