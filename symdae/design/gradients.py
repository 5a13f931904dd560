"""Exact derivatives with respect to the input samples U_1..U_N of a trajectory.

* :func:`input_gradient`: dJ/dU for any output cost J (its dJ/dS), one backward sweep
  (the first-order adjoint, spec step G1);
* :func:`design_gradient`: dPsi/dU for a function Psi of the outputs s_i, the states and the
  output sensitivities S_i = ds_i/db along chosen parameters (the Fisher information is one),
  by the discrete adjoint of the state-plus-sensitivity recursion: the tangent sweep, then one
  fused backward sweep with n_b + 1 solves per step and the generated second-order kernel
  ``state_hvp`` (``symdae/simulation/core/design_sweep.pyx`` has the recursion).

Both are exact for the discrete scheme :meth:`System.simulate` runs. U_0 is held fixed: it
sets the consistent initial accelerations and multipliers (and through them the initial
sensitivities), whose second derivatives are not generated, so row 0 of the result is 0.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError, SimulationError
from ..simulation.backends.base import SweepReport, TangentArrays
from ..simulation.backends.design import design_adjoint
from ..simulation.sensitivity import TangentResult, sweep_data, tangent

__all__ = ["input_gradient", "design_gradient", "tangent_arrays"]


def tangent_arrays(res: TangentResult) -> TangentArrays:
    """The backend layout (N+1, nd, size) of a TangentResult (views, no copies; the sweep
    that made them succeeded, or ``tangent`` would have raised)."""
    tr = (0, 2, 1)
    return TangentArrays(res.dq.transpose(tr), res.dv.transpose(tr), res.da.transpose(tr),
                         res.dlam.transpose(tr), res.ds.transpose(tr), SweepReport("ok"))


def _sweep(system, traj, D, tangents, dPsi_S, dPsi_s, dPsi_x) -> np.ndarray:
    sw = sweep_data(system, traj)
    res = design_adjoint(system.backend, sw.forward, D, tangents, dPsi_S, dPsi_s, dPsi_x)
    if not res.report.ok:
        raise SimulationError(f"the Newton matrix of step {res.report.step} became singular "
                              "in the design sweep")
    return res.ubar


def input_gradient(system, traj, dPhi: np.ndarray) -> np.ndarray:
    """dJ/dU (N+1, n_u) of a cost J whose derivative with respect to the output samples is
    ``dPhi`` (N+1, n_s); row 0 is 0 (U_0 is held fixed). ``traj`` should be simulated with
    ``store_factorizations=True`` (else every Newton matrix is refactorised)."""
    sz = system.sizes
    N = len(traj.t) - 1
    dPhi = np.asarray(dPhi, dtype=float)
    if dPhi.shape != (N + 1, sz.n_s):
        raise InputError(f"dPhi has shape {dPhi.shape}, expected {(N + 1, sz.n_s)} (one row "
                         "per time step, one column per output)")
    D = np.zeros((sz.n_p, 0))
    def none(size: int) -> np.ndarray:          # no directions
        return np.zeros((N + 1, 0, size))

    empty = TangentArrays(none(sz.n), none(sz.n), none(sz.n), none(sz.m), none(sz.n_s),
                          SweepReport("ok"))
    return _sweep(system, traj, D, empty, np.zeros((N + 1, sz.n_s, 0)), dPhi, None)


def design_gradient(system, traj, parameters, dPsi_S: np.ndarray, dPsi_s=None, dPsi_x=None,
                    *, tangents: TangentResult | None = None) -> np.ndarray:
    """dPsi/dU (N+1, n_u) of Psi(s, x, S) along the input samples; row 0 is 0.

    parameters:
        Names (or an (n_p, n_b) direction matrix) of the parameters b of S = ds/db.
    dPsi_S:
        (N+1, n_s, n_b) dPsi/dS in the model's output order (zero for outputs Psi does not
        use); ``dPsi_s`` (N+1, n_s) and ``dPsi_x`` (N+1, 3n + m): the first-order parts.
    tangents:
        The tangent sweep of ``traj`` along ``parameters`` if already computed.
    """
    if tangents is None:
        tangents = tangent(system, traj, parameters)
    return _sweep(system, traj, tangents.D, tangent_arrays(tangents), dPsi_S, dPsi_s, dPsi_x)
