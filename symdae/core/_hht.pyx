# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled HHT core: forward, tangent-linear and adjoint sweeps over a model's kernels.

This module knows no model. It reaches a model only through the kernel table of
symdae_kernels.h (a ``symdae_model`` behind a PyCapsule). The Python layer
(symdae/simulate.py, symdae/sensitivity.py) validates every shape and type before calling in,
so the nogil loops trust their inputs.

Discrete scheme (paper eq. 15), x_i = (q_i, v_i, a_i, lam_i), s = beta h^2:

    q_{i+1} = q_i + h v_i + h^2 (1/2 - beta) a_i + s a_{i+1}
    v_{i+1} = v_i + h (1 - gamma) a_i + gamma h a_{i+1}
    R_dyn = Ma_{i+1} / (1 + alpha) + g_{i+1} - alpha / (1 + alpha) g_i = 0,  g = C_q^T lam - Q
    R_con = C(q_{i+1}, t_{i+1}) / s = 0

Newton on y = (a_{i+1}, lam_{i+1}) with the matrix K of eq. (16). K is evaluated and
factorised once per step, at the accepted state; that factorisation is (1) the iteration matrix
of the next step's Newton iterations (simplified Newton; refreshed at the current iterate when
the contraction rate exceeds 1/2) and (2), stored, exactly the matrix the tangent-linear and
adjoint sweeps need. So J and J + gradient run the identical forward path.

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

KERNEL_NAMES = ("residual", "newton", "jacobians", "param_jacobians", "param_vjp", "outputs",
                "output_jacobians", "initial_state", "initial_state_jacobian",
                "constraint_velocity", "acceleration_constraint")

cdef double FLOOR_FACTOR = 10.0
cdef double NOISE_FACTOR = 4.0


cdef class Kernels:
    """The kernel table of one compiled model (keeps its module alive)."""

    cdef const symdae_model* km
    cdef readonly object module
    cdef readonly int n, m, n_p, n_u, n_s

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
        self.n_u, self.n_s = self.km.n_u, self.km.n_s

    def output_size(self, str name):
        """Length of the flat output of kernel ``name``."""
        n, m, n_p, n_s = self.n, self.m, self.n_p, self.n_s
        sizes = {
            "residual": 2 * n + m, "newton": (n + m) ** 2, "jacobians": 3 * n * n + m * n,
            "param_jacobians": (2 * n + m) * n_p, "param_vjp": n_p, "outputs": n_s,
            "output_jacobians": n_s * (3 * n + m) + n_s * n_p, "initial_state": 2 * n,
            "initial_state_jacobian": 2 * n * n_p, "constraint_velocity": m,
            "acceleration_constraint": m + 2 * m * n + m * n_p,
        }
        try:
            return sizes[name]
        except KeyError:
            raise KeyError(f"unknown kernel {name!r}; kernels: {', '.join(KERNEL_NAMES)}") \
                from None

    def weight_size(self, str name):
        if name == "newton":
            return 3
        if name == "param_vjp":
            return 2 * self.n + self.m
        return 0

    cdef symdae_kernel _get(self, str name) except NULL:
        cdef const symdae_model* k = self.km
        table = {
            "residual": 0, "newton": 1, "jacobians": 2, "param_jacobians": 3, "param_vjp": 4,
            "outputs": 5, "output_jacobians": 6, "initial_state": 7,
            "initial_state_jacobian": 8, "constraint_velocity": 9,
            "acceleration_constraint": 10,
        }
        cdef int idx = table[name]
        cdef symdae_kernel fns[11]
        fns[:] = [k.residual, k.newton, k.jacobians, k.param_jacobians, k.param_vjp,
                  k.outputs, k.output_jacobians, k.initial_state, k.initial_state_jacobian,
                  k.constraint_velocity, k.acceleration_constraint]
        return fns[idx]

    def evaluate(self, str name, double t, q, v, a, lam, p, u, w=None):
        """Evaluate one kernel at one state; returns its flat output (structural zeros = 0).

        For ``param_vjp`` (which accumulates) the result is the product with zero start.
        """
        cdef symdae_kernel fn = self._get(name)
        size = self.output_size(name)
        arrays = []
        for label, arr, k in (("q", q, self.n), ("v", v, self.n), ("a", a, self.n),
                              ("lam", lam, self.m), ("p", p, self.n_p), ("u", u, self.n_u),
                              ("w", w if w is not None else np.zeros(0),
                               self.weight_size(name))):
            vec = np.ascontiguousarray(arr, dtype=np.float64).reshape(-1)
            if vec.shape[0] != k:
                raise ValueError(f"{name}: {label} has {vec.shape[0]} entries, expected {k}")
            arrays.append(np.concatenate([vec, [0.0]]))  # never a zero-length buffer
        cdef double[::1] bq = arrays[0], bv = arrays[1], ba = arrays[2], bl = arrays[3]
        cdef double[::1] bp = arrays[4], bu = arrays[5], bw = arrays[6]
        out = np.zeros(size + 1)
        cdef double[::1] bo = out
        cdef symdae_args x
        x.t = t
        x.q = &bq[0]
        x.v = &bv[0]
        x.a = &ba[0]
        x.lam = &bl[0]
        x.p = &bp[0]
        x.u = &bu[0]
        with nogil:
            fn(&x, &bw[0], &bo[0])
        return out[:size]


cdef inline double* row(double[:, ::1] X, Py_ssize_t i) noexcept nogil:
    # X may have zero columns (no constraints, no inputs): its row pointer is then never read.
    if X.shape[1] == 0:
        return NULL
    return &X[i, 0]


cdef inline void set_state(symdae_args* x, double t, double[:, ::1] Q, double[:, ::1] V,
                           double[:, ::1] A, double[:, ::1] L, const double[:, ::1] U,
                           Py_ssize_t i) noexcept nogil:
    x.t = t
    x.q = row(Q, i)
    x.v = row(V, i)
    x.a = row(A, i)
    x.lam = row(L, i)
    x.u = NULL if U.shape[1] == 0 else &U[i, 0]


cdef inline void residual_noise(const double* K, const double* q, const double* v,
                                const double* a, const double* lam, const double* res,
                                double cM, double ap, double s, double h, int n, int m,
                                double* nu) noexcept nogil:
    """nu_r <- round-off level of residual row r near this state (see module docstring).

    q_{i+1} = q_i + h v_i + ... + s a_{i+1} is a sum whose rounding is eps times the size of
    its terms, not of the result (q may cross zero), hence |q| + h |v| + h^2 |a|.
    """
    cdef int r, c, nm = n + m
    cdef double acc, eps = DBL_EPSILON
    for r in range(nm):
        acc = 0.0
        for c in range(n):
            acc += fabs(K[r * nm + c]) * (fabs(q[c]) + h * fabs(v[c]) + h * h * fabs(a[c]))
        acc *= eps / s
        for c in range(m):
            acc += fabs(K[r * nm + n + c]) * fabs(lam[c]) * eps
        if r < n:
            acc += eps * (fabs(cM * res[r]) + (1.0 + fabs(ap)) * fabs(res[n + r]))
        nu[r] = acc


def forward(Kernels K, double t0, double h, Py_ssize_t N, double alpha,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] L,
            double[:, ::1] S, double[:, :, ::1] LU, int[:, ::1] PIV,
            double rtol, int max_iter, Py_ssize_t[::1] counters, double[::1] info):
    """HHT forward sweep from the consistent state in row 0 of Q, V, A, L.

    Fills rows 1..N of Q, V, A, L and rows 0..N of the outputs S. If LU is not None, LU[i] and
    PIV[i] receive the factorised Newton matrix at the accepted state i (for the sensitivity
    sweeps). counters <- (steps, Newton iterations, factorisations, Jacobian refreshes).
    Returns OK, or NEWTON_FAILED / SINGULAR / NOT_FINITE with info = (time, step, iterations,
    residual max-norm, index) describing the failure.
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m, k, j, r
    cdef bint store = LU is not None
    cdef double cM = 1.0 / (1.0 + alpha), ap = alpha / (1.0 + alpha)
    cdef double beta = 0.25 * (1.0 - alpha) ** 2, gam = 0.5 - alpha
    cdef double s = beta * h * h, gh = gam * h, ca = h * h * (0.5 - beta), cv1 = h * (1.0 - gam)
    cdef double eps = DBL_EPSILON, t1, norm, norm_prev, wk, amax, lmax, rnorm
    cdef Py_ssize_t i, iters = 0, facts = 0, refreshes = 0
    cdef int status = 0, pivot
    cdef bint at_noise

    res_a = np.zeros(2 * n + m + 1)
    gprev_a = np.zeros(n + 1)
    Kmat_a = np.zeros(nm * nm + 1)
    LUw_a = np.zeros(nm * nm + 1)
    LUr_a = np.zeros(nm * nm + 1)
    piv_w = np.zeros(nm + 1, dtype=np.intc)
    piv_r = np.zeros(nm + 1, dtype=np.intc)
    R_a = np.zeros(nm + 1)
    dy_a = np.zeros(nm + 1)
    y_a = np.zeros(nm + 1)
    qc_a = np.zeros(n + 1)
    vc_a = np.zeros(n + 1)
    qh_a = np.zeros(n + 1)
    vh_a = np.zeros(n + 1)
    fl_a = np.zeros(nm + 1)
    cdef double[::1] res = res_a, gprev = gprev_a, Kmat = Kmat_a, LUw = LUw_a, LUr = LUr_a
    cdef double[::1] R = R_a, dy = dy_a, y = y_a, qc = qc_a, vc = vc_a, qh = qh_a, vh = vh_a
    cdef double[::1] fl = fl_a
    cdef int[::1] pw = piv_w, pr = piv_r
    cdef double kw[3]
    kw[0] = cM
    kw[1] = s
    kw[2] = gh
    cdef double* LUcur
    cdef int* pcur
    cdef double* LUnext
    cdef int* pnext
    cdef symdae_args x
    x.p = &p[0]

    with nogil:
        # ---- state 0: g_0, outputs, Newton matrix for the first step
        set_state(&x, t0, Q, V, A, L, U, 0)
        km.residual(&x, NULL, &res[0])
        memcpy(&gprev[0], &res[n], n * sizeof(double))
        km.outputs(&x, NULL, row(S, 0))
        km.newton(&x, kw, &Kmat[0])
        LUcur = &LU[0, 0, 0] if store else &LUw[0]
        pcur = &PIV[0, 0] if store else &pw[0]
        memcpy(LUcur, &Kmat[0], nm * nm * sizeof(double))
        pivot = lu_factor(LUcur, pcur, nm)
        facts += 1
        if pivot != 0:
            info[0] = t0
            info[1] = 0
            info[4] = pivot - 1
            status = NOT_FINITE if pivot < 0 else SINGULAR
        else:
            residual_noise(&Kmat[0], row(Q, 0), row(V, 0), row(A, 0), row(L, 0), &res[0], cM, ap, s,
                           h, n, m, &fl[0])

        i = 0
        while status == 0 and i < N:
            t1 = t0 + (i + 1) * h
            # Newton starts from (a, lam) extrapolated linearly from the last two states
            for k in range(n):
                qh[k] = Q[i, k] + h * V[i, k] + ca * A[i, k]
                vh[k] = V[i, k] + cv1 * A[i, k]
                y[k] = 2.0 * A[i, k] - A[i - 1, k] if i > 0 else A[i, k]
            for k in range(m):
                y[n + k] = 2.0 * L[i, k] - L[i - 1, k] if i > 0 else L[i, k]
            x.t = t1
            x.q = &qc[0]
            x.v = &vc[0]
            x.a = &y[0]
            x.lam = &y[n] if m > 0 else NULL
            x.u = NULL if U.shape[1] == 0 else &U[i + 1, 0]
            norm_prev = INFINITY
            status = NEWTON_FAILED
            for j in range(max_iter):
                for k in range(n):
                    qc[k] = qh[k] + s * y[k]
                    vc[k] = vh[k] + gh * y[k]
                km.residual(&x, NULL, &res[0])
                iters += 1
                rnorm = 0.0
                at_noise = True
                for k in range(n):
                    R[k] = cM * res[k] + res[n + k] - ap * gprev[k]
                for k in range(m):
                    R[n + k] = res[2 * n + k] / s
                for k in range(nm):
                    dy[k] = -R[k]
                    if fabs(R[k]) > rnorm or R[k] != R[k]:
                        rnorm = fabs(R[k])
                    if not (fabs(R[k]) <= NOISE_FACTOR * fl[k]):
                        at_noise = False
                if not isfinite(rnorm):
                    status = NOT_FINITE
                    break
                if at_noise:
                    status = OK
                    break
                lu_solve(LUcur, pcur, &dy[0], nm)
                amax = 0.0
                lmax = 0.0
                for k in range(n):
                    amax = max(amax, fabs(y[k]))
                for k in range(n, nm):
                    lmax = max(lmax, fabs(y[k]))
                norm = 0.0
                for k in range(nm):
                    if k < n:
                        wk = rtol * fabs(y[k]) + FLOOR_FACTOR * eps * (fabs(qc[k]) / s + amax)
                    else:
                        wk = rtol * fabs(y[k]) + FLOOR_FACTOR * eps * lmax
                    wk = fabs(dy[k]) / wk if wk > 0.0 else (0.0 if dy[k] == 0.0 else INFINITY)
                    if wk > norm or wk != wk:
                        norm = wk
                if norm <= 1.0:
                    status = OK
                    break
                if j > 0 and not (norm <= 0.5 * norm_prev):
                    # slow or no contraction: refresh K at the current iterate (full Newton)
                    km.newton(&x, kw, &Kmat[0])
                    memcpy(&LUr[0], &Kmat[0], nm * nm * sizeof(double))
                    pivot = lu_factor(&LUr[0], &pr[0], nm)
                    facts += 1
                    refreshes += 1
                    if pivot != 0:
                        status = NOT_FINITE if pivot < 0 else SINGULAR
                        info[4] = pivot - 1
                        break
                    LUcur = &LUr[0]
                    pcur = &pr[0]
                    for k in range(nm):
                        dy[k] = -R[k]
                    lu_solve(LUcur, pcur, &dy[0], nm)
                for k in range(nm):
                    y[k] += dy[k]
                norm_prev = norm
            if status != OK:
                info[0] = t1
                info[1] = i + 1
                info[2] = j + 1
                info[3] = rnorm
                break
            # ---- accept x_{i+1}
            i += 1
            for k in range(n):
                Q[i, k] = qc[k]
                V[i, k] = vc[k]
                A[i, k] = y[k]
            for k in range(m):
                L[i, k] = y[n + k]
            memcpy(&gprev[0], &res[n], n * sizeof(double))
            set_state(&x, t1, Q, V, A, L, U, i)
            km.outputs(&x, NULL, row(S, i))
            km.newton(&x, kw, &Kmat[0])
            LUcur = &LU[i, 0, 0] if store else &LUw[0]
            pcur = &PIV[i, 0] if store else &pw[0]
            memcpy(LUcur, &Kmat[0], nm * nm * sizeof(double))
            pivot = lu_factor(LUcur, pcur, nm)
            facts += 1
            if pivot != 0:
                status = NOT_FINITE if pivot < 0 else SINGULAR
                info[0] = t1
                info[1] = i
                info[4] = pivot - 1
                break
            residual_noise(&Kmat[0], row(Q, i), row(V, i), row(A, i), row(L, i), &res[0], cM, ap,
                           s, h, n, m, &fl[0])

    counters[0] = i
    counters[1] = iters
    counters[2] = facts
    counters[3] = refreshes
    return status


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


cdef int factor_at(const symdae_model* km, symdae_args* x, const double* kw, double* Kmat,
                   double* LUout, int* piv, int nm) noexcept nogil:
    km.newton(x, kw, Kmat)
    memcpy(LUout, Kmat, nm * nm * sizeof(double))
    return lu_factor(LUout, piv, nm)


def tangent(Kernels K, double t0, double h, Py_ssize_t N, double alpha,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] L,
            double[:, :, ::1] LU, int[:, ::1] PIV, const double[:, ::1] D,
            double[:, :, ::1] dQ, double[:, :, ::1] dV, double[:, :, ::1] dA,
            double[:, :, ::1] dL, double[:, :, ::1] dS):
    """Tangent-linear (forward sensitivity) sweep of the same discrete scheme.

    D (n_p x nd) holds the parameter directions. dQ, dV, dA, dL, dS are (N+1, nd, size),
    direction-major; row 0 of dQ, dV, dA, dL must hold the initial sensitivities. Uses LU/PIV
    from forward() when given, else refactorises K at each accepted state.
    Returns OK or SINGULAR.
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m, n_p = K.n_p, ns = K.n_s, nx = 3 * K.n + K.m
    cdef int nd = D.shape[1], d, k, c
    cdef bint store = LU is not None
    cdef double cM = 1.0 / (1.0 + alpha), ap = alpha / (1.0 + alpha)
    cdef double beta = 0.25 * (1.0 - alpha) ** 2, gam = 0.5 - alpha
    cdef double s = beta * h * h, gh = gam * h, ca = h * h * (0.5 - beta), cv1 = h * (1.0 - gam)
    cdef Py_ssize_t i
    cdef int status = 0, pivot
    cdef double kw[3]
    kw[0] = cM
    kw[1] = s
    kw[2] = gh

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
    cdef double[::1] pj0 = pj0_a, pj1 = pj1_a, oj = oj_a, Kmat = Kmat_a, LUw = LUw_a
    cdef double[::1] rhs = rhs_a, qh = qh_a, vh = vh_a, xv = xv_a
    cdef double[::1] PD0v = PD0_a, PD1v = PD1_a
    cdef double* PD0 = &PD0v[0]
    cdef double* PD1 = &PD1v[0]
    cdef double* Tmp
    cdef int[::1] pw = piv_a
    cdef double* LUcur
    cdef int* pcur
    cdef double* pjc
    cdef double* PDc
    cdef symdae_args x
    x.p = &p[0]

    with nogil:
        set_state(&x, t0, Q, V, A, L, U, 0)
        km.jacobians(&x, NULL, B0.JM)
        km.param_jacobians(&x, NULL, &pj0[0])
        _param_times_directions(&pj0[0], D, 2 * n + m, n_p, nd, PD0)
        _outputs_tangent(km, &x, &oj[0], D, dQ, dV, dA, dL, dS, 0, n, m, ns, n_p, nd, &xv[0])
        for i in range(N):
            # blocks at state i + 1
            set_state(&x, t0 + (i + 1) * h, Q, V, A, L, U, i + 1)
            km.jacobians(&x, NULL, B1.JM)
            km.param_jacobians(&x, NULL, &pj1[0])
            _param_times_directions(&pj1[0], D, 2 * n + m, n_p, nd, PD1)
            if store:
                LUcur = &LU[i + 1, 0, 0]
                pcur = &PIV[i + 1, 0]
            else:
                LUcur = &LUw[0]
                pcur = &pw[0]
                pivot = factor_at(km, &x, kw, &Kmat[0], LUcur, pcur, nm)
                if pivot != 0:
                    status = SINGULAR
                    break
            for d in range(nd):
                for k in range(n):
                    qh[k] = dQ[i, d, k] + h * dV[i, d, k] + ca * dA[i, d, k]
                    vh[k] = dV[i, d, k] + cv1 * dA[i, d, k]
                memset(&rhs[0], 0, nm * sizeof(double))
                # dyn: (cM J_M + J_G)_{i+1} qh + G_V,{i+1} vh - ap (J_G,i dq_i + G_V,i dv_i
                #      + C_q,i^T dlam_i) + (cM P_M + P_G)_{i+1} D - ap P_G,i D
                gemv(B1.JM, n, n, &qh[0], &rhs[0], cM)
                gemv(B1.JG, n, n, &qh[0], &rhs[0], 1.0)
                gemv(B1.GV, n, n, &vh[0], &rhs[0], 1.0)
                gemv(B0.JG, n, n, &dQ[i, d, 0], &rhs[0], -ap)
                gemv(B0.GV, n, n, &dV[i, d, 0], &rhs[0], -ap)
                if m > 0:
                    gemv_t(B0.Cq, m, n, &dL[i, d, 0], &rhs[0], -ap)
                    gemv(B1.Cq, m, n, &qh[0], &rhs[n], 1.0 / s)
                for k in range(n):
                    rhs[k] += cM * PD1[k * nd + d] + PD1[(n + k) * nd + d] \
                        - ap * PD0[(n + k) * nd + d]
                for k in range(m):
                    rhs[n + k] += PD1[(2 * n + k) * nd + d] / s
                lu_solve(LUcur, pcur, &rhs[0], nm)
                for k in range(n):
                    dA[i + 1, d, k] = -rhs[k]
                    dQ[i + 1, d, k] = qh[k] - s * rhs[k]
                    dV[i + 1, d, k] = vh[k] - gh * rhs[k]
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
    cdef int r, c, d
    cdef double prc
    memset(out, 0, rows * nd * sizeof(double))
    for r in range(rows):
        for c in range(n_p):
            prc = P[r * n_p + c]
            if prc != 0.0:
                for d in range(nd):
                    out[r * nd + d] += prc * D[c, d]


cdef void _outputs_tangent(const symdae_model* km, symdae_args* x, double* oj,
                           const double[:, ::1] D, double[:, :, ::1] dQ, double[:, :, ::1] dV,
                           double[:, :, ::1] dA, double[:, :, ::1] dL, double[:, :, ::1] dS,
                           Py_ssize_t i, int n, int m, int ns, int n_p, int nd,
                           double* xv) noexcept nogil:
    """dS[i, d] = ds/dx dx_i[d] + ds/dp D[:, d]."""
    cdef int nx = 3 * n + m, d, r, c, k
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
            for c in range(nx):
                acc += oj[r * nx + c] * xv[c]
            for c in range(n_p):
                acc += Sp[r * n_p + c] * D[c, d]
            dS[i, d, r] = acc


def adjoint(Kernels K, double t0, double h, Py_ssize_t N, double alpha,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] L,
            double[:, :, ::1] LU, int[:, ::1] PIV, const double[:, ::1] dPhi,
            double[::1] grad, double[::1] xbar0):
    """Discrete adjoint sweep (paper eq. 9 and 11 for the scheme of forward()).

    dPhi (N+1, n_s) is the derivative of the cost with respect to every output sample.
    grad (n_p) receives the step contributions to dJ/dp (it is overwritten); xbar0 (3n + m)
    receives the adjoint of x_0 = (q0, v0, a0, lam0), which the Python layer carries through
    the consistent initialisation. Returns OK or SINGULAR.
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m, n_p = K.n_p, ns = K.n_s, nx = 3 * K.n + K.m
    cdef int k, r
    cdef bint store = LU is not None
    cdef double cM = 1.0 / (1.0 + alpha), ap = alpha / (1.0 + alpha)
    cdef double beta = 0.25 * (1.0 - alpha) ** 2, gam = 0.5 - alpha
    cdef double s = beta * h * h, gh = gam * h, ca = h * h * (0.5 - beta), cv1 = h * (1.0 - gam)
    cdef Py_ssize_t i
    cdef int status = 0, pivot
    cdef double kw[3]
    kw[0] = cM
    kw[1] = s
    kw[2] = gh

    blk_a = np.zeros(2 * (3 * n * n + m * n) + 1)
    cdef double[::1] blk = blk_a
    cdef Blocks B0 = blocks_at(&blk[0], n), B1 = blocks_at(&blk[3 * n * n + m * n], n), Bt
    oj_a = np.zeros(ns * (nx + n_p) + 1)
    Kmat_a = np.zeros(nm * nm + 1)
    LUw_a = np.zeros(nm * nm + 1)
    piv_a = np.zeros(nm + 1, dtype=np.intc)
    xb_a = np.zeros(nx + 1)       # adjoint of the current state (q, v, a, lam)
    mu_a = np.zeros(nm + 1)
    rd_next_a = np.zeros(n + 1)   # r_d of the step after the current one
    wv_a = np.zeros(2 * n + m + 1)
    qh_a = np.zeros(n + 1)
    vh_a = np.zeros(n + 1)
    cdef double[::1] oj = oj_a, Kmat = Kmat_a, LUw = LUw_a, xb = xb_a, mu = mu_a
    cdef double[::1] rd_next = rd_next_a, wv = wv_a, qh = qh_a, vh = vh_a
    cdef int[::1] pw = piv_a
    cdef double* LUcur
    cdef int* pcur
    cdef double* qb = &xb[0]
    cdef double* vb = qb + n
    cdef double* ab = vb + n
    cdef double* lb = ab + n
    cdef symdae_args x
    x.p = &p[0]
    for k in range(n_p):
        grad[k] = 0.0

    with nogil:
        set_state(&x, t0 + N * h, Q, V, A, L, U, N)
        km.jacobians(&x, NULL, B1.JM)
        _output_source(km, &x, &oj[0], dPhi, N, ns, nx, n_p, &xb[0], &grad[0])
        i = N - 1
        while i >= 0:
            # ---- step i -> i+1; xb holds the complete adjoint of x_{i+1}; B1 = blocks(i+1)
            for k in range(n):
                mu[k] = ab[k] + s * qb[k] + gh * vb[k]
            for k in range(m):
                mu[n + k] = lb[k]
            if store:
                LUcur = &LU[i + 1, 0, 0]
                pcur = &PIV[i + 1, 0]
            else:
                LUcur = &LUw[0]
                pcur = &pw[0]
                pivot = factor_at(km, &x, kw, &Kmat[0], LUcur, pcur, nm)
                if pivot != 0:
                    status = SINGULAR
                    break
            lu_solve_t(LUcur, pcur, &mu[0], nm)
            for k in range(nm):
                mu[k] = -mu[k]          # mu is now r_bar = (r_d, r_c)
            # adjoints of the predictors qhat, vhat
            for k in range(n):
                qh[k] = qb[k]
                vh[k] = vb[k]
            gemv_t(B1.JM, n, n, &mu[0], &qh[0], cM)
            gemv_t(B1.JG, n, n, &mu[0], &qh[0], 1.0)
            gemv_t(B1.GV, n, n, &mu[0], &vh[0], 1.0)
            if m > 0:
                gemv_t(B1.Cq, m, n, &mu[n], &qh[0], 1.0 / s)
            # parameter terms of state i+1 (it enters step i->i+1 and, via g_{i+1}, step i+1)
            for k in range(n):
                wv[k] = cM * mu[k]
                wv[n + k] = mu[k] - ap * rd_next[k]
            for k in range(m):
                wv[2 * n + k] = mu[n + k] / s
            if n_p > 0:
                km.param_vjp(&x, &wv[0], &grad[0])
            for k in range(n):
                rd_next[k] = mu[k]
            # ---- state i
            set_state(&x, t0 + i * h, Q, V, A, L, U, i)
            km.jacobians(&x, NULL, B0.JM)
            memset(&xb[0], 0, nx * sizeof(double))
            _output_source(km, &x, &oj[0], dPhi, i, ns, nx, n_p, &xb[0], &grad[0])
            gemv_t(B0.JG, n, n, &mu[0], qb, -ap)
            gemv_t(B0.GV, n, n, &mu[0], vb, -ap)
            if m > 0:
                gemv(B0.Cq, m, n, &mu[0], lb, -ap)
            for k in range(n):
                qb[k] += qh[k]
                vb[k] += h * qh[k] + vh[k]
                ab[k] += ca * qh[k] + cv1 * vh[k]
            Bt = B0
            B0 = B1
            B1 = Bt
            i -= 1
        if status == 0 and N > 0 and n_p > 0:
            # g_0 enters step 0->1 through -ap g_0; x is at state 0
            memset(&wv[0], 0, (2 * n + m) * sizeof(double))
            for k in range(n):
                wv[n + k] = -ap * rd_next[k]
            km.param_vjp(&x, &wv[0], &grad[0])
    for k in range(nx):
        xbar0[k] = xb[k]
    return status


cdef void _output_source(const symdae_model* km, symdae_args* x, double* oj,
                         const double[:, ::1] dPhi, Py_ssize_t i, int ns, int nx, int n_p,
                         double* xb, double* grad) noexcept nogil:
    """xb += (ds/dx)^T dPhi_i, grad += (ds/dp)^T dPhi_i (skipped when dPhi_i = 0)."""
    cdef int r
    cdef bint any = False
    for r in range(ns):
        if dPhi[i, r] != 0.0:
            any = True
    if not any:
        return
    km.output_jacobians(x, NULL, oj)
    gemv_t(oj, ns, nx, &dPhi[i, 0], xb, 1.0)
    if n_p > 0:
        gemv_t(oj + ns * nx, ns, n_p, &dPhi[i, 0], grad, 1.0)
