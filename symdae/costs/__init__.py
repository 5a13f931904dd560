"""Costs on the output trajectory: each returns J and dJ/dS, the adjoint's source term.

``base``: the interface, sums and quadrature weights; ``time_domain``: least squares against
data and output integrals; ``windows``, ``fourier``, ``frequency``: window shapes, the Fourier
coefficients of outputs (a fixed linear map per grid) and costs on them; ``pod``: costs on
proper orthogonal mode coefficients.
"""
from .base import QUADRATURES, Cost, CostSum, quadrature_weights
from .fourier import (FourierMap, Line, Spectrum, Window, analysis_lines, band_lines,
                      fourier_coefficients, fourier_map)
from .frequency import KINDS, FourierCost, FourierEvaluation
from .time_domain import LeastSquares, OutputIntegral
from .pod import PODCost, PODCostRecord
from .windows import WindowShape, window_shape

__all__ = ["Cost", "CostSum", "quadrature_weights", "QUADRATURES", "LeastSquares",
           "OutputIntegral", "FourierCost", "FourierEvaluation", "KINDS", "Window", "Line",
           "Spectrum", "FourierMap", "fourier_map", "fourier_coefficients", "band_lines",
           "analysis_lines", "WindowShape", "window_shape", "PODCost", "PODCostRecord"]
