"""Consistent initial state (q0, v0, a0, lam0) and its derivatives with respect to p.

The initial accelerations and multipliers solve

    [[M, C_q^T], [C_q, 0]] [a0; lam0] = [Q; -gamma],   gamma = d(C_q v + C_t)/dq v + d(.)/dt

at (t0, q0, v0); all of them depend on the parameters (and q0, v0 may too, through the model's
``initial_state`` expressions), which the tangent and adjoint sweeps carry exactly.

Massless nodes. A row r whose mass-matrix row vanishes and that no constraint reaches (the node
between the spring and the dashpot of a Maxwell element) makes that matrix singular: its
equation g_r(q, v, t, p) = 0 holds at velocity level and says nothing about a. Such rows (found
at (t0, q0): their row of [M, C_q^T] is exactly zero) are replaced by their time derivative

    gdot_r = J_G[r] v + G_V[r] a + dg_r/dt = 0,

which fixes the node's acceleration (G_V[r] is the damper's row). Their derivatives with respect
to (q, v, p) at (q0, v0, a0) make the sensitivities of a0 exact as before. The node's velocity is
not free either: g_r(q0, v0, t0, p) = 0 must hold (else the HHT step, which enforces
(1 + alpha) g_r(x_1) = alpha g_r(x_0), starts a parasitic sign-alternating decay), so it is
checked like a constraint, relative to the size of the row's terms; ``project=True`` solves it
for the massless coordinates' own velocities (a node has no inertia, its velocity follows the
state). A row whose input derivative would be needed (g_r depends on an input u) is refused:
du/dt is not known at t0. A massless row without a damper (G_V[r] = 0) stays singular.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import (
    InconsistentInitialStateError,
    InputError,
    ModelError,
    SingularMatrixError,
    UnknownNameError,
)
from ..model.kernels import pack_weights, split

__all__ = ["InitialState", "initial_state", "given_start", "constant_start", "init_tangent",
           "start_tangent", "init_adjoint"]


@dataclass
class InitialState:
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    q_from_model: np.ndarray   # per coordinate: q0 from the model's expressions in p (so
    v_from_model: np.ndarray   # depends on p), not given; v0 likewise
    projected: bool       # q0, v0 were projected onto the constraints
    massless: tuple = ()  # rows initialised by their time derivative (massless nodes)

    @property
    def from_model(self) -> np.ndarray:
        """(q_from_model, v_from_model) as 2n floats, 1 where the entry depends on p: the
        mask the backends' initial_adjoint and initial_tangent take."""
        return np.concatenate([self.q_from_model, self.v_from_model]).astype(float)


class _At:
    """Kernel evaluation at one fixed point (t, q, v, a, lam, p, u), outputs split by block."""

    def __init__(self, backend, t, q, v, a, lam, p, u):
        self.sizes = backend.sizes
        self.evaluate = backend.at(t, q, v, a, lam, p, u)

    def __call__(self, name, **weights) -> dict:
        w = pack_weights(name, self.sizes, **weights) if weights else None
        return split(name, self.evaluate(name, w), self.sizes)


def _check_matrix(K0, model, t0, massless=()):
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
            f"{', '.join(involved)}: a zero mass needs a constraint or a damper (a velocity-"
            "dependent force) that fixes it, and the constraints must be independent"
            + (f" (rows of massless coordinates {[model.coordinate_names[r] for r in massless]} "
               "are initialised by the time derivative of their equation)" if len(massless)
               else ""))


def _massless_rows(K0: np.ndarray, n: int) -> np.ndarray:
    """Rows r < n of [[M, C_q^T], ...] that are exactly zero: no mass, no constraint."""
    return np.flatnonzero(~np.any(K0[:n] != 0.0, axis=1))


def _replace_massless(K0, massless, GV, n):
    """K0 with each massless row replaced by d(gdot_r)/d(a, lam) = [G_V[r], 0]."""
    K = K0.copy()
    K[massless] = 0.0
    K[np.ix_(massless, np.arange(n))] = GV[massless]
    return K


def _check_inputs(at, massless, model):
    """Refuse a massless row that depends on an input (row r of U_G = dg/du, from the input
    adjoint kernel with wG = e_r)."""
    if not model.input_names:
        return
    for r in massless:
        e = np.zeros(model.n)
        e[r] = 1.0
        k = np.flatnonzero(at("input_vjp", wG=e)["ubar"] != 0)
        if k.size:
            raise ModelError(
                f"the equation of the massless coordinate {model.coordinate_names[r]} depends "
                f"on the input {model.input_names[k[0]]!r}; its time derivative, which fixes the "
                "initial acceleration, would need du/dt at t0: give the node a mass, or move "
                "the input to a coordinate with mass")


def _project_q(backend, model, t0, q, v, p, u0, tol, max_iter=50):
    """Minimum-norm projection of q onto C(q, t0) = 0."""
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
    return q


def _project_v(backend, model, t0, q, v, p, u0, massless, tol, max_iter=50):
    """Minimum-norm projection of v onto C_q v + C_t = 0; then the massless coordinates' own
    velocities solved from g_r(q, v, t0) = 0 (Newton; those rows no constraint reaches)."""
    n, m = model.n, model.m
    zero_n, zero_m = np.zeros(n), np.zeros(m)
    if m:
        at = _At(backend, t0, q, v, zero_n, zero_m, p, u0)
        Cq = at("jacobians")["Cq"]
        v = v - Cq.T @ np.linalg.lstsq(Cq @ Cq.T, at("constraint_velocity")["cdot"],
                                       rcond=None)[0]
    if not len(massless):
        return v
    v = v.copy()
    for _ in range(max_iter):
        at = _At(backend, t0, q, v, zero_n, zero_m, p, u0)
        g = at("residual")["g"][massless]
        mag = at("residual_magnitude", qs=np.abs(q), vs=np.abs(v))["g"][massless]
        if np.all(np.abs(g) <= tol * 1e-3 * mag):
            break
        GV = at("jacobians")["GV"][np.ix_(massless, massless)]
        v[massless] -= np.linalg.lstsq(GV, g, rcond=None)[0]
    else:
        raise InconsistentInitialStateError(
            f"solving the equations of the massless coordinates "
            f"{[model.coordinate_names[r] for r in massless]} for their velocities did not "
            f"converge in {max_iter} iterations (|g| = {np.max(np.abs(g)):.3e})")
    return v


def _check_massless_velocities(at, model, q, v, massless, tol):
    """g_r(q0, v0, t0) = 0 on the massless rows, relative to the size of the row's terms."""
    g = at("residual")["g"]
    mag = at("residual_magnitude", qs=np.abs(q), vs=np.abs(v))["g"]
    for r in massless:
        if not abs(g[r]) <= tol * mag[r]:
            raise InconsistentInitialStateError(
                f"v0 violates the equation of the massless coordinate "
                f"{model.coordinate_names[r]} (row {r}): with no mass and no constraint it holds "
                f"at velocity level, g_{r}(q0, v0, t0) = 0, but it is {g[r]:.3e} (its terms are "
                f"of size {mag[r]:.3e}, relative tolerance {tol:g}); give v0 that satisfies it, "
                "initial_state expressions that do, or project=True")


def _start_vector(given, from_model, model, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, which came from the model) of q0 or v0: ``given`` None (the model's
    ``from_model``), an array of one value per coordinate, or ``{coordinate: value}`` keyed by
    name or by the coordinate itself (the others from the model)."""
    n = model.n
    if given is None:
        return from_model.copy(), np.ones(n, dtype=bool)
    names = model.coordinate_names
    if isinstance(given, Mapping):
        x, mask = from_model.copy(), np.ones(n, dtype=bool)
        for key, val in given.items():
            name = key if isinstance(key, str) else \
                (names[model.coordinates.index(key)] if key in model.coordinates else str(key))
            if name not in names:
                raise UnknownNameError(f"{what}: {key!r} is not a coordinate of the model; its "
                                       f"coordinates are {names}")
            try:
                x[names.index(name)] = float(val)
            except (TypeError, ValueError):
                raise InputError(f"{what}[{name!r}] is not a number: {val!r}") from None
            mask[names.index(name)] = False
    else:
        try:
            x = np.array(given, dtype=float).reshape(np.shape(given))
        except (TypeError, ValueError):
            raise InputError(f"{what} must be an array of {n} numbers (coordinates {names}) or "
                             f"{{coordinate: value}}, got {given!r}") from None
        mask = np.zeros(n, dtype=bool)
        if x.shape != (n,):
            raise ModelError(f"{what} has shape {x.shape}, expected ({n},) for coordinates "
                             f"{names}")
    if not np.isfinite(x).all():
        bad = np.flatnonzero(~np.isfinite(x))
        raise ModelError(f"{what} contains NaN or infinity: {names[bad[0]]} = {x[bad[0]]}")
    return x, mask


def given_start(model, q0, v0, model_start=None) -> tuple | None:
    """(q0, which came from the model, v0, likewise) of q0 and v0 given as numbers, validated
    and read-only, for :func:`initial_state` at many parameter values; None when either comes
    from the model's expressions in p, t or the inputs (worked out at each run).

    Entries taken from the model's ``initial_state`` expressions count as given when every
    such expression is a number (a start from rest, the usual case): ``model_start()`` then
    returns the model's (q0, v0), the backend's ``model_start`` at any p, t0 and u, so that
    they are the very numbers each run would compute; without it, they are not given."""
    q_model0 = v_model0 = None
    if any(x is None or isinstance(x, Mapping) for x in (q0, v0)):
        if model_start is None or not constant_start(model):
            return None
        q_model0, v_model0 = model_start()
    q, q_model = _start_vector(q0, q_model0, model, "q0")
    v, v_model = _start_vector(v0, v_model0, model, "v0")
    for x in (q, q_model, v, v_model):
        x.setflags(write=False)
    return q, q_model, v, v_model


def constant_start(model) -> bool:
    """Are the model's initial-state expressions all numbers (free of p, t and the inputs)?"""
    return all(e.is_number for e in model.initial_positions + model.initial_velocities)


def initial_state(backend, model, p, t0, u0, q0=None, v0=None, *, tol=1e-9,
                  project=False, given: tuple | None = None) -> InitialState:
    """Initial state: q0, v0 from the arguments or the model's expressions; a0, lam0 consistent.
    ``given``: :func:`given_start` of q0 and v0 (they are not read then).

    Raises InconsistentInitialStateError if |C(q0)| or |C_q v0 + C_t| exceeds ``tol``, or the
    equation g_r of a massless row exceeds ``tol`` times the size of its terms (unless
    ``project``), ModelError if a massless row depends on an input, and SingularMatrixError if
    the initialisation matrix is singular (with massless rows replaced by their derivative).
    """
    n, m = model.n, model.m
    if given is None:
        q_model0 = v_model0 = None
        if any(x is None or isinstance(x, Mapping) for x in (q0, v0)):
            q_model0, v_model0 = backend.model_start(t0, p, u0)
        q, q_model = _start_vector(q0, q_model0, model, "q0")
        v, v_model = _start_vector(v0, v_model0, model, "v0")
    else:
        q, q_model, v, v_model = given
    if not project:
        start = backend.consistent_start(t0, q, v, p, u0, tol)
        if start is not None:        # the usual case, in one compiled call
            return InitialState(q, v, start[0], start[1], q_from_model=q_model,
                                v_from_model=v_model, projected=False)
    if m and project:
        q = _project_q(backend, model, t0, q, v, p, u0, tol)
    zero_n, zero_m = np.zeros(n), np.zeros(m)
    at = _At(backend, t0, q, v, zero_n, zero_m, p, u0)
    K0 = at("newton", c_m=1.0)["K"]
    massless = _massless_rows(K0, n)
    if massless.size:
        _check_inputs(at, massless, model)
    if project and (m or massless.size):
        v = _project_v(backend, model, t0, q, v, p, u0, massless, tol)
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
    rhs = np.concatenate([-res0["g"], -at("acceleration_constraint")["gamma"]])
    if massless.size:
        K0 = _replace_massless(K0, massless, at("jacobians")["GV"], n)
        rhs[massless] = -at("massless_rows")["gdot"][massless]     # a = 0: J_G v + dg/dt
    _check_matrix(K0, model, t0, massless)     # first: a node without a damper is singular
    if massless.size:
        _check_massless_velocities(at, model, q, v, massless, tol)
    y = np.linalg.solve(K0, rhs)
    return InitialState(q, v, y[:n], y[n:], q_from_model=q_model, v_from_model=v_model,
                        projected=bool(project and (m or massless.size)),
                        massless=tuple(int(r) for r in massless))


def _linearisation(backend, x0: InitialState, p, t0, u0):
    """K0 and the derivatives of the initialisation system at x0 (massless rows: those of
    gdot_r = 0)."""
    n = backend.sizes.n
    at = _At(backend, t0, x0.q, x0.v, x0.a, x0.lam, p, u0)
    K0 = at("newton", c_m=1.0)["K"]
    J, P = at("jacobians"), at("param_jacobians")
    acc, QV = at("acceleration_constraint"), at("initial_state_jacobian")
    Q0p = QV["q0_p"] * x0.q_from_model[:, None]       # given entries do not depend on p
    V0p = QV["v0_p"] * x0.v_from_model[:, None]
    Jq, GV, Pd = J["JM"] + J["JG"], J["GV"].copy(), P["PM"] + P["PG"]
    rows = np.asarray(x0.massless, dtype=np.int64)
    if rows.size:
        ml = at("massless_rows")
        K0 = _replace_massless(K0, rows, J["GV"], n)
        Jq[rows], GV[rows], Pd[rows] = ml["gdot_q"][rows], ml["gdot_v"][rows], ml["gdot_p"][rows]
    return K0, Jq, GV, Pd, acc["Rc_q"], acc["gamma_v"], acc["Rc_p"], Q0p, V0p


def init_tangent(backend, x0: InitialState, p, t0, u0, D):
    """Sensitivities of (q0, v0, a0, lam0) along parameter directions D (n_p x nd)."""
    n = backend.sizes.n
    if not x0.massless:       # the usual case, in one compiled call where there is one
        out = backend.initial_tangent(t0, x0.q, x0.v, x0.a, x0.lam, p, u0, D, x0.from_model)
        if out is not None:
            return out
    K0, Jq, GV, P, Rc_q, gamma_v, Rc_p, Q0p, V0p = _linearisation(backend, x0, p, t0, u0)
    out = tuple(np.zeros((k, D.shape[1])) for k in (n, n, n, K0.shape[0] - n))
    lu = scipy.linalg.lu_factor(K0, check_finite=False)
    if not np.all(np.diag(lu[0])):
        raise np.linalg.LinAlgError("Singular matrix")
    # one direction at a time (matrix-vector products, one solve each): a direction's
    # sensitivities are then the same numbers whichever directions go with it
    for j, d in enumerate(np.ascontiguousarray(D.T)):
        dq, dv = Q0p @ d, V0p @ d
        rhs = np.concatenate([Jq @ dq + GV @ dv + P @ d, Rc_q @ dq + gamma_v @ dv + Rc_p @ d])
        # LAPACK's getrs, which lu_solve wraps, called directly: 0.4 instead of 5 us a solve
        dy = -scipy.linalg.lapack.dgetrs(lu[0], lu[1], rhs)[0]
        for x, col in zip(out, (dq, dv, dy[:n], dy[n:])):
            x[:, j] = col
    return out


def start_tangent(backend, x0: InitialState, p, t0, u0, D, dq, dv):
    """Sensitivities of (q0, v0, a0, lam0) along directions that move the parameters by the
    columns of ``D`` (n_p x nd) and the given q0, v0 by those of ``dq``, ``dv`` (n x nd): a
    start state that is itself an unknown (a segment of multiple shooting) besides the
    parameters. Entries of q0, v0 from the model's expressions move with p as in
    :func:`init_tangent`; a0 and lam0 stay consistent."""
    n = backend.sizes.n
    K0, Jq, GV, P, Rc_q, gamma_v, Rc_p, Q0p, V0p = _linearisation(backend, x0, p, t0, u0)
    dq0 = Q0p @ D + np.asarray(dq, dtype=float)
    dv0 = V0p @ D + np.asarray(dv, dtype=float)
    rhs = np.vstack([Jq @ dq0 + GV @ dv0 + P @ D, Rc_q @ dq0 + gamma_v @ dv0 + Rc_p @ D])
    dy = -np.linalg.solve(K0, rhs)
    return dq0, dv0, dy[:n], dy[n:]


def init_adjoint(backend, x0: InitialState, p, t0, u0, xbar0):
    """dJ/dp contributed through x0, given the adjoint xbar0 = (qb, vb, ab, lb) of x0."""
    n, m = backend.sizes.n, backend.sizes.m
    if not x0.massless:       # the usual case, in one compiled call where there is one
        grad = backend.initial_adjoint(t0, x0.q, x0.v, x0.a, x0.lam, p, u0, xbar0,
                                       x0.from_model)
        if grad is not None:
            return grad
    K0, Jq, GV, P, Rc_q, gamma_v, Rc_p, Q0p, V0p = _linearisation(backend, x0, p, t0, u0)
    qb, vb = xbar0[:n].copy(), xbar0[n:2 * n].copy()
    yb = xbar0[2 * n:3 * n + m]
    rb = -np.linalg.solve(K0.T, yb)
    rd, rc = rb[:n], rb[n:]
    grad = P.T @ rd + Rc_p.T @ rc
    qb += Jq.T @ rd + Rc_q.T @ rc
    vb += GV.T @ rd + gamma_v.T @ rc
    return grad + Q0p.T @ qb + V0p.T @ vb
