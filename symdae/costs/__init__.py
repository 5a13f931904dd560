"""Costs on the output trajectory: each returns J and dJ/dS, the adjoint's source term.

``base``: the interface, sums and quadrature weights; ``time_domain``: least squares against
data and output integrals; ``pod``: costs on proper orthogonal mode coefficients.
"""
from .base import QUADRATURES, Cost, CostSum, quadrature_weights
from .time_domain import LeastSquares, OutputIntegral
from .pod import PODCost, PODCostRecord

__all__ = ["Cost", "CostSum", "quadrature_weights", "QUADRATURES", "LeastSquares",
           "OutputIntegral", "PODCost", "PODCostRecord"]
