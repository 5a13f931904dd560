"""Exact derivatives of the discrete HHT trajectory with respect to the parameters.

Two methods, both exact for the discrete scheme that :meth:`System.simulate` runs:

* :func:`tangent` (forward sensitivities): dx_i/dp along chosen directions; per step, the
  Jacobians once and one linear solve per direction with the step's factorisation.
* :func:`adjoint_gradient` (discrete adjoint, paper eqs. 9 and 11): dJ/dp for all parameters
  from dJ/dS (the derivative of a cost with respect to every output sample) for about the
  price of one backward sweep, independent of the number of parameters.

Both include what the paper leaves out: C_q at q_{i+1} in eq. (19), d(C_q^T lam)/dp and dC/dp
in eq. (20), and the dependence of the consistent (q0, v0, a0, lam0) on p.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, SimulationError, UnknownNameError
from ..model.definition import parameter_name
from ..threads import one_blas_thread
from .initial import init_adjoint, init_tangent
from .reductions import first_nonfinite

__all__ = ["TangentResult", "tangent", "adjoint_gradient", "directions"]


@dataclass
class TangentResult:
    """Sensitivities along nd directions; arrays are (N+1, size, nd), time on axis 0 (dq, dv,
    da, dlam: the last step only, one row, from ``tangent(..., states=False)``)."""

    dq: np.ndarray
    dv: np.ndarray
    da: np.ndarray
    dlam: np.ndarray
    ds: np.ndarray
    D: np.ndarray  # (n_p, nd) the directions

    def output(self, system, name: str) -> np.ndarray:
        """(N+1, nd) sensitivity of the output called ``name``."""
        names = system.model.output_names
        if name not in names:
            raise UnknownNameError(f"the model has no output {name!r}; its outputs are {names}")
        return self.ds[:, names.index(name), :]


def directions(system, which) -> np.ndarray:
    """(n_p, nd) direction matrix from parameter names or Symbols (unit vectors) or a matrix."""
    names = system.model.parameter_names
    if isinstance(which, str) or hasattr(which, "name"):      # one name or one Symbol
        which = [which]
    if isinstance(which, np.ndarray) and which.ndim == 2:
        if which.shape[0] != len(names):
            raise InputError(f"direction matrix has {which.shape[0]} rows, the model has "
                             f"{len(names)} parameters")
        return np.ascontiguousarray(which, dtype=float)
    D = np.zeros((len(names), len(which)))
    for j, name in enumerate(parameter_name(w) for w in which):
        if name not in names:
            raise UnknownNameError(f"unknown parameter {name!r}; the model's parameters are "
                                   f"{names}")
        D[names.index(name), j] = 1.0
    return D


def sweep_data(system, traj):
    """The sweep data a derivative sweep needs from ``traj``, checked to belong to ``system``."""
    sw = getattr(traj, "sweep", None)
    if sw is None:
        raise InputError("this trajectory carries no sweep data; simulate it with this system")
    if traj.q.shape[1] != system.model.n or sw.forward.p.shape[0] != system.sizes.n_p:
        raise InputError("the trajectory does not belong to this system")
    refuse_projected(sw.x0)
    return sw


def refuse_projected(x0) -> None:
    """Sensitivities need an initial state symdae can differentiate."""
    if x0.projected:
        # The projection makes (q0, v0) depend on p through the constraints and through the
        # initial-state expressions; its exact derivative (which needs the Jacobians of
        # C_q v + C_t) is not generated, and a gradient without it would be silently wrong.
        raise SimulationError(
            "sensitivities through a projected initial state (project=True) are not "
            "supported: give a consistent initial state as initial_state expressions in the "
            "parameters, or as consistent numeric q0/v0, and simulate without project=True")


def singular(report, what: str) -> None:
    """Raise if a derivative sweep met a singular Newton matrix."""
    if not report.ok:
        raise SimulationError(f"the Newton matrix of step {report.step} became singular in the "
                              f"{what} sweep")


def tangent(system, traj, which, *, states: bool = True) -> TangentResult:
    """Forward sensitivities of ``traj`` along parameter directions ``which``.

    ``which``: parameter names or an (n_p, nd) matrix of directions in parameter space.
    ``states=False`` keeps the output sensitivities ``ds`` of every step but the states' of
    the last step only: the same numbers for less memory and time (Fisher information,
    Gauss-Newton Jacobians need only ds).
    """
    sw = sweep_data(system, traj)
    D = directions(system, which)
    fwd = sw.forward
    with one_blas_thread():
        dx0 = init_tangent(system.backend, sw.x0, fwd.p, fwd.grid.t0, fwd.U[0], D)
        res = system.backend.tangent(fwd, D, tuple(x.T for x in dx0), states=states)
    singular(res.report, "tangent")
    tr = (0, 2, 1)
    return TangentResult(res.dq.transpose(tr), res.dv.transpose(tr), res.da.transpose(tr),
                         res.dlam.transpose(tr), res.ds.transpose(tr), D)


def check_dphi(system, dPhi, t: np.ndarray) -> np.ndarray:
    """dPhi as a float array of shape (len(t), n_s) with finite entries, else an InputError
    naming the output and time (the compiled adjoint reads it without bounds checks)."""
    dPhi = np.asarray(dPhi, dtype=float)
    if dPhi.shape != (len(t), system.sizes.n_s):
        raise InputError(f"dPhi has shape {dPhi.shape}, expected "
                         f"{(len(t), system.sizes.n_s)} (one row per time step, one "
                         "column per output)")
    bad = first_nonfinite(dPhi)
    if bad is not None:
        i, j = bad
        raise InputError(f"dPhi (the cost's derivative) is {dPhi[i, j]} for output "
                         f"{system.model.output_names[j]!r} at t = {t[i]:.9g} (step {i})")
    return dPhi


def adjoint_gradient(system, traj, dPhi: np.ndarray) -> np.ndarray:
    """dJ/dp (all n_p parameters) for a cost J whose derivative with respect to the output
    samples is ``dPhi`` (N+1, n_s), by the discrete adjoint sweep."""
    sw = sweep_data(system, traj)
    fwd = sw.forward
    dPhi = check_dphi(system, dPhi, traj.t)
    with one_blas_thread():
        res = system.backend.adjoint(fwd, dPhi)
        singular(res.report, "adjoint")
        return res.grad + init_adjoint(system.backend, sw.x0, fwd.p, fwd.grid.t0, fwd.U[0],
                                       res.xbar0)
