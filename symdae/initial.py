"""Consistent initial state (q0, v0, a0, lam0) and its derivatives with respect to p.

The initial accelerations and multipliers solve

    [[M, C_q^T], [C_q, 0]] [a0; lam0] = [Q; -gamma],   gamma = d(C_q v + C_t)/dq v + d(.)/dt

at (t0, q0, v0); all of them depend on the parameters (and q0, v0 may too, through the model's
``initial_state`` expressions), which the tangent and adjoint sweeps carry exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InconsistentInitialStateError, ModelError, SingularMatrixError

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
    """Kernel evaluation at one fixed point (t, q, v, a, lam, p, u)."""

    def __init__(self, kernels, t, q, v, a, lam, p, u):
        self.k = kernels
        self.args = (t, q, v, a, lam, p, u)

    def __call__(self, name, w=None):
        return self.k.evaluate(name, *self.args, w=w)


def _split_acc(flat, n, m, n_p):
    gamma = flat[:m]
    Rc_q = flat[m:m + m * n].reshape(m, n)
    gamma_v = flat[m + m * n:m + 2 * m * n].reshape(m, n)
    Rc_p = flat[m + 2 * m * n:].reshape(m, n_p)
    return gamma, Rc_q, gamma_v, Rc_p


def _split_jac(flat, n, m):
    nn = n * n
    return (flat[:nn].reshape(n, n), flat[nn:2 * nn].reshape(n, n),
            flat[2 * nn:3 * nn].reshape(n, n), flat[3 * nn:].reshape(m, n))


def _check_matrix(K0, model, t0):
    nm = K0.shape[0]
    if nm == 0:
        return
    if not np.all(np.isfinite(K0)):
        raise SingularMatrixError(f"the initialisation matrix [[M, C_q^T], [C_q, 0]] has "
                                  f"non-finite entries at t = {t0}")
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


def _project(kernels, model, t0, q, v, p, u0, tol, max_iter=50):
    """Minimum-norm projection of q onto C(q, t0) = 0, then of v onto C_q v + C_t = 0."""
    n, m = model.n, model.m
    zero_n, zero_m = np.zeros(n), np.zeros(m)
    q = q.copy()
    for _ in range(max_iter):
        C = kernels.evaluate("residual", t0, q, v, zero_n, zero_m, p, u0)[2 * n:]
        if np.max(np.abs(C), initial=0.0) <= tol * 1e-3:
            break
        Cq = _split_jac(kernels.evaluate("jacobians", t0, q, v, zero_n, zero_m, p, u0), n, m)[3]
        q -= Cq.T @ np.linalg.lstsq(Cq @ Cq.T, C, rcond=None)[0]
    else:
        raise InconsistentInitialStateError(
            f"projecting q0 onto the constraints did not converge in {max_iter} iterations "
            f"(|C| = {np.max(np.abs(C)):.3e})")
    Cq = _split_jac(kernels.evaluate("jacobians", t0, q, v, zero_n, zero_m, p, u0), n, m)[3]
    cdot = kernels.evaluate("constraint_velocity", t0, q, v, zero_n, zero_m, p, u0)
    v = v - Cq.T @ np.linalg.lstsq(Cq @ Cq.T, cdot, rcond=None)[0]
    return q, v


def initial_state(kernels, model, p, t0, u0, q0=None, v0=None, *, tol=1e-9,
                  project=False) -> InitialState:
    """Initial state: q0, v0 from the arguments or the model's expressions; a0, lam0 consistent.

    Raises InconsistentInitialStateError if |C(q0)| or |C_q v0 + C_t| exceeds ``tol`` (unless
    ``project``), and SingularMatrixError if the initialisation matrix is singular.
    """
    n, m = model.n, model.m
    zero_n, zero_m = np.zeros(n), np.zeros(m)
    qv = kernels.evaluate("initial_state", t0, zero_n, zero_n, zero_n, zero_m, p, u0) \
        if q0 is None or v0 is None else None
    q = qv[:n].copy() if q0 is None else np.asarray(q0, dtype=float).copy()
    v = qv[n:].copy() if v0 is None else np.asarray(v0, dtype=float).copy()
    for name, x in (("q0", q), ("v0", v)):
        if x.shape != (n,):
            raise ModelError(f"{name} has shape {x.shape}, expected ({n},) for coordinates "
                             f"{model.coordinate_names}")
        if not np.all(np.isfinite(x)):
            raise ModelError(f"{name} contains NaN or infinity: {x}")
    if m and project:
        q, v = _project(kernels, model, t0, q, v, p, u0, tol)
    # at a = 0, lam = 0 the residual kernel gives [0, -Q, C]
    res0 = kernels.evaluate("residual", t0, q, v, zero_n, zero_m, p, u0)
    if m:
        C = res0[2 * n:]
        k = int(np.argmax(np.abs(C)))
        if not abs(C[k]) <= tol:
            raise InconsistentInitialStateError(
                f"q0 violates constraint {k}: C_{k}(q0, t0) = {C[k]:.3e} (tolerance {tol:g}); "
                "give a consistent q0, initial_state expressions in the parameters, or "
                "project=True")
        cdot = kernels.evaluate("constraint_velocity", t0, q, v, zero_n, zero_m, p, u0)
        k = int(np.argmax(np.abs(cdot)))
        if not abs(cdot[k]) <= tol:
            raise InconsistentInitialStateError(
                f"v0 violates the velocity form of constraint {k}: C_q v0 + C_t = "
                f"{cdot[k]:.3e} (tolerance {tol:g}); give a consistent v0 or project=True")
    K0 = kernels.evaluate("newton", t0, q, v, zero_n, zero_m, p, u0,
                          w=np.array([1.0, 0.0, 0.0])).reshape(n + m, n + m)
    _check_matrix(K0, model, t0)
    rhs = -res0[n:]                                   # [Q, -C] ...
    if m:                                             # ... with -gamma in the constraint rows
        rhs[n:] = -kernels.evaluate("acceleration_constraint", t0, q, v, zero_n, zero_m, p,
                                    u0)[:m]
    y = np.linalg.solve(K0, rhs)
    return InitialState(q, v, y[:n], y[n:], q_from_model=q0 is None, v_from_model=v0 is None,
                        projected=bool(m and project))


def _linearisation(kernels, x0: InitialState, p, t0, u0):
    """K0 and the derivatives of the initialisation system at x0."""
    n, m, n_p = kernels.n, kernels.m, kernels.n_p
    at = _At(kernels, t0, x0.q, x0.v, x0.a, x0.lam, p, u0)
    K0 = at("newton", np.array([1.0, 0.0, 0.0])).reshape(n + m, n + m)
    JM, JG, GV, _ = _split_jac(at("jacobians"), n, m)
    PJ = at("param_jacobians")
    PM, PG = PJ[:n * n_p].reshape(n, n_p), PJ[n * n_p:2 * n * n_p].reshape(n, n_p)
    _, Rc_q, gamma_v, Rc_p = _split_acc(at("acceleration_constraint"), n, m, n_p)
    QV = at("initial_state_jacobian")
    Q0p = QV[:n * n_p].reshape(n, n_p) if x0.q_from_model else np.zeros((n, n_p))
    V0p = QV[n * n_p:].reshape(n, n_p) if x0.v_from_model else np.zeros((n, n_p))
    return K0, JM + JG, GV, PM + PG, Rc_q, gamma_v, Rc_p, Q0p, V0p


def init_tangent(kernels, x0: InitialState, p, t0, u0, D):
    """Sensitivities of (q0, v0, a0, lam0) along parameter directions D (n_p x nd)."""
    n = kernels.n
    K0, Jq, GV, P, Rc_q, gamma_v, Rc_p, Q0p, V0p = _linearisation(kernels, x0, p, t0, u0)
    dq, dv = Q0p @ D, V0p @ D
    rhs = np.vstack([Jq @ dq + GV @ dv + P @ D, Rc_q @ dq + gamma_v @ dv + Rc_p @ D])
    dy = -np.linalg.solve(K0, rhs) if rhs.size else rhs
    return dq, dv, dy[:n], dy[n:]


def init_adjoint(kernels, x0: InitialState, p, t0, u0, xbar0):
    """dJ/dp contributed through x0, given the adjoint xbar0 = (qb, vb, ab, lb) of x0."""
    n, m = kernels.n, kernels.m
    K0, Jq, GV, P, Rc_q, gamma_v, Rc_p, Q0p, V0p = _linearisation(kernels, x0, p, t0, u0)
    qb, vb = xbar0[:n].copy(), xbar0[n:2 * n].copy()
    yb = xbar0[2 * n:3 * n + m]
    rb = -np.linalg.solve(K0.T, yb)
    rd, rc = rb[:n], rb[n:]
    grad = P.T @ rd + Rc_p.T @ rc
    qb += Jq.T @ rd + Rc_q.T @ rc
    vb += GV.T @ rd + gamma_v.T @ rc
    return grad + Q0p.T @ qb + V0p.T @ vb
