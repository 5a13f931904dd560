"""Hand-written numba port of the C reference of the engine mount (engine_mount.c).

The same discrete equations, predictor, Newton policy, stopping tests, closed-form
block-elimination solve, cost and discrete adjoint as the C file (which is the specification:
see its header), function for function (em_setup, em_tau, em_g, ..., em_forward, em_adjoint),
with NumPy arrays instead of pointers and the same status codes. It is the yardstick "a
hand-written numba code of the same scheme" of the benchmarks; :class:`EngineMountNumba` has
the interface of :class:`engine_mount.EngineMountReference`.

Needs numba. The functions are compiled by numba's JIT on their first call (the class does it
in its constructor, so that a timed call is not a compile), with ``cache=False`` (nothing is
written to disk), without fastmath (the C is compiled without -ffast-math) and with
``error_model="numpy"`` (IEEE division as in C, no ZeroDivisionError checks).
"""
from __future__ import annotations

import math
from collections import namedtuple

import numba
import numpy as np

if __package__:
    from .engine_mount import (
        PARAMETER_NAMES,
        STATUS,
        ForwardResult,
        ReferenceError,
        ReferenceSweeps,
    )
else:
    # loaded by path (tests/simulation/): load the sibling the same way, once
    import importlib.util
    import sys
    from pathlib import Path

    _name = "_symdae_em_reference"
    _ref = sys.modules.get(_name)
    if _ref is None:
        _spec = importlib.util.spec_from_file_location(_name,
                                                       Path(__file__).with_name("engine_mount.py"))
        _ref = importlib.util.module_from_spec(_spec)
        sys.modules[_name] = _ref         # dataclasses look their module up
        _spec.loader.exec_module(_ref)
    PARAMETER_NAMES, STATUS, ForwardResult, ReferenceError, ReferenceSweeps = (
        _ref.PARAMETER_NAMES, _ref.STATUS, _ref.ForwardResult, _ref.ReferenceError,
        _ref.ReferenceSweeps)

# parameters in model order (PARAMETER_NAMES)
P_CE1, P_CE2, P_DE, P_DH2, P_ML, P_MH, P_MM, P_CH, P_DH1, P_CM, P_DM, P_A, P_B, P_G, P_AMP, \
    P_OMEGA0, P_C = range(17)

EM_OK, EM_NEWTON_FAILED, EM_SINGULAR, EM_NOT_FINITE = 0, 1, 2, 3

FLOOR_FACTOR = 10.0
NOISE_FACTOR = 4.0
DBL_EPSILON = float(np.finfo(np.float64).eps)

# em_ctx: immutable after em_setup, passed by value (numba keeps it in registers)
Ctx = namedtuple("Ctx", (
    "h", "cM", "ap", "s", "gh", "ca", "cv1",                                    # scheme
    "cE1", "cE2", "dE", "dH2", "mL", "mH", "mM", "cH", "dH1", "cMem", "dM", "g", "amp", "om",
    "lnC",                                                                      # model
    "c1", "c2", "c3",                                                           # C_q = (0, c1, c2, c3)
    "k00c", "k00x", "k01", "k11", "k22", "k33c", "k33v", "i22"))                # constant parts of K

# em_fac (a float64 array): K^-1 by blocks, D^-1 = [[i00, i01], [i01, i11]] + diag(i22, i33),
# w = D^-1 B, 1/S
F_I00, F_I01, F_I11, F_I22, F_I33, F_W0, F_W1, F_W2, F_W3, F_IS = range(10)
N_FAC = 10

_jit = numba.njit(cache=False, fastmath=False, error_model="numpy")


@_jit
def em_setup(p, h, alpha):
    beta = 0.25 * (1.0 - alpha) * (1.0 - alpha)
    gam = 0.5 - alpha
    cM = 1.0 / (1.0 + alpha)
    s = beta * h * h
    gh = gam * h
    cE1, cE2, dE, dH2 = p[P_CE1], p[P_CE2], p[P_DE], p[P_DH2]
    mL, mH, mM, cH, dH1 = p[P_ML], p[P_MH], p[P_MM], p[P_CH], p[P_DH1]
    cMem, dM = p[P_CM], p[P_DM]
    k22 = cM * mM + s * cMem + gh * dM
    return Ctx(h, cM, alpha / (1.0 + alpha), s, gh, h * h * (0.5 - beta), h * (1.0 - gam),
               cE1, cE2, dE, dH2, mL, mH, mM, cH, dH1, cMem, dM, p[P_G], p[P_AMP], p[P_OMEGA0],
               math.log(p[P_C]),
               p[P_A] + p[P_B], -p[P_B], -p[P_A],
               cM * mL + s * (cE1 + cH) + gh * dE, 3.0 * s * cE2, -s * cH, s * cH, k22,
               cM * mH + gh * dH1, 3.0 * gh * dH2, 1.0 / k22)


@_jit
def em_tau(c, t):
    """-g mL - F(t), F = A sin(omega0 C^t t): the time-only part of g_0"""
    return -c.g * c.mL - c.amp * math.sin(c.om * math.exp(t * c.lnC) * t)


@_jit
def em_g(c, tau, q, v, lam, g):
    """g = C_q^T lam - Q at (q, v, lam); returns C(q)"""
    fH = c.cH * (q[0] - q[1])
    x1 = q[0]
    v4 = v[3]
    g[0] = fH + c.cE1 * x1 + c.cE2 * (x1 * x1 * x1) + c.dE * v[0] + tau
    g[1] = -fH + c.c1 * lam
    g[2] = c.c2 * lam + c.cMem * q[2] + c.dM * v[2]
    g[3] = c.c3 * lam + c.dH1 * v4 + c.dH2 * (v4 * v4 * v4)
    return c.c1 * q[1] + c.c2 * q[2] + c.c3 * q[3]


@_jit
def em_d00(c, x1):
    """K's entry d00, varying through x1^2"""
    return c.k00c + c.k00x * (x1 * x1)


@_jit
def em_d33(c, v4):
    """K's entry d33, varying through v4^2"""
    return c.k33c + c.k33v * (v4 * v4)


@_jit
def em_factor(c, x1, v4, f):
    """K at (x1, v4), eliminated into f; EM_OK, or EM_SINGULAR / EM_NOT_FINITE"""
    d00 = em_d00(c, x1)
    d33 = em_d33(c, v4)
    det = d00 * c.k11 - c.k01 * c.k01
    if not math.isfinite(det) or not math.isfinite(d33):
        return EM_NOT_FINITE
    if not (det > 0.0) or not (d33 > 0.0):
        return EM_SINGULAR
    det = 1.0 / det
    f[F_I00] = c.k11 * det
    f[F_I01] = -c.k01 * det
    f[F_I11] = d00 * det
    f[F_I22] = c.i22
    f[F_I33] = 1.0 / d33
    f[F_W0] = f[F_I01] * c.c1
    f[F_W1] = f[F_I11] * c.c1
    f[F_W2] = f[F_I22] * c.c2
    f[F_W3] = f[F_I33] * c.c3
    S = c.c1 * f[F_W1] + c.c2 * f[F_W2] + c.c3 * f[F_W3]
    if not (S > 0.0):
        return EM_SINGULAR
    f[F_IS] = 1.0 / S
    return EM_OK


@_jit
def em_solve(c, f, r, y):
    """y = K^-1 r (K symmetric, so also K^-T r); y may be r"""
    z0 = f[F_I00] * r[0] + f[F_I01] * r[1]
    z1 = f[F_I01] * r[0] + f[F_I11] * r[1]
    z2 = f[F_I22] * r[2]
    z3 = f[F_I33] * r[3]
    y4 = (c.c1 * z1 + c.c2 * z2 + c.c3 * z3 - r[4]) * f[F_IS]
    y[0] = z0 - f[F_W0] * y4
    y[1] = z1 - f[F_W1] * y4
    y[2] = z2 - f[F_W2] * y4
    y[3] = z3 - f[F_W3] * y4
    y[4] = y4


@_jit
def em_noise(c, q, v, a, lam, g, nu):
    """Round-off level of each residual row near the accepted state (the core's
    residual_noise): sum_c |K_rc| fq_c + eps (|cM Ma_r| + (1 + |ap|) |g_r|), fq = eps (|q| +
    h |v| + h^2 |a|) / s for accelerations and eps |lam| for lam."""
    eps = DBL_EPSILON
    h = c.h
    e1 = eps * (1.0 + abs(c.ap))
    d00 = em_d00(c, q[0])
    d33 = em_d33(c, v[3])
    # fq[0..3] as scalars: no array allocated per step
    fq0 = (abs(q[0]) + h * abs(v[0]) + h * h * abs(a[0])) * (eps / c.s)
    fq1 = (abs(q[1]) + h * abs(v[1]) + h * h * abs(a[1])) * (eps / c.s)
    fq2 = (abs(q[2]) + h * abs(v[2]) + h * h * abs(a[2])) * (eps / c.s)
    fq3 = (abs(q[3]) + h * abs(v[3]) + h * h * abs(a[3])) * (eps / c.s)
    fq4 = abs(lam) * eps
    nu[0] = (abs(d00) * fq0 + abs(c.k01) * fq1
             + eps * abs(c.cM * c.mL * a[0]) + e1 * abs(g[0]))
    nu[1] = abs(c.k01) * fq0 + abs(c.k11) * fq1 + abs(c.c1) * fq4 + e1 * abs(g[1])
    nu[2] = (abs(c.k22) * fq2 + abs(c.c2) * fq4
             + eps * abs(c.cM * c.mM * a[2]) + e1 * abs(g[2]))
    nu[3] = (abs(d33) * fq3 + abs(c.c3) * fq4
             + eps * abs(c.cM * c.mH * a[3]) + e1 * abs(g[3]))
    nu[4] = abs(c.c1) * fq1 + abs(c.c2) * fq2 + abs(c.c3) * fq3


@_jit
def em_initial(c, t0, q, v, a):
    """Consistent a0 (into a) and lam0 (returned) at (t0, q0, v0): [[M, C_q^T], [C_q, 0]]
    (a0, lam0) = (Q, 0), solved in closed form (linear, time-free constraint)."""
    g = np.empty(4)
    em_g(c, em_tau(c, t0), q, v, 0.0, g)
    Q0, Q1, Q2, Q3 = -g[0], -g[1], -g[2], -g[3]
    lam = Q1 / c.c1                            # row x2: massless, only lam and cH act
    a[0] = Q0 / c.mL
    a[2] = (Q2 - c.c2 * lam) / c.mM
    a[3] = (Q3 - c.c3 * lam) / c.mH
    a[1] = -(c.c2 * a[2] + c.c3 * a[3]) / c.c1
    return lam


@_jit
def em_forward(p, t0, h, N, alpha, q0, v0, rtol, max_iter, data, store, Q, V, A, L, out):
    """Forward sweep. p: the 17 parameters in model order; q0, v0: a consistent initial state;
    data (N+1) the measured a1 (empty: J = 0). With ``store``, Q, V, A (N+1, 4) and L (N+1)
    receive the trajectory (else they are not touched). out <- (J, Newton iterations, Jacobian
    refreshes, steps stopped by the round-off test, failure time). Returns EM_OK or an error
    code."""
    eps = DBL_EPSILON
    c = em_setup(p, h, alpha)
    fac = np.empty(N_FAC)
    fr = np.empty(N_FAC)
    q, v, a, aprev = np.empty(4), np.empty(4), np.empty(4), np.empty(4)
    qh, vh, qc, vc = np.empty(4), np.empty(4), np.empty(4), np.empty(4)
    g, gprev = np.empty(4), np.empty(4)
    y, R, dy, nu = np.empty(5), np.empty(5), np.empty(5), np.empty(5)
    has_data = data.shape[0] > 0
    J = 0.0
    iters = 0
    refreshes = 0
    noise_stops = 0
    status = EM_OK

    fa = FLOOR_FACTOR * eps / c.s
    for k in range(4):
        q[k] = q0[k]
        v[k] = v0[k]
    lam = em_initial(c, t0, q, v, a)
    for k in range(4):
        aprev[k] = a[k]
    lprev = lam
    if store:
        for k in range(4):
            Q[0, k] = q[k]
            V[0, k] = v[k]
            A[0, k] = a[k]
        L[0] = lam
    if has_data and N > 0:
        r = a[0] - data[0]
        J += r * r
    em_g(c, em_tau(c, t0), q, v, lam, gprev)
    em_noise(c, q, v, a, lam, gprev, nu)

    for i in range(N):
        t1 = t0 + (i + 1) * h
        for k in range(4):
            qh[k] = q[k] + h * v[k] + c.ca * a[k]
            vh[k] = v[k] + c.cv1 * a[k]
            y[k] = 2.0 * a[k] - aprev[k]
        y[4] = 2.0 * lam - lprev
        tau = em_tau(c, t1)
        cur = fac
        norm_prev = math.inf
        ok = False
        for j in range(max_iter):
            at_noise = True
            for k in range(4):
                qc[k] = qh[k] + c.s * y[k]
                vc[k] = vh[k] + c.gh * y[k]
            C = em_g(c, tau, qc, vc, y[4], g)
            iters += 1
            R[0] = c.cM * (c.mL * y[0]) + g[0] - c.ap * gprev[0]
            R[1] = g[1] - c.ap * gprev[1]
            R[2] = c.cM * (c.mM * y[2]) + g[2] - c.ap * gprev[2]
            R[3] = c.cM * (c.mH * y[3]) + g[3] - c.ap * gprev[3]
            R[4] = C / c.s
            rnorm = 0.0
            for k in range(5):
                wk = abs(R[k])
                if not (wk <= rnorm):          # NaN-propagating max
                    rnorm = wk
                if not (wk <= NOISE_FACTOR * nu[k]):
                    at_noise = False
                R[k] = -R[k]
            if not math.isfinite(rnorm):
                status = EM_NOT_FINITE
                break
            if j == 0:                         # the iteration matrix at the start value
                status = em_factor(c, qc[0], vc[3], fac)
                if status != EM_OK:
                    break
            if at_noise:
                ok = True
                noise_stops += 1
                break
            em_solve(c, cur, R, dy)
            amax = 0.0
            for k in range(4):
                wk = abs(y[k])
                amax = wk if wk > amax else amax
            amax *= FLOOR_FACTOR * eps
            lmax = FLOOR_FACTOR * eps * abs(y[4])
            norm = 0.0
            for k in range(4):
                wk = rtol * abs(y[k]) + fa * abs(qc[k]) + amax
                wk = abs(dy[k]) / wk if wk > 0.0 else (0.0 if dy[k] == 0.0 else math.inf)
                if not (wk <= norm):
                    norm = wk
            wk = rtol * abs(y[4]) + lmax
            wk = abs(dy[4]) / wk if wk > 0.0 else (0.0 if dy[4] == 0.0 else math.inf)
            if not (wk <= norm):
                norm = wk
            if norm <= 1.0:
                ok = True
                break
            if j > 0 and (norm >= norm_prev or norm * (norm / norm_prev)
                          * (norm / norm_prev) * (norm / norm_prev) > 1.0):
                if em_factor(c, qc[0], vc[3], fr) != EM_OK:
                    break                      # K singular at an iterate: divergence
                cur = fr
                refreshes += 1
                em_solve(c, cur, R, dy)
            for k in range(5):
                y[k] += dy[k]
            norm_prev = norm
        if not ok:
            if status == EM_OK:
                status = EM_NEWTON_FAILED
            out[4] = t1
            break
        # accept x_{i+1}
        for k in range(4):
            aprev[k] = a[k]
            a[k] = y[k]
            q[k] = qc[k]
            v[k] = vc[k]
            gprev[k] = g[k]
        lprev = lam
        lam = y[4]
        if store:
            for k in range(4):
                Q[i + 1, k] = q[k]
                V[i + 1, k] = v[k]
                A[i + 1, k] = a[k]
            L[i + 1] = lam
        if has_data and i + 1 < N:
            r = a[0] - data[i + 1]
            J += r * r
        em_noise(c, q, v, a, lam, g, nu)
    out[0] = 0.5 * h * J
    out[1] = float(iters)
    out[2] = float(refreshes)
    out[3] = float(noise_stops)
    return status


@_jit
def em_param_vjp(x1, v1, v4, w0, w3, grad):
    """dg_k/dp for (cE1, cE2, dE, dH2): g_0 = ... + cE1 x1 + cE2 x1^3 + dE v1, g_3 = ... +
    dH2 v4^3; grad += P(x)^T (w0, ., ., w3)"""
    grad[0] += x1 * w0
    grad[1] += (x1 * x1 * x1) * w0
    grad[2] += v1 * w0
    grad[3] += (v4 * v4 * v4) * w3


@_jit
def em_adjoint(p, t0, h, N, alpha, Q, V, A, L, data, grad, init):
    """Discrete adjoint (paper eqs. 9, 11) of J = h/2 sum_{i<N} (a1_i - data_i)^2 over the
    trajectory em_forward stored. grad (4) <- dJ/d(cE1, cE2, dE, dH2); init (4) <- the part of
    it that flows through the consistent (a0, lam0). t0 and L are unused, as in the C (K and
    the Jacobians do not depend on lam). Returns EM_OK or EM_SINGULAR."""
    c = em_setup(p, h, alpha)
    f = np.empty(N_FAC)
    qb, vb, ab, rn = np.zeros(4), np.zeros(4), np.zeros(4), np.zeros(4)
    qt, vt = np.empty(4), np.empty(4)
    mu, z = np.empty(5), np.empty(5)
    g0 = np.zeros(4)
    for k in range(4):
        grad[k] = 0.0
    lb = 0.0
    # output source of state N: eta_N = 0 (left rule)
    for i in range(N - 1, -1, -1):
        # xbar holds the adjoint of x_{i+1}; step i -> i+1
        for k in range(4):
            mu[k] = ab[k] + c.s * qb[k] + c.gh * vb[k]
        mu[4] = lb
        if em_factor(c, Q[i + 1, 0], V[i + 1, 3], f) != EM_OK:
            return EM_SINGULAR
        em_solve(c, f, mu, mu)
        for k in range(5):
            mu[k] = -mu[k]                     # r = -K^-T ybar
        # qhat, vhat adjoints: (dg/dq)_{i+1}^T r_d + C_q^T r_c / s, (dg/dv)_{i+1}^T r_d
        x1, v4 = Q[i + 1, 0], V[i + 1, 3]
        kq = c.cE1 + 3.0 * c.cE2 * (x1 * x1) + c.cH
        kv = c.dH1 + 3.0 * c.dH2 * (v4 * v4)
        qt[0] = qb[0] + kq * mu[0] - c.cH * mu[1]
        qt[1] = qb[1] - c.cH * mu[0] + c.cH * mu[1] + c.c1 * mu[4] / c.s
        qt[2] = qb[2] + c.cMem * mu[2] + c.c2 * mu[4] / c.s
        qt[3] = qb[3] + c.c3 * mu[4] / c.s
        vt[0] = vb[0] + c.dE * mu[0]
        vt[1] = vb[1]
        vt[2] = vb[2] + c.dM * mu[2]
        vt[3] = vb[3] + kv * mu[3]
        # parameters at state i+1: in step i -> i+1 (g_{i+1}), in step i+1 -> i+2 (-ap g_{i+1})
        em_param_vjp(x1, V[i + 1, 0], v4, mu[0] - c.ap * rn[0], mu[3] - c.ap * rn[3], grad)
        for k in range(4):
            rn[k] = mu[k]
        # state i: predictor adjoints, its -ap g_i term, the output source
        x1, v4 = Q[i, 0], V[i, 3]
        kq = c.cE1 + 3.0 * c.cE2 * (x1 * x1) + c.cH
        kv = c.dH1 + 3.0 * c.dH2 * (v4 * v4)
        qb[0] = qt[0] - c.ap * (kq * mu[0] - c.cH * mu[1])
        qb[1] = qt[1] - c.ap * (c.cH * mu[1] - c.cH * mu[0])
        qb[2] = qt[2] - c.ap * (c.cMem * mu[2])
        qb[3] = qt[3]
        vb[0] = h * qt[0] + vt[0] - c.ap * (c.dE * mu[0])
        vb[1] = h * qt[1] + vt[1]
        vb[2] = h * qt[2] + vt[2] - c.ap * (c.dM * mu[2])
        vb[3] = h * qt[3] + vt[3] - c.ap * (kv * mu[3])
        for k in range(4):
            ab[k] = c.ca * qt[k] + c.cv1 * vt[k]
        ab[0] += h * (A[i, 0] - data[i])
        lb = -c.ap * (c.c1 * mu[1] + c.c2 * mu[2] + c.c3 * mu[3])
    # g_0 enters step 0 -> 1 through -ap g_0
    if N > 0:
        em_param_vjp(Q[0, 0], V[0, 0], V[0, 3], -c.ap * rn[0], -c.ap * rn[3], grad)
    # consistent (a0, lam0): K0 y0 = (Q(x0, p), 0), K0 = [[M, C_q^T], [C_q, 0]] symmetric;
    # r = -K0^-1 (ab, lb), grad += P(x0)^T r_d (q0, v0 are given numbers)
    z[4] = ab[1] / c.c1
    z[0] = ab[0] / c.mL
    z[2] = (ab[2] - c.c2 * z[4]) / c.mM
    z[3] = (ab[3] - c.c3 * z[4]) / c.mH
    em_param_vjp(Q[0, 0], V[0, 0], V[0, 3], -z[0], -z[3], g0)
    for k in range(4):
        grad[k] += g0[k]
        init[k] = g0[k]
    return EM_OK


class EngineMountNumba(ReferenceSweeps):
    """The numba sweeps: see :class:`engine_mount.ReferenceSweeps`. The constructor compiles
    them (warm_up)."""

    def __init__(self, **grid):
        super().__init__(**grid)
        self.warm_up()

    def warm_up(self) -> None:
        """Compile both sweeps for this instance's argument types (a zero-step grid, so the
        buffers keep no trajectory)."""
        p = np.ones(len(PARAMETER_NAMES))
        em_forward(p, self.t0, self.h, 0, self.alpha, self.q0, self.v0, self.rtol,
                   self.max_iter, self.data, True, self.Q, self.V, self.A, self.L, self.out)
        em_adjoint(p, self.t0, self.h, 0, self.alpha, self.Q, self.V, self.A, self.L,
                   self.data, self.grad, self.init_term)

    def _forward(self, store: bool) -> ForwardResult:
        st = em_forward(self._p, self.t0, self.h, self.N, self.alpha, self.q0, self.v0,
                        self.rtol, self.max_iter, self.data, store, self.Q, self.V, self.A,
                        self.L, self.out)
        return self._result(st, "numba")

    def _adjoint(self) -> None:
        st = em_adjoint(self._p, self.t0, self.h, self.N, self.alpha, self.Q, self.V, self.A,
                        self.L, self.data, self.grad, self.init_term)
        if st != 0:
            raise ReferenceError(f"numba adjoint sweep: {STATUS.get(st, st)}")
