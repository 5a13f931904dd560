"""Optimality criteria of the (scaled) Fisher information and their derivatives.

Each criterion is a function Phi(F) of the scaled Fisher matrix F (symmetric positive
(semi-)definite, n_b x n_b) that is *minimised*, with its derivative G = dPhi/dF (symmetric).
With dPhi = tr(G dF) and F = W (sum_i eta_i S_i^T R^-1 S_i) W, the derivative with respect to
the output sensitivities is dPhi/dS_i = 2 eta_i R^-1 S_i W G W (input-design spec 3.2), the
source of the second-order sweep for every criterion.

| name    | Phi                       | G                                  |
|---------|---------------------------|------------------------------------|
| "trace" | -tr F                     | -I        (the paper's "A-optimality": maximise tr F) |
| "A"     | tr F^-1                   | -F^-2     (classical A: the mean variance)  |
| "D"     | -ln det F                 | -F^-1                              |
| "E"     | -lambda_min(F)            | -v v^T    (v: unit eigenvector)    |
| "cond"  | ln(lambda_max/lambda_min) | v_max v_max^T/lambda_max - v_min v_min^T/lambda_min |

The paper maximises the trace and calls it A-optimality; the classical A criterion minimises
tr F^-1. symdae names them apart. E and cond are smooth only where the extreme eigenvalue is
simple: a warning is issued when its gap falls below 1e-8 lambda_max.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, NotIdentifiableError

__all__ = ["CRITERIA", "CriterionValue", "criterion", "EigenvalueGapWarning", "GAP_WARNING"]

CRITERIA = ("trace", "A", "D", "E", "cond")
# the relative eigenvalue gap below which E and cond are called non-smooth
GAP_WARNING = 1e-8
# lambda_min / lambda_max at or below which F counts as singular for A, D, E, cond
_RCOND = 1e-14


class EigenvalueGapWarning(RuntimeWarning):
    """The extreme eigenvalue of F is (nearly) repeated: E/cond are not differentiable there."""


@dataclass(frozen=True)
class CriterionValue:
    name: str
    value: float            # Phi(F)
    G: np.ndarray           # dPhi/dF, symmetric


def _positive_definite(F: np.ndarray, name: str):
    lam, V = np.linalg.eigh(F)
    if not lam[-1] > 0 or not lam[0] > _RCOND * lam[-1]:
        raise NotIdentifiableError(
            f"criterion {name!r} needs a positive definite Fisher information, but its "
            f"eigenvalues are {lam.tolist()}: the outputs do not determine the parameter "
            f"combination {np.round(V[:, 0], 4).tolist()} for this input; use the 'trace' "
            "criterion or start from a richer input", [])
    return lam, V


def _gap(lam: np.ndarray, k: int, name: str) -> None:
    if lam.size > 1:
        other = np.delete(lam, k)
        gap = np.min(np.abs(other - lam[k]))
        if gap < GAP_WARNING * abs(lam[-1]):
            warnings.warn(f"criterion {name!r}: the eigenvalue {lam[k]:.6g} of the Fisher "
                          f"information is repeated to {gap:.2e}; the criterion is not "
                          "differentiable there", EigenvalueGapWarning, stacklevel=3)


def criterion(name: str, F: np.ndarray) -> CriterionValue:
    """Phi(F) and G = dPhi/dF for the criterion called ``name`` (see the module table)."""
    if name not in CRITERIA:
        raise InputError(f"unknown criterion {name!r}; criteria: {', '.join(CRITERIA)}")
    F = 0.5 * (np.asarray(F, dtype=float) + np.asarray(F, dtype=float).T)
    nb = F.shape[0]
    if not np.all(np.isfinite(F)):
        raise InputError("the Fisher information contains NaN or infinity")
    if name == "trace":
        return CriterionValue(name, -float(np.trace(F)), -np.eye(nb))
    lam, V = _positive_definite(F, name)
    if name == "A":
        Finv = (V / lam) @ V.T
        return CriterionValue(name, float(np.sum(1.0 / lam)), -Finv @ Finv)
    if name == "D":
        return CriterionValue(name, -float(np.sum(np.log(lam))), -(V / lam) @ V.T)
    if name == "E":
        _gap(lam, 0, name)
        v = V[:, 0]
        return CriterionValue(name, -float(lam[0]), -np.outer(v, v))
    _gap(lam, 0, name)
    _gap(lam, nb - 1, name)
    vmin, vmax = V[:, 0], V[:, -1]
    G = np.outer(vmax, vmax) / lam[-1] - np.outer(vmin, vmin) / lam[0]
    return CriterionValue(name, float(np.log(lam[-1] / lam[0])), G)
