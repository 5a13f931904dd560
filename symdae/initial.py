"""Consistent initial state (q0, v0, a0, lam0) and its derivatives with respect to p.

The initial accelerations and multipliers solve

    [[M, C_q^T], [C_q, 0]] [a0; lam0] = [Q; -gamma],   gamma = d(C_q v + C_t)/dq v + d(.)/dt

at (t0, q0, v0); all of them depend on the parameters (and q0, v0 may too, through the model's
``initial_state`` expressions), which the tangent and adjoint sweeps carry exactly.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .errors import InconsistentInitialStateError, ModelError, SingularMatrixError
from .kernels import pack_weights, split

__all__ = ["InitialState", "initial_state", "init_tangent", "init_adjoint"]


@dataclass
class InitialState:
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    q_from_model: bool    # q0 came from the model's expressions in p (so depends on p)
    v_from_model: bool    # v0 likewise
    projected: bool       # q0, v0 were projected onto the constraints


class _At:
    """Kernel evaluation at one fixed point (t, q, v, a, lam, p, u), outputs split by block."""

    def __init__(self, backend, t, q, v, a, lam, p, u):
        self.backend = backend
        self.args = (t, q, v, a, lam, p, u)

    def __call__(self, name, **weights) -> dict:
        w = pack_weights(name, self.backend.sizes, **weights) if weights else None
        return split(name, self.backend.evaluate(name, *self.args, w=w), self.backend.sizes)


def _check_matrix(K0, model, t0):
    nm = K0.shape[0]
    if nm == 0:
        return
    if not np.all(np.isfinite(K0)):
        raise SingularMatrixError(f"the initialisation matrix [[M, C_q^T], [C_q, 0]] has "
                                  f"non-finite entries at t = {t0}")
    # LU pivots flag a singular matrix cheaply; the SVD (for the message) only then
    with warnings.catch_warnings():       # an exactly zero pivot is what is looked for
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        piv = np.abs(np.diag(scipy.linalg.lu_factor(K0, check_finite=False)[0]))
    if piv.min() > nm * np.finfo(float).eps * np.abs(K0).max():
        return
    sv = np.linalg.svd(K0, compute_uv=False)
    if sv[-1] <= nm * np.finfo(float).eps * sv[0]:
        null = np.abs(np.linalg.svd(K0)[2][-1])     # the vectors only for the message
        names = model.coordinate_names + [f"multiplier of constraint {k}"
                                          for k in range(model.m)]
        involved = [names[i] for i in np.argsort(-null) if null[i] > 0.1 * null.max()]
        raise SingularMatrixError(
            f"the augmented matrix [[M, C_q^T], [C_q, 0]] is singular at t = {t0} "
            f"(condition number {sv[0] / max(sv[-1], 1e-300):.2e}); its null space involves "
            f"{', '.join(involved)}: a zero mass needs a constraint or a force that fixes it, "
            "and the constraints must be independent")


def _project(backend, model, t0, q, v, p, u0, tol, max_iter=50):
    """Minimum-norm projection of q onto C(q, t0) = 0, then of v onto C_q v + C_t = 0."""
    n, m = model.n, model.m
    zero_n, zero_m = np.zeros(n), np.zeros(m)
    q = q.copy()
    for _ in range(max_iter):
        at = _At(backend, t0, q, v, zero_n, zero_m, p, u0)
        C = at("residual")["C"]
        if np.max(np.abs(C), initial=0.0) <= tol * 1e-3:
            break
        Cq = at("jacobians")["Cq"]
        q -= Cq.T @ np.linalg.lstsq(Cq @ Cq.T, C, rcond=None)[0]
    else:
        raise InconsistentInitialStateError(
            f"projecting q0 onto the constraints did not converge in {max_iter} iterations "
            f"(|C| = {np.max(np.abs(C)):.3e})")
    at = _At(backend, t0, q, v, zero_n, zero_m, p, u0)
    Cq = at("jacobians")["Cq"]
    v = v - Cq.T @ np.linalg.lstsq(Cq @ Cq.T, at("constraint_velocity")["cdot"], rcond=None)[0]
    return q, v


def initial_state(backend, model, p, t0, u0, q0=None, v0=None, *, tol=1e-9,
                  project=False) -> InitialState:
    """Initial state: q0, v0 from the arguments or the model's expressions; a0, lam0 consistent.

    Raises InconsistentInitialStateError if |C(q0)| or |C_q v0 + C_t| exceeds ``tol`` (unless
    ``project``), and SingularMatrixError if the initialisation matrix is singular.
    """
    n, m = model.n, model.m
    zero_n, zero_m = np.zeros(n), np.zeros(m)
    if q0 is None or v0 is None:
        qv = _At(backend, t0, zero_n, zero_n, zero_n, zero_m, p, u0)("initial_state")
    q = qv["q0"].copy() if q0 is None else np.asarray(q0, dtype=float).copy()
    v = qv["v0"].copy() if v0 is None else np.asarray(v0, dtype=float).copy()
    for name, x in (("q0", q), ("v0", v)):
        if x.shape != (n,):
            raise ModelError(f"{name} has shape {x.shape}, expected ({n},) for coordinates "
                             f"{model.coordinate_names}")
        if not np.all(np.isfinite(x)):
            raise ModelError(f"{name} contains NaN or infinity: {x}")
    if m and project:
        q, v = _project(backend, model, t0, q, v, p, u0, tol)
    at = _At(backend, t0, q, v, zero_n, zero_m, p, u0)
    res0 = at("residual")            # at a = 0, lam = 0: Ma = 0, g = -Q
    if m:
        C = res0["C"]
        k = int(np.argmax(np.abs(C)))
        if not abs(C[k]) <= tol:
            raise InconsistentInitialStateError(
                f"q0 violates constraint {k}: C_{k}(q0, t0) = {C[k]:.3e} (tolerance {tol:g}); "
                "give a consistent q0, initial_state expressions in the parameters, or "
                "project=True")
        cdot = at("constraint_velocity")["cdot"]
        k = int(np.argmax(np.abs(cdot)))
        if not abs(cdot[k]) <= tol:
            raise InconsistentInitialStateError(
                f"v0 violates the velocity form of constraint {k}: C_q v0 + C_t = "
                f"{cdot[k]:.3e} (tolerance {tol:g}); give a consistent v0 or project=True")
    K0 = at("newton", c_m=1.0)["K"]
    _check_matrix(K0, model, t0)
    rhs = np.concatenate([-res0["g"], -at("acceleration_constraint")["gamma"]])
    y = np.linalg.solve(K0, rhs)
    return InitialState(q, v, y[:n], y[n:], q_from_model=q0 is None, v_from_model=v0 is None,
                        projected=bool(m and project))


def _linearisation(backend, x0: InitialState, p, t0, u0):
    """K0 and the derivatives of the initialisation system at x0."""
    n, n_p = backend.sizes.n, backend.sizes.n_p
    at = _At(backend, t0, x0.q, x0.v, x0.a, x0.lam, p, u0)
    K0 = at("newton", c_m=1.0)["K"]
    J, P = at("jacobians"), at("param_jacobians")
    acc, QV = at("acceleration_constraint"), at("initial_state_jacobian")
    Q0p = QV["q0_p"] if x0.q_from_model else np.zeros((n, n_p))
    V0p = QV["v0_p"] if x0.v_from_model else np.zeros((n, n_p))
    return (K0, J["JM"] + J["JG"], J["GV"], P["PM"] + P["PG"], acc["Rc_q"], acc["gamma_v"],
            acc["Rc_p"], Q0p, V0p)


def init_tangent(backend, x0: InitialState, p, t0, u0, D):
    """Sensitivities of (q0, v0, a0, lam0) along parameter directions D (n_p x nd)."""
    n = backend.sizes.n
    K0, Jq, GV, P, Rc_q, gamma_v, Rc_p, Q0p, V0p = _linearisation(backend, x0, p, t0, u0)
    dq, dv = Q0p @ D, V0p @ D
    rhs = np.vstack([Jq @ dq + GV @ dv + P @ D, Rc_q @ dq + gamma_v @ dv + Rc_p @ D])
    dy = -np.linalg.solve(K0, rhs) if rhs.size else rhs
    return dq, dv, dy[:n], dy[n:]


def init_adjoint(backend, x0: InitialState, p, t0, u0, xbar0):
    """dJ/dp contributed through x0, given the adjoint xbar0 = (qb, vb, ab, lb) of x0."""
    n, m = backend.sizes.n, backend.sizes.m
    K0, Jq, GV, P, Rc_q, gamma_v, Rc_p, Q0p, V0p = _linearisation(backend, x0, p, t0, u0)
    qb, vb = xbar0[:n].copy(), xbar0[n:2 * n].copy()
    yb = xbar0[2 * n:3 * n + m]
    rb = -np.linalg.solve(K0.T, yb)
    rd, rc = rb[:n], rb[n:]
    grad = P.T @ rd + Rc_p.T @ rc
    qb += Jq.T @ rd + Rc_q.T @ rc
    vb += GV.T @ rd + gamma_v.T @ rc
    return grad + Q0p.T @ qb + V0p.T @ vb
