"""The design-sweep contract: the exact gradient of a function of outputs and output
sensitivities with respect to every input sample (reverse over tangent).

    design_adjoint(backend, fwd, D, tangents, dPsi_S, dPsi_s=None, dPsi_x=None)
        -> DesignSweepResult

Takes a forward sweep ``fwd`` (a :class:`~symdae.simulation.backends.base.ForwardResult`, preferably with
stored factorisations), the parameter directions D (n_p, nd), the tangents along them
(:class:`~symdae.simulation.backends.base.TangentArrays`: dq, dv, da, dlam, each (N+1, nd, size), initial
sensitivities included), and the derivatives of Psi with respect to the output sensitivities
``dPsi_S`` (N+1, n_s, nd), the outputs ``dPsi_s`` (N+1, n_s) and the states ``dPsi_x``
(N+1, 3n + m) (None: zero). Returns ``ubar`` (N+1, n_u) with ubar[i] = dPsi/dU_i for
i = 1..N, exact for the discrete scheme; ubar[0] = 0 because U_0 is held fixed (it sets the
consistent initial state, whose second derivatives are not generated). With nd = 0 it is the
first-order input gradient of any output cost.

Two implementations: the compiled sweep ``symdae/simulation/core/design_sweep.pyx`` (each
backward step is ``adjoint.pxd``'s ``state_step``) and a NumPy one
(:mod:`symdae.simulation.backends.numpy_design`) with dense Jacobian blocks, the test oracle.
Neither raises on a singular Newton matrix: the report says so.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from .base import (
    ForwardResult,
    SweepReport,
    TangentArrays,
    raise_if_interrupted,
    scheme_code,
)

__all__ = ["DesignSweepResult", "design_adjoint"]


@dataclass(frozen=True)
class DesignSweepResult:
    ubar: np.ndarray          # (N+1, n_u) dPsi/dU_i, row 0 zero
    report: SweepReport


def _array(x, shape, label) -> np.ndarray:
    a = np.zeros(shape) if x is None else np.ascontiguousarray(x, dtype=np.float64)
    if a.shape != shape:
        raise InputError(f"design sweep: {label} has shape {a.shape}, expected {shape}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"design sweep: {label} contains NaN or infinity")
    return a


def _padded(a: np.ndarray) -> np.ndarray:
    """a with its last axis at least one wide (the compiled sweep takes no empty rows)."""
    if a.shape[-1] > 0:
        return np.ascontiguousarray(a)
    return np.zeros(a.shape[:-1] + (1,))


def design_adjoint(backend, fwd: ForwardResult, D: np.ndarray, tangents: TangentArrays,
                   dPsi_S=None, dPsi_s=None, dPsi_x=None) -> DesignSweepResult:
    """Validate the arrays and run the backend's reverse-over-tangent sweep (see the module
    docstring for the contract)."""
    sz, N = backend.sizes, fwd.grid.N
    if getattr(fwd.grid, "i0", 0) != 0:
        raise InputError("the design sweep takes a whole trajectory from t0 (grid index 0), "
                         "not a segment of a checkpointed run")
    D = np.asarray(D, dtype=float).reshape(sz.n_p, -1)
    nd = D.shape[1]
    for label, x, k in (("dq", tangents.dq, sz.n), ("dv", tangents.dv, sz.n),
                        ("da", tangents.da, sz.n), ("dlam", tangents.dlam, sz.m)):
        if x.shape != (N + 1, nd, k):
            raise InputError(f"design sweep: tangent {label} has shape {x.shape}, expected "
                             f"{(N + 1, nd, k)}")
    dS = _array(dPsi_S, (N + 1, sz.n_s, nd), "dPsi/dS")
    ds = _array(dPsi_s, (N + 1, sz.n_s), "dPsi/ds")
    dx = _array(dPsi_x, (N + 1, sz.nx), "dPsi/dx")
    if backend.name == "numpy":
        from .numpy_design import design_adjoint_numpy
        ubar = design_adjoint_numpy(backend, fwd, D, tangents, dS, ds, dx)
        return DesignSweepResult(ubar, SweepReport("ok"))
    from ..core import design_sweep  # type: ignore[attr-defined]

    g = fwd.grid
    ubar = np.zeros((N + 1, max(sz.n_u, 1)))
    saved = fwd.saved if fwd.saved is not None else (None, None, None, None)
    p = fwd.p if sz.n_p else np.zeros(1)
    DT = np.ascontiguousarray(D.T) if sz.n_p else np.zeros((nd, 1))
    with backend.lapack_threads():      # one BLAS thread if the sweep calls LAPACK
        rep = design_sweep.design_adjoint(
            backend.module, g.t0, g.h, N, g.alpha, scheme_code(g.scheme), p, _padded(fwd.U), _padded(fwd.q),
            _padded(fwd.v), _padded(fwd.a), _padded(fwd.lam), *saved, DT,
            *(_padded(np.asarray(x, dtype=float)) for x in
              (tangents.dq, tangents.dv, tangents.da, tangents.dlam)),
            _padded(np.ascontiguousarray(dS.transpose(0, 2, 1))), _padded(ds), _padded(dx),
            ubar, np.ascontiguousarray(fwd.order, dtype=np.intc))
    raise_if_interrupted(rep, g, "design adjoint")
    report = SweepReport("ok" if rep["status"] == 0 else "singular", step=rep["step"])
    return DesignSweepResult(ubar[:, :sz.n_u], report)
