# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled HHT core: forward, tangent-linear and adjoint sweeps over a model's kernels.

This module knows no model. It reaches a model only through the kernel table of
symdae_kernels.h (a ``symdae_model`` behind a PyCapsule). The Python layer
(symdae/system.py, symdae/sensitivity.py) validates every shape and type before calling in,
so the nogil loops trust their inputs.

Discrete scheme (paper eq. 15), x_i = (q_i, v_i, a_i, lam_i), s = beta h^2:

    q_{i+1} = q_i + h v_i + h^2 (1/2 - beta) a_i + s a_{i+1}
    v_{i+1} = v_i + h (1 - gamma) a_i + gamma h a_{i+1}
    R_dyn = Ma_{i+1} / (1 + alpha) + g_{i+1} - alpha / (1 + alpha) g_i = 0,  g = C_q^T lam - Q
    R_con = C(q_{i+1}, t_{i+1}) / s = 0

Newton on y = (a_{i+1}, lam_{i+1}) with the matrix K of eq. (16). K is evaluated and
factorised once per step, at the accepted state; that factorisation is (1) the iteration matrix
of the next step's Newton iterations (simplified Newton, started from (a, lam) extrapolated
linearly; K is refreshed at the current iterate when the measured contraction rate theta
cannot reach the tolerance within three more iterations, norm * theta^3 > 1, or the correction
grows) and (2), stored, exactly the matrix the tangent-linear and adjoint sweeps need. So J and
J + gradient run the identical forward path. Costly (t, p, u)-only terms are evaluated once
per step (time_terms) and shared by the iterations.

Newton stops at the first iterate y that passes either test:
 (a) the next correction is small: max_k |dy_k| / w_k <= 1 with
     w_k = rtol |y_k| + 10 eps (|q_k| / s + max|a|) for accelerations (q = q_pred + s a cannot
     resolve a better than eps |q| / s) and w_k = rtol |y_k| + 10 eps max|lam| for multipliers;
 (b) the residual is at its round-off level: |R_r| <= 4 nu_r for every row, where nu_r is the
     rounding of row r's terms (|K_rc| eps (|q_c| + h |v_c| + h^2 |a_c|) / s, |K_rc| eps |lam_c|,
     eps |Ma_r|, eps |g_r|), taken at the last accepted state.
A pure relative test on a stalls once round-off dominates; (b) ends those steps.
"""
import numpy as np

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.math cimport fabs, isfinite, INFINITY
from libc.string cimport memcpy, memset

from symdae.core.kernel_api cimport symdae_args, symdae_model, symdae_kernel, SYMDAE_ABI_VERSION
from symdae.core.dense cimport lu_factor, lu_solve, lu_solve_t, gemv, gemv_t, DBL_EPSILON

# status codes returned by the sweeps (the Python layer turns them into exceptions)
cdef enum Status:
    OK = 0
    NEWTON_FAILED = 1
    SINGULAR = 2
    NOT_FINITE = 3

STATUS = {"OK": OK, "NEWTON_FAILED": NEWTON_FAILED, "SINGULAR": SINGULAR,
          "NOT_FINITE": NOT_FINITE}

KERNEL_NAMES = ("residual", "newton", "jacobians", "param_jacobians", "param_vjp", "state_vjp",
                "outputs", "output_jacobians", "output_vjp", "initial_state",
                "initial_state_jacobian", "constraint_velocity", "acceleration_constraint")

cdef double FLOOR_FACTOR = 10.0
cdef double NOISE_FACTOR = 4.0



cdef class Kernels:
    """The kernel table of one compiled model (keeps its module alive)."""

    cdef const symdae_model* km
    cdef readonly object module
    cdef readonly int n, m, n_p, n_u, n_s, n_tau
    cdef dict _sizes
    cdef dict _wsizes

    def __cinit__(self, module):
        cap = getattr(module, "kernels", None)
        if cap is None or not PyCapsule_IsValid(cap, b"symdae.model"):
            raise TypeError(f"{module!r} does not export a 'symdae.model' kernel capsule")
        self.km = <const symdae_model*>PyCapsule_GetPointer(cap, b"symdae.model")
        if self.km.abi_version != SYMDAE_ABI_VERSION:
            raise ImportError(f"kernel module {module!r} has ABI {self.km.abi_version}, the "
                              f"core expects {SYMDAE_ABI_VERSION}: rebuild it")
        self.module = module
        self.n, self.m, self.n_p = self.km.n, self.km.m, self.km.n_p
        self.n_u, self.n_s, self.n_tau = self.km.n_u, self.km.n_s, self.km.n_tau
        n, m, n_p, n_s = self.n, self.m, self.n_p, self.n_s
        self._sizes = {
            "residual": 2 * n + m, "newton": (n + m) ** 2, "jacobians": 3 * n * n + m * n,
            "param_jacobians": (2 * n + m) * n_p, "param_vjp": n_p, "state_vjp": 3 * n + m,
            "outputs": n_s, "output_jacobians": n_s * (3 * n + m) + n_s * n_p,
            "output_vjp": 3 * n + m + n_p, "initial_state": 2 * n,
            "initial_state_jacobian": 2 * n * n_p, "constraint_velocity": m,
            "acceleration_constraint": m + 2 * m * n + m * n_p,
        }
        self._wsizes = {"newton": 3, "param_vjp": 2 * n + m, "state_vjp": 3 * n + m,
                        "output_vjp": n_s}

    def output_size(self, str name):
        """Length of the flat output of kernel ``name``."""
        try:
            return self._sizes[name]
        except KeyError:
            raise KeyError(f"unknown kernel {name!r}; kernels: {', '.join(KERNEL_NAMES)}") \
                from None

    def weight_size(self, str name):
        """Length of the run-time coefficient vector ``w`` kernel ``name`` reads."""
        return self._wsizes.get(name, 0)

    cdef symdae_kernel _get(self, str name) except NULL:
        cdef const symdae_model* k = self.km
        cdef symdae_kernel fns[13]
        fns[:] = [k.residual, k.newton, k.jacobians, k.param_jacobians, k.param_vjp,
                  k.state_vjp, k.outputs, k.output_jacobians, k.output_vjp, k.initial_state,
                  k.initial_state_jacobian, k.constraint_velocity, k.acceleration_constraint]
        if name not in KERNEL_NAMES:
            raise KeyError(f"unknown kernel {name!r}; kernels: {', '.join(KERNEL_NAMES)}")
        return fns[KERNEL_NAMES.index(name)]

    def evaluate(self, str name, double t, q, v, a, lam, p, u, w=None):
        """Evaluate one kernel at one state; returns its flat output (structural zeros = 0).

        Accumulating kernels (param_vjp, state_vjp, output_vjp) start from zero.
        """
        cdef symdae_kernel fn = self._get(name)
        cdef Py_ssize_t size = self.output_size(name)
        cdef double[::1] bq = _vector(q, self.n, "q", name)
        cdef double[::1] bv = _vector(v, self.n, "v", name)
        cdef double[::1] ba = _vector(a, self.n, "a", name)
        cdef double[::1] bl = _vector(lam, self.m, "lam", name)
        cdef double[::1] bp = _vector(p, self.n_p, "p", name)
        cdef double[::1] bu = _vector(u, self.n_u, "u", name)
        cdef double[::1] bw = _vector(w if w is not None else (), self.weight_size(name), "w",
                                      name)
        out = np.zeros(size + 1)
        cdef double[::1] bo = out
        cdef double[::1] btau = np.zeros(self.n_tau + 1)
        cdef symdae_args x
        x.t = t
        x.q = &bq[0]
        x.v = &bv[0]
        x.a = &ba[0]
        x.lam = &bl[0]
        x.p = &bp[0]
        x.u = &bu[0]
        x.tau = &btau[0]
        with nogil:
            at_time(self.km, &x, True)
            fn(&x, &bw[0], &bo[0])
        return out[:size]


cdef object _vector(object arr, Py_ssize_t k, str label, str name):
    """arr as a contiguous float64 vector of length k (a 1-element dummy when k = 0)."""
    vec = np.ascontiguousarray(arr, dtype=np.float64).reshape(-1)
    if vec.shape[0] != k:
        raise ValueError(f"{name}: {label} has {vec.shape[0]} entries, expected {k}")
    return vec if k > 0 else np.zeros(1)


# ---------------------------------------------------------------------------- helpers

cdef inline double* base2(double[:, ::1] X) noexcept nogil:
    # X may have zero columns (no constraints, inputs or outputs): its rows are never read.
    if X.shape[1] == 0:
        return NULL
    return &X[0, 0]


cdef inline double* at(double* base, Py_ssize_t i, int width) noexcept nogil:
    return NULL if base == NULL else base + i * width


cdef struct Scheme:
    # HHT coefficients for one (h, alpha); kw = (cM, s, gh) are the newton kernel's weights
    double h, cM, ap, s, gh, ca, cv1
    double kw[3]


cdef inline Scheme scheme(double h, double alpha) noexcept nogil:
    cdef Scheme c
    cdef double beta = 0.25 * (1.0 - alpha) * (1.0 - alpha), gam = 0.5 - alpha
    c.h = h
    c.cM = 1.0 / (1.0 + alpha)
    c.ap = alpha / (1.0 + alpha)
    c.s = beta * h * h
    c.gh = gam * h
    c.ca = h * h * (0.5 - beta)
    c.cv1 = h * (1.0 - gam)
    c.kw[0] = c.cM
    c.kw[1] = c.s
    c.kw[2] = c.gh
    return c


cdef struct Traj:
    # raw views of a trajectory: row i of X starts at X + i * width
    double* q
    double* v
    double* a
    double* lam
    const double* u
    int n, m, n_u


cdef inline Traj traj_of(double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A,
                         double[:, ::1] L, const double[:, ::1] U) noexcept nogil:
    cdef Traj tr
    tr.q = &Q[0, 0]
    tr.v = &V[0, 0]
    tr.a = &A[0, 0]
    tr.lam = base2(L)
    tr.u = NULL if U.shape[1] == 0 else &U[0, 0]
    tr.n = <int>Q.shape[1]
    tr.m = <int>L.shape[1]
    tr.n_u = <int>U.shape[1]
    return tr


cdef inline void set_state(symdae_args* x, const Traj* tr, double t, Py_ssize_t i) noexcept nogil:
    # (x.tau is not touched: call at_time() when t or u change)
    x.t = t
    x.q = tr.q + i * tr.n
    x.v = tr.v + i * tr.n
    x.a = tr.a + i * tr.n
    x.lam = at(tr.lam, i, tr.m)
    x.u = NULL if tr.u == NULL else tr.u + i * tr.n_u


cdef inline void time_terms_at(const symdae_model* km, symdae_args* x, double[:, ::1] TAU,
                               Py_ssize_t i, double* buf) noexcept nogil:
    """Point x.tau at state i's stored time terms, or evaluate them into buf."""
    if TAU is not None and TAU.shape[1] > 0:
        x.tau = &TAU[i, 0]
    else:
        x.tau = buf
        at_time(km, x, True)


cdef inline void at_time(const symdae_model* km, symdae_args* x, bint sensitivity) noexcept nogil:
    """Evaluate the hoisted (t, p, u)-only terms into x.tau (for x.t, x.p, x.u)."""
    km.time_terms(x, NULL, <double*>x.tau)
    if sensitivity:
        km.time_terms_sensitivity(x, NULL, <double*>x.tau)


cdef inline void store_tau(const symdae_model* km, symdae_args* x, double* row,
                           int n_tau) noexcept nogil:
    """Copy this time's forward time terms to row, and add the sensitivity terms there."""
    memcpy(row, x.tau, n_tau * sizeof(double))
    km.time_terms_sensitivity(x, NULL, row)


cdef inline void residual_noise(const double* K, const double* q, const double* v,
                                const double* a, const double* lam, const double* res,
                                const Scheme* c, int n, int m, double* fq,
                                double* nu) noexcept nogil:
    """nu_r <- round-off level of residual row r near this state (see module docstring).

    q_{i+1} = q_i + h v_i + ... + s a_{i+1} is a sum whose rounding is eps times the size of
    its terms, not of the result (q may cross zero), hence |q| + h |v| + h^2 |a|.
    """
    cdef int r, k, nm = n + m
    cdef double acc, eps = DBL_EPSILON
    cdef const double* Kr
    for k in range(n):
        fq[k] = (fabs(q[k]) + c.h * fabs(v[k]) + c.h * c.h * fabs(a[k])) * (eps / c.s)
    for k in range(m):
        fq[n + k] = fabs(lam[k]) * eps
    for r in range(nm):
        Kr = K + r * nm
        acc = 0.0
        for k in range(nm):
            acc += fabs(Kr[k]) * fq[k]
        if r < n:
            acc += eps * (fabs(c.cM * res[r]) + (1.0 + fabs(c.ap)) * fabs(res[n + r]))
        nu[r] = acc


cdef inline int factor_into(const symdae_model* km, const symdae_args* x, const double* kw,
                            double* Kmat, double* LUout, int* piv, int nm) noexcept nogil:
    """Evaluate the Newton matrix at x into Kmat and factorise a copy into LUout."""
    km.newton(x, kw, Kmat)
    memcpy(LUout, Kmat, nm * nm * sizeof(double))
    return lu_factor(LUout, piv, nm)


# ---------------------------------------------------------------------------- forward

def forward(Kernels K, double t0, double h, Py_ssize_t N, double alpha,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] L,
            double[:, ::1] S, double[:, :, ::1] LU, int[:, ::1] PIV, double[:, ::1] TAU,
            double rtol, int max_iter, Py_ssize_t[::1] counters, double[::1] info):
    """HHT forward sweep from the consistent state in row 0 of Q, V, A, L.

    Fills rows 1..N of Q, V, A, L and rows 0..N of the outputs S. If LU is not None, LU[i] and
    PIV[i] receive the factorised Newton matrix at the accepted state i and TAU[i] (N+1, n_tau)
    all hoisted time terms there, for the sensitivity sweeps (which then evaluate no time
    term). The Newton path is the same either way, so J and J + gradient see the same
    trajectory. counters <- (steps, Newton iterations, factorisations, Jacobian refreshes).
    Returns OK, or NEWTON_FAILED / SINGULAR / NOT_FINITE with info = (time, step, iterations,
    residual max-norm, pivot index or -1, first residual max-norm of the step).
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m, ns = K.n_s, k, j
    cdef bint store = LU is not None
    cdef Scheme c = scheme(h, alpha)
    cdef double eps = DBL_EPSILON, t1, norm, norm_prev, wk, amax, lmax, rnorm, fa, r_first
    cdef Py_ssize_t i = 0, iters = 0, facts = 0, refreshes = 0
    cdef int status = OK, pivot
    cdef bint at_noise

    work_a = np.zeros(2 * n + m + 4 * n + 7 * nm + 3 * nm * nm + K.n_tau + 8)
    piv_a = np.zeros(2 * nm + 2, dtype=np.intc)
    cdef double[::1] work = work_a
    cdef int[::1] pivw = piv_a
    cdef double* res = &work[0]          # [Ma, g, C] from the residual kernel
    cdef double* gprev = res + 2 * n + m
    cdef double* qc = gprev + n          # q, v of the current iterate
    cdef double* vc = qc + n
    cdef double* qh = vc + n             # predictors
    cdef double* R = qh + n
    cdef double* dy = R + nm
    cdef double* y = dy + nm             # (a, lam) of the current iterate
    cdef double* nu = y + nm             # residual round-off levels
    cdef double* fq = nu + nm
    cdef double* vh = fq + nm
    cdef double* Kmat = vh + nm
    cdef double* LUw = Kmat + nm * nm    # factorisation when not stored
    cdef double* LUr = LUw + nm * nm     # refreshed factorisation
    cdef double* tau = LUr + nm * nm     # hoisted (t, p, u) terms of the current time
    cdef int* pw = &pivw[0]
    cdef int* pr = pw + nm + 1
    cdef Traj tr = traj_of(Q, V, A, L, U)
    cdef double* Sb = base2(S)
    cdef double* lu_b = &LU[0, 0, 0] if store else NULL
    cdef int* piv_b = &PIV[0, 0] if store else NULL
    cdef double* LUcur
    cdef int* pcur
    cdef double* qi
    cdef double* vi
    cdef double* ai
    cdef double* li
    cdef double* ap_prev
    cdef double* lp_prev
    cdef symdae_args x
    x.p = &p[0]
    x.tau = tau

    with nogil:
        # ---- state 0: g_0, outputs, Newton matrix for the first step
        set_state(&x, &tr, t0, 0)
        at_time(km, &x, False)
        if store and K.n_tau > 0:
            store_tau(km, &x, &TAU[0, 0], K.n_tau)
        km.residual(&x, NULL, res)
        memcpy(gprev, res + n, n * sizeof(double))
        km.outputs(&x, NULL, Sb)
        LUcur = lu_b if store else LUw
        pcur = piv_b if store else pw
        pivot = factor_into(km, &x, c.kw, Kmat, LUcur, pcur, nm)
        facts += 1
        if pivot != 0:
            info[0] = t0
            info[1] = 0
            info[4] = pivot - 1
            status = NOT_FINITE if pivot < 0 else SINGULAR
        else:
            residual_noise(Kmat, x.q, x.v, x.a, x.lam, res, &c, n, m, fq, nu)

        while status == OK and i < N:
            t1 = t0 + (i + 1) * h
            qi = tr.q + i * n
            vi = tr.v + i * n
            ai = tr.a + i * n
            li = at(tr.lam, i, m)
            # Newton starts from (a, lam) extrapolated linearly from the last two states
            ap_prev = ai - n if i > 0 else ai
            lp_prev = li - m if i > 0 else li
            for k in range(n):
                qh[k] = qi[k] + h * vi[k] + c.ca * ai[k]
                vh[k] = vi[k] + c.cv1 * ai[k]
                y[k] = 2.0 * ai[k] - ap_prev[k]
            for k in range(m):
                y[n + k] = 2.0 * li[k] - lp_prev[k]
            x.t = t1
            x.q = qc
            x.v = vc
            x.a = y
            x.lam = y + n if m > 0 else NULL
            x.u = NULL if tr.u == NULL else tr.u + (i + 1) * tr.n_u
            at_time(km, &x, False)      # once per step: the Newton iterations share it
            norm_prev = INFINITY
            status = NEWTON_FAILED
            r_first = -1.0
            for j in range(max_iter):
                for k in range(n):
                    qc[k] = qh[k] + c.s * y[k]
                    vc[k] = vh[k] + c.gh * y[k]
                km.residual(&x, NULL, res)
                iters += 1
                for k in range(n):
                    R[k] = c.cM * res[k] + res[n + k] - c.ap * gprev[k]
                for k in range(m):
                    R[n + k] = res[2 * n + k] / c.s
                rnorm = 0.0
                at_noise = True
                for k in range(nm):
                    dy[k] = -R[k]
                    wk = fabs(R[k])
                    if not (wk <= rnorm):
                        rnorm = wk            # also catches NaN
                    if not (wk <= NOISE_FACTOR * nu[k]):
                        at_noise = False
                if r_first < 0.0:
                    r_first = rnorm
                if not isfinite(rnorm):
                    status = NOT_FINITE
                    break
                if at_noise:
                    status = OK
                    break
                lu_solve(LUcur, pcur, dy, nm)
                amax = 0.0
                lmax = 0.0
                for k in range(n):
                    amax = max(amax, fabs(y[k]))
                for k in range(n, nm):
                    lmax = max(lmax, fabs(y[k]))
                amax *= FLOOR_FACTOR * eps
                lmax *= FLOOR_FACTOR * eps
                fa = FLOOR_FACTOR * eps / c.s
                norm = 0.0
                for k in range(nm):
                    if k < n:
                        wk = rtol * fabs(y[k]) + fa * fabs(qc[k]) + amax
                    else:
                        wk = rtol * fabs(y[k]) + lmax
                    wk = fabs(dy[k]) / wk if wk > 0.0 else (0.0 if dy[k] == 0.0 else INFINITY)
                    if not (wk <= norm):
                        norm = wk
                if norm <= 1.0:
                    status = OK
                    break
                # simplified Newton contracts linearly (rate theta); when it cannot reach the
                # tolerance within 3 more iterations, refresh K here (full Newton from now on)
                if j > 0 and (norm >= norm_prev or norm * (norm / norm_prev) ** 3 > 1.0):
                    pivot = factor_into(km, &x, c.kw, Kmat, LUr, pr, nm)
                    facts += 1
                    refreshes += 1
                    if pivot != 0:
                        # a singular or non-finite K at an iterate, not at an accepted state,
                        # means Newton has left the solution's neighbourhood: report divergence
                        info[4] = pivot - 1
                        break
                    LUcur = LUr
                    pcur = pr
                    for k in range(nm):
                        dy[k] = -R[k]
                    lu_solve(LUcur, pcur, dy, nm)
                for k in range(nm):
                    y[k] += dy[k]
                norm_prev = norm
            if status != OK:
                info[0] = t1
                info[1] = i + 1
                info[2] = j + 1
                info[3] = rnorm
                info[5] = r_first
                break
            # ---- accept x_{i+1}
            i += 1
            memcpy(tr.q + i * n, qc, n * sizeof(double))
            memcpy(tr.v + i * n, vc, n * sizeof(double))
            memcpy(tr.a + i * n, y, n * sizeof(double))
            if m > 0:
                memcpy(tr.lam + i * m, y + n, m * sizeof(double))
            memcpy(gprev, res + n, n * sizeof(double))
            set_state(&x, &tr, t1, i)
            km.outputs(&x, NULL, at(Sb, i, ns))
            if store and K.n_tau > 0:
                store_tau(km, &x, &TAU[i, 0], K.n_tau)
            LUcur = lu_b + i * nm * nm if store else LUw
            pcur = piv_b + i * nm if store else pw
            pivot = factor_into(km, &x, c.kw, Kmat, LUcur, pcur, nm)
            facts += 1
            if pivot != 0:
                status = NOT_FINITE if pivot < 0 else SINGULAR
                info[0] = t1
                info[1] = i
                info[4] = pivot - 1
                break
            residual_noise(Kmat, x.q, x.v, x.a, x.lam, res, &c, n, m, fq, nu)

    counters[0] = i
    counters[1] = iters
    counters[2] = facts
    counters[3] = refreshes
    return status


# ---------------------------------------------------------------------------- tangent

cdef struct Blocks:
    # Jacobian blocks at one state: J_M, J_G, G_V (n x n) and C_q (m x n), views into one buffer
    double* JM
    double* JG
    double* GV
    double* Cq


cdef inline Blocks blocks_at(double* buf, int n) noexcept nogil:
    cdef Blocks b
    b.JM = buf
    b.JG = buf + n * n
    b.GV = buf + 2 * n * n
    b.Cq = buf + 3 * n * n
    return b


def tangent(Kernels K, double t0, double h, Py_ssize_t N, double alpha,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] L,
            double[:, :, ::1] LU, int[:, ::1] PIV, double[:, ::1] TAU, const double[:, ::1] D,
            double[:, :, ::1] dQ, double[:, :, ::1] dV, double[:, :, ::1] dA,
            double[:, :, ::1] dL, double[:, :, ::1] dS):
    """Tangent-linear (forward sensitivity) sweep of the same discrete scheme.

    D (n_p x nd) holds the parameter directions. dQ, dV, dA, dL, dS are (N+1, nd, size),
    direction-major; row 0 of dQ, dV, dA, dL must hold the initial sensitivities. Uses LU, PIV
    and TAU from forward() when given, else refactorises K and re-evaluates the time terms at
    each accepted state.
    Returns OK or SINGULAR.
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m, n_p = K.n_p, ns = K.n_s, nx = 3 * K.n + K.m
    cdef int nd = D.shape[1], d, k
    cdef bint store = LU is not None
    cdef Scheme c = scheme(h, alpha)
    cdef Py_ssize_t i
    cdef int status = OK, pivot

    blk_a = np.zeros(2 * (3 * n * n + m * n) + 1)
    cdef double[::1] blk = blk_a
    cdef Blocks B0 = blocks_at(&blk[0], n), B1 = blocks_at(&blk[3 * n * n + m * n], n), Bt
    pj0_a = np.zeros((2 * n + m) * n_p + 1)
    pj1_a = np.zeros((2 * n + m) * n_p + 1)
    oj_a = np.zeros(ns * (nx + n_p) + 1)
    Kmat_a = np.zeros(nm * nm + 1)
    LUw_a = np.zeros(nm * nm + 1)
    piv_a = np.zeros(nm + 1, dtype=np.intc)
    PD0_a = np.zeros((2 * n + m) * nd + 1)   # [P_M D, P_G D, P_C D] at state i
    PD1_a = np.zeros((2 * n + m) * nd + 1)   # ... at state i + 1
    rhs_a = np.zeros(nm + 1)
    qh_a = np.zeros(n + 1)
    vh_a = np.zeros(n + 1)
    xv_a = np.zeros(nx + 1)
    tau_a = np.zeros(K.n_tau + 1)
    cdef double[::1] tauv = tau_a
    cdef double[::1] pj0 = pj0_a, pj1 = pj1_a, oj = oj_a, Kmat = Kmat_a, LUw = LUw_a
    cdef double[::1] rhs = rhs_a, qh = qh_a, vh = vh_a, xv = xv_a
    cdef double[::1] PD0v = PD0_a, PD1v = PD1_a
    cdef double* PD0 = &PD0v[0]
    cdef double* PD1 = &PD1v[0]
    cdef double* Tmp
    cdef int[::1] pw = piv_a
    cdef double* LUcur
    cdef int* pcur
    cdef Traj tr = traj_of(Q, V, A, L, U)
    cdef symdae_args x
    x.p = &p[0]
    x.tau = &tauv[0]

    with nogil:
        set_state(&x, &tr, t0, 0)
        time_terms_at(km, &x, TAU, 0, &tauv[0])
        km.jacobians(&x, NULL, B0.JM)
        km.param_jacobians(&x, NULL, &pj0[0])
        _param_times_directions(&pj0[0], D, 2 * n + m, n_p, nd, PD0)
        _outputs_tangent(km, &x, &oj[0], D, dQ, dV, dA, dL, dS, 0, n, m, ns, n_p, nd, &xv[0])
        for i in range(N):
            # blocks at state i + 1
            set_state(&x, &tr, t0 + (i + 1) * h, i + 1)
            time_terms_at(km, &x, TAU, i + 1, &tauv[0])
            km.jacobians(&x, NULL, B1.JM)
            km.param_jacobians(&x, NULL, &pj1[0])
            _param_times_directions(&pj1[0], D, 2 * n + m, n_p, nd, PD1)
            if store:
                LUcur = &LU[i + 1, 0, 0]
                pcur = &PIV[i + 1, 0]
            else:
                LUcur = &LUw[0]
                pcur = &pw[0]
                pivot = factor_into(km, &x, c.kw, &Kmat[0], LUcur, pcur, nm)
                if pivot != 0:
                    status = SINGULAR
                    break
            for d in range(nd):
                for k in range(n):
                    qh[k] = dQ[i, d, k] + h * dV[i, d, k] + c.ca * dA[i, d, k]
                    vh[k] = dV[i, d, k] + c.cv1 * dA[i, d, k]
                memset(&rhs[0], 0, nm * sizeof(double))
                # dyn: (cM J_M + J_G)_{i+1} qh + G_V,{i+1} vh - ap (J_G,i dq_i + G_V,i dv_i
                #      + C_q,i^T dlam_i) + (cM P_M + P_G)_{i+1} D - ap P_G,i D
                gemv(B1.JM, n, n, &qh[0], &rhs[0], c.cM)
                gemv(B1.JG, n, n, &qh[0], &rhs[0], 1.0)
                gemv(B1.GV, n, n, &vh[0], &rhs[0], 1.0)
                gemv(B0.JG, n, n, &dQ[i, d, 0], &rhs[0], -c.ap)
                gemv(B0.GV, n, n, &dV[i, d, 0], &rhs[0], -c.ap)
                if m > 0:
                    gemv_t(B0.Cq, m, n, &dL[i, d, 0], &rhs[0], -c.ap)
                    gemv(B1.Cq, m, n, &qh[0], &rhs[n], 1.0 / c.s)
                for k in range(n):
                    rhs[k] += c.cM * PD1[k * nd + d] + PD1[(n + k) * nd + d] \
                        - c.ap * PD0[(n + k) * nd + d]
                for k in range(m):
                    rhs[n + k] += PD1[(2 * n + k) * nd + d] / c.s
                lu_solve(LUcur, pcur, &rhs[0], nm)
                for k in range(n):
                    dA[i + 1, d, k] = -rhs[k]
                    dQ[i + 1, d, k] = qh[k] - c.s * rhs[k]
                    dV[i + 1, d, k] = vh[k] - c.gh * rhs[k]
                for k in range(m):
                    dL[i + 1, d, k] = -rhs[n + k]
            _outputs_tangent(km, &x, &oj[0], D, dQ, dV, dA, dL, dS, i + 1, n, m, ns, n_p, nd,
                             &xv[0])
            Bt = B0
            B0 = B1
            B1 = Bt
            Tmp = PD0
            PD0 = PD1
            PD1 = Tmp
    return status


cdef void _param_times_directions(const double* P, const double[:, ::1] D, int rows, int n_p,
                                  int nd, double* out) noexcept nogil:
    """out (rows x nd) = P (rows x n_p) D (n_p x nd)."""
    cdef int r, col, d
    cdef double prc
    memset(out, 0, rows * nd * sizeof(double))
    for r in range(rows):
        for col in range(n_p):
            prc = P[r * n_p + col]
            if prc != 0.0:
                for d in range(nd):
                    out[r * nd + d] += prc * D[col, d]


cdef void _outputs_tangent(const symdae_model* km, symdae_args* x, double* oj,
                           const double[:, ::1] D, double[:, :, ::1] dQ, double[:, :, ::1] dV,
                           double[:, :, ::1] dA, double[:, :, ::1] dL, double[:, :, ::1] dS,
                           Py_ssize_t i, int n, int m, int ns, int n_p, int nd,
                           double* xv) noexcept nogil:
    """dS[i, d] = ds/dx dx_i[d] + ds/dp D[:, d]."""
    cdef int nx = 3 * n + m, d, r, col, k
    cdef double acc
    cdef const double* Sp = oj + ns * nx
    if ns == 0:
        return
    km.output_jacobians(x, NULL, oj)
    for d in range(nd):
        for k in range(n):
            xv[k] = dQ[i, d, k]
            xv[n + k] = dV[i, d, k]
            xv[2 * n + k] = dA[i, d, k]
        for k in range(m):
            xv[3 * n + k] = dL[i, d, k]
        for r in range(ns):
            acc = 0.0
            for col in range(nx):
                acc += oj[r * nx + col] * xv[col]
            for col in range(n_p):
                acc += Sp[r * n_p + col] * D[col, d]
            dS[i, d, r] = acc


# ---------------------------------------------------------------------------- adjoint

cdef inline void output_source(const symdae_model* km, const symdae_args* x,
                               const double* dphi, int ns, double* xb_and_grad) noexcept nogil:
    """[xbar, pbar] += dphi^T [ds/dx, ds/dp], skipped when dphi = 0 (output_vjp writes both
    parts contiguously, so in adjoint() the gradient accumulator follows xbar in memory)."""
    cdef int r
    for r in range(ns):
        if dphi[r] != 0.0:
            km.output_vjp(x, dphi, xb_and_grad)
            return


def adjoint(Kernels K, double t0, double h, Py_ssize_t N, double alpha,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] L,
            double[:, :, ::1] LU, int[:, ::1] PIV, double[:, ::1] TAU,
            const double[:, ::1] dPhi, double[::1] grad, double[::1] xbar0):
    """Discrete adjoint sweep (paper eqs. 9 and 11) for the scheme of forward().

    dPhi (N+1, n_s) is the derivative of the cost with respect to every output sample.
    grad (n_p) receives the step contributions to dJ/dp (it is overwritten); xbar0 (3n + m)
    receives the adjoint of x_0 = (q0, v0, a0, lam0), which the Python layer carries through
    the consistent initialisation. Returns OK or SINGULAR.

    With r the adjoint of step i -> i+1's residual (solve K_{i+1}^T mu = ybar, r = -mu):
      qhat_bar = qbar_{i+1} + (c_m J_M + J_G)_{i+1}^T r_d + C_q,{i+1}^T r_c / s
      vhat_bar = vbar_{i+1} + G_V,{i+1}^T r_d
      xbar_i  += output source - ap (J_G,i^T r_d, G_V,i^T r_d, ., C_q,i r_d)
                 + predictor adjoints (qhat_bar, h qhat_bar + vhat_bar, ca qhat_bar + cv1 vhat_bar)
    and every product with a Jacobian block is a generated sparse kernel (state_vjp,
    param_vjp, output_vjp).
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m, n_p = K.n_p, ns = K.n_s, nx = 3 * K.n + K.m
    cdef int k
    cdef bint store = LU is not None
    cdef Scheme c = scheme(h, alpha)
    cdef Py_ssize_t i
    cdef int status = OK, pivot

    # xb (3n + m) followed by gacc (n_p): output_vjp accumulates into both in one call
    work_a = np.zeros(nx + n_p + nm + n + 2 * (3 * n + m) + 2 * nm * nm + K.n_tau + 8)
    piv_a = np.zeros(nm + 1, dtype=np.intc)
    cdef double[::1] work = work_a
    cdef int[::1] pw = piv_a
    cdef double* xb = &work[0]
    cdef double* gacc = xb + nx
    cdef double* mu = gacc + n_p
    cdef double* rd_next = mu + nm       # r_d of the step after the current one
    cdef double* hat = rd_next + n       # [qhat_bar, vhat_bar, unused, scratch]: x-shaped
    cdef double* wv = hat + 3 * n + m    # weights for the vjp kernels (3n + m)
    cdef double* Kmat = wv + 3 * n + m
    cdef double* LUw = Kmat + nm * nm
    cdef double* tau = LUw + nm * nm
    cdef double* qb = xb
    cdef double* vb = xb + n
    cdef double* ab = xb + 2 * n
    cdef double* lb = xb + 3 * n
    cdef double* qh = hat
    cdef double* vh = hat + n
    cdef double* LUcur
    cdef int* pcur
    cdef const double* dphi_b = &dPhi[0, 0] if ns > 0 else NULL
    cdef Traj tr = traj_of(Q, V, A, L, U)
    cdef symdae_args x
    x.p = &p[0]
    x.tau = tau

    with nogil:
        set_state(&x, &tr, t0 + N * h, N)
        time_terms_at(km, &x, TAU, N, tau)
        output_source(km, &x, at(<double*>dphi_b, N, ns), ns, xb)
        i = N - 1
        while i >= 0:
            # ---- step i -> i+1; xb holds the complete adjoint of x_{i+1}; x is at state i+1
            for k in range(n):
                mu[k] = ab[k] + c.s * qb[k] + c.gh * vb[k]
            for k in range(m):
                mu[n + k] = lb[k]
            if store:
                LUcur = &LU[i + 1, 0, 0]
                pcur = &PIV[i + 1, 0]
            else:
                LUcur = LUw
                pcur = &pw[0]
                pivot = factor_into(km, &x, c.kw, Kmat, LUcur, pcur, nm)
                if pivot != 0:
                    status = SINGULAR
                    break
            lu_solve_t(LUcur, pcur, mu, nm)
            for k in range(nm):
                mu[k] = -mu[k]          # mu is now r = (r_d, r_c)
            # predictor adjoints: role of state i+1 as the new state of step i -> i+1
            memcpy(qh, qb, n * sizeof(double))
            memcpy(vh, vb, n * sizeof(double))
            for k in range(n):
                wv[k] = c.cM * mu[k]
                wv[n + k] = mu[k]
                wv[2 * n + m + k] = 0.0
            for k in range(m):
                wv[2 * n + k] = mu[n + k] / c.s
            km.state_vjp(&x, wv, hat)
            # parameters at state i+1: it enters step i -> i+1, and step i+1 -> i+2 via g_{i+1}
            if n_p > 0:
                for k in range(n):
                    wv[n + k] = mu[k] - c.ap * rd_next[k]
                km.param_vjp(&x, wv, gacc)
            memcpy(rd_next, mu, n * sizeof(double))
            # ---- state i: output source, its role as the old state of step i -> i+1
            set_state(&x, &tr, t0 + i * h, i)
            time_terms_at(km, &x, TAU, i, tau)
            memset(xb, 0, nx * sizeof(double))
            output_source(km, &x, at(<double*>dphi_b, i, ns), ns, xb)
            if c.ap != 0.0:
                for k in range(n):
                    wv[k] = 0.0
                    wv[n + k] = -c.ap * mu[k]
                    wv[2 * n + m + k] = -c.ap * mu[k]
                for k in range(m):
                    wv[2 * n + k] = 0.0
                km.state_vjp(&x, wv, xb)
            for k in range(n):
                qb[k] += qh[k]
                vb[k] += h * qh[k] + vh[k]
                ab[k] += c.ca * qh[k] + c.cv1 * vh[k]
            i -= 1
        if status == OK and N > 0 and n_p > 0 and c.ap != 0.0:
            # g_0 enters step 0 -> 1 through -ap g_0; x is at state 0
            memset(wv, 0, (2 * n + m) * sizeof(double))
            for k in range(n):
                wv[n + k] = -c.ap * rd_next[k]
            km.param_vjp(&x, wv, gacc)
    for k in range(nx):
        xbar0[k] = xb[k]
    for k in range(n_p):
        grad[k] = gacc[k]
    return status
