"""Exact derivatives of the discrete HHT trajectory with respect to the parameters.

Two methods, both exact for the discrete scheme that :meth:`System.simulate` runs:

* :func:`tangent` (forward sensitivities): dx_i/dp along chosen directions; costs one
  linear solve per direction and step with the step's stored factorisation.
* :func:`adjoint_gradient` (discrete adjoint, paper eqs. 9 and 11): dJ/dp for all parameters
  from dJ/dS (the derivative of a cost with respect to every output sample) for about the
  price of one backward sweep, independent of the number of parameters.

Both include what the paper leaves out: C_q at q_{i+1} in eq. (19), d(C_q^T lam)/dp and dC/dp
in eq. (20), and the dependence of the consistent (q0, v0, a0, lam0) on p.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core import _hht
from .errors import SimulationError
from .initial import init_adjoint, init_tangent

__all__ = ["TangentResult", "tangent", "adjoint_gradient", "directions"]


@dataclass
class TangentResult:
    """Sensitivities along nd directions; arrays are (N+1, size, nd), time on axis 0."""

    dq: np.ndarray
    dv: np.ndarray
    da: np.ndarray
    dlam: np.ndarray
    ds: np.ndarray
    D: np.ndarray  # (n_p, nd) the directions

    def output(self, system, name: str) -> np.ndarray:
        """(N+1, nd) sensitivity of the output called ``name``."""
        return self.ds[:, system.model.output_names.index(name), :]


def directions(system, which) -> np.ndarray:
    """(n_p, nd) direction matrix from parameter names (unit vectors) or a matrix."""
    names = system.model.parameter_names
    if isinstance(which, str):
        which = [which]
    if isinstance(which, np.ndarray) and which.ndim == 2:
        if which.shape[0] != len(names):
            raise ValueError(f"direction matrix has {which.shape[0]} rows, the model has "
                             f"{len(names)} parameters")
        return np.ascontiguousarray(which, dtype=float)
    D = np.zeros((len(names), len(which)))
    for j, name in enumerate(which):
        if name not in names:
            raise KeyError(f"unknown parameter {name!r}; the model's parameters are {names}")
        D[names.index(name), j] = 1.0
    return D


def _check(system, traj):
    sw = getattr(traj, "_sweep", None)
    if sw is None:
        raise ValueError("this trajectory carries no sweep data; simulate it with this system")
    if traj.q.shape[1] != system.model.n or sw.p.shape[0] != system.kernels.n_p + 1:
        raise ValueError("the trajectory does not belong to this system")
    if sw.x0.projected:
        # The projection makes (q0, v0) depend on p through the constraints and through the
        # initial-state expressions; its exact derivative (which needs the Jacobians of
        # C_q v + C_t) is not generated, and a gradient without it would be silently wrong.
        raise SimulationError(
            "sensitivities through a projected initial state (project=True) are not "
            "supported: give a consistent initial state as initial_state expressions in the "
            "parameters, or as consistent numeric q0/v0, and simulate without project=True")
    return sw


def tangent(system, traj, which) -> TangentResult:
    """Forward sensitivities of ``traj`` along parameter directions ``which``.

    ``which``: parameter names or an (n_p, nd) matrix of directions in parameter space.
    """
    sw = _check(system, traj)
    D = directions(system, which)
    k = system.kernels
    n, m, ns, nd, N = k.n, k.m, k.n_s, D.shape[1], sw.N
    D_pad = np.vstack([D, np.zeros((1, nd))]) if k.n_p == 0 else D
    dQ, dV, dA = (np.zeros((N + 1, nd, n)) for _ in range(3))
    dL = np.zeros((N + 1, nd, m))
    dS = np.zeros((N + 1, nd, ns))
    dq0, dv0, da0, dl0 = init_tangent(k, sw.x0, sw.p[:-1], sw.t0, sw.U[0], D)
    dQ[0], dV[0], dA[0], dL[0] = dq0.T, dv0.T, da0.T, dl0.T
    status = _hht.tangent(k, sw.t0, sw.h, N, sw.alpha, sw.p, sw.U, traj.q, traj.v, traj.a,
                          traj.lam, sw.LU, sw.PIV, sw.TAU, np.ascontiguousarray(D_pad), dQ, dV,
                          dA, dL, dS)
    if status != 0:
        raise SimulationError("the Newton matrix became singular in the tangent sweep")
    tr = (0, 2, 1)
    return TangentResult(dQ.transpose(tr), dV.transpose(tr), dA.transpose(tr),
                         dL.transpose(tr), dS.transpose(tr), D)


def adjoint_gradient(system, traj, dPhi: np.ndarray) -> np.ndarray:
    """dJ/dp (all n_p parameters) for a cost J whose derivative with respect to the output
    samples is ``dPhi`` (N+1, n_s), by the discrete adjoint sweep."""
    sw = _check(system, traj)
    k = system.kernels
    dPhi = np.ascontiguousarray(dPhi, dtype=float)
    if dPhi.shape != (sw.N + 1, k.n_s):
        raise ValueError(f"dPhi has shape {dPhi.shape}, expected {(sw.N + 1, k.n_s)} "
                         "(one row per time step, one column per output)")
    if not np.all(np.isfinite(dPhi)):
        raise ValueError("dPhi contains NaN or infinity")
    grad = np.zeros(k.n_p + 1)
    xbar0 = np.zeros(3 * k.n + k.m)
    status = _hht.adjoint(k, sw.t0, sw.h, sw.N, sw.alpha, sw.p, sw.U, traj.q, traj.v, traj.a,
                          traj.lam, sw.LU, sw.PIV, sw.TAU, dPhi, grad, xbar0)
    if status != 0:
        raise SimulationError("the Newton matrix became singular in the adjoint sweep")
    return grad[:-1] + init_adjoint(k, sw.x0, sw.p[:-1], sw.t0, sw.U[0], xbar0)
