# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled HHT core: forward, tangent-linear and adjoint sweeps over a model's kernels.

This module knows no model. It reaches a model only through the kernel table of
symdae_kernels.h (a ``symdae_model`` behind a PyCapsule; sizes included). The scheme and its
coefficients are documented in scheme.pxd; one step of each sweep is a function of its own
(newton.pxd, tangent.pxd, adjoint.pxd). The Python layer
(symdae/simulation/backends/compiled.py) validates every shape and type before calling in, so
the nogil loops trust their inputs. Each sweep returns
a report (a dict: status and counters) that the backend turns into named records.

The forward sweep factorises the Newton matrix K of eq. (16) once per step at Newton's start
value (newton.pxd); the tangent and adjoint sweeps need it at the accepted states. With ``LU``
given the forward sweep factorises it there too and stores it per step (and the time terms),
else the derivative sweeps refactorise from the stored states: the same numbers either way.
"""
import numpy as np

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.math cimport fabs, isfinite, NAN
from libc.string cimport memcpy, memset

from symdae.simulation.core.kernel_api cimport *
from symdae.simulation.core.sparse cimport (SparseLU, carve_sparse, apply, apply_t, pivot_tolerance,
                                            SPARSE)
from symdae.simulation.core.factors cimport prepare_lu
from symdae.simulation.core.dense cimport (SMALL_LU, lu_factor, lu_solve, lu_solve_t, gemv,
                                           gemv_t)
from symdae.simulation.core.scheme cimport (Scheme, scheme, recursion, call, zero_call,
                                            time_terms, time_terms_for, tau_reads,
                                            state_terms, TAU_FORWARD,
                                            TAU_SENSITIVITY, Arena, take,
                                            take_int, arena_allocate,
                                            arena_check)
from symdae.simulation.core.newton cimport (Status, OK, NEWTON_FAILED, SINGULAR, NOT_FINITE, NewtonWork,
                                 StepOutcome, newton_step, factor_into, far_root)
from symdae.simulation.core.tangent cimport (TangentWork, Tangents, carve_tangent_work,
                                             carve_products, written_entries, collect_products,
                                             written_products,
                                             state_blocks, load_tangents, store_tangents,
                                             tangent_step, output_tangents, NEW_STATE,
                                             OLD_STATE, OUT_STATE, NEW_PARAMS, OLD_PARAMS,
                                             OUT_PARAMS)
from symdae.simulation.core.adjoint cimport AdjointWork, adjoint_step, initial_g_adjoint
from symdae.simulation.core.interrupt cimport INTERRUPTED, INTERRUPT_EVERY, interrupted

STATUS = {"OK": OK, "NEWTON_FAILED": NEWTON_FAILED, "SINGULAR": SINGULAR,
          "NOT_FINITE": NOT_FINITE, "INTERRUPTED": INTERRUPTED}
N_KERNELS = SYMDAE_N_KERNELS
ABI_VERSION = SYMDAE_ABI_VERSION
DENSE_LU_MAX = SMALL_LU      # dense.pxd: the core's own LU up to this size, LAPACK above

cdef double _EMPTY[1]   # the base of every zero-width array (never read)

cdef enum:
    MAX_BACKOFF = 64    # forward: at most this many generic steps before the compiled ones again


cdef struct StartWork:
    double* K0       # the initialisation matrix, then its LU (N x N)
    double* res      # residual at a = 0, lam = 0 (2n + m)
    double* cdot     # C_q v + C_t (m)
    double* acc      # the acceleration_constraint kernel's blocks
    double* tau      # time terms, state terms
    double* st
    double* y        # (a0, lam0) (N)
    double* zeros    # a = 0, lam = 0 (N)
    int* piv


cdef void carve_start(Arena* a, StartWork* w, const symdae_model* km) noexcept nogil:
    cdef int N = km.n + km.m
    w.K0 = take(a, N * N)
    w.res = take(a, 2 * km.n + km.m)
    w.cdot = take(a, km.m)
    w.acc = take(a, km.kernel[SYMDAE_ACCELERATION_CONSTRAINT].out_size)
    w.tau = take(a, km.n_tau)
    w.st = take(a, km.n_st)
    w.y = take(a, N)
    w.zeros = take(a, N)
    w.piv = take_int(a, N)


cdef struct StartDerivativeWork:
    # the scratch of initial_adjoint and initial_tangent
    double* K0       # the initialisation matrix, then its LU (N x N)
    double* jac      # the kernels' outputs they read
    double* pj
    double* acc
    double* ini
    double* tau      # time terms, state terms
    double* st
    double* rb       # (r_d, r_c) (N); the tangent's right-hand side
    double* qv       # (qbar, vbar) (2n)
    double* grad     # dJ/dp (n_p)
    int* piv


cdef void carve_start_derivative(Arena* a, StartDerivativeWork* w,
                                 const symdae_model* km) noexcept nogil:
    cdef int N = km.n + km.m
    w.K0 = take(a, N * N)
    w.jac = take(a, km.kernel[SYMDAE_JACOBIANS].out_size)
    w.pj = take(a, km.kernel[SYMDAE_PARAM_JACOBIANS].out_size)
    w.acc = take(a, km.kernel[SYMDAE_ACCELERATION_CONSTRAINT].out_size)
    w.ini = take(a, km.kernel[SYMDAE_INITIAL_STATE_JACOBIAN].out_size)
    w.tau = take(a, km.n_tau)
    w.st = take(a, km.n_st)
    w.rb = take(a, N)
    w.qv = take(a, 2 * km.n)
    w.grad = take(a, km.n_p)
    w.piv = take_int(a, N)


cdef inline void initialisation_matrix(const symdae_model* km, const symdae_args* x,
                                       double* K) noexcept nogil:
    """K = [[M, C_q^T], [C_q, 0]] at x: the Newton kernel with (c_m, c_q, c_v) = (1, 0, 0)."""
    cdef double kw[3]
    kw[0] = 1.0
    kw[1] = 0.0
    kw[2] = 0.0
    call(km, SYMDAE_NEWTON, x, kw, K)


cdef int start_blocks(const symdae_model* km, symdae_args* x,
                      StartDerivativeWork* w) noexcept nogil:
    """What initial_adjoint and initial_tangent read at the initial state x: its time and
    state terms, the initialisation matrix factorised (w.K0, w.piv) and, where that
    succeeds, the blocks of the jacobians, param_jacobians, initial_state_jacobian and
    acceleration_constraint kernels. Returns lu_factor's status."""
    cdef int k, status
    for k in range(km.n_tau):
        w.tau[k] = NAN      # the time terms no kernel here reads stay NaN
    time_terms_for(km, x, w.tau, TAU_FORWARD | TAU_SENSITIVITY)
    state_terms(km, x, w.st)     # once, for every kernel at this state
    initialisation_matrix(km, x, w.K0)
    status = lu_factor(w.K0, w.piv, km.n + km.m)
    if status == 0:
        call(km, SYMDAE_JACOBIANS, x, NULL, w.jac)
        call(km, SYMDAE_PARAM_JACOBIANS, x, NULL, w.pj)
        call(km, SYMDAE_INITIAL_STATE_JACOBIAN, x, NULL, w.ini)
        if km.m > 0:
            call(km, SYMDAE_ACCELERATION_CONSTRAINT, x, NULL, w.acc)
    return status


cdef class Kernels:
    """The kernel table of one compiled model (keeps its module alive).

    ``model_lu``: the sweeps factorise the Newton matrix with the module's written-out LU
    (symdae/model/lu_plan.py) where a run's orders are its own (the default), or always with
    the core's sparse LU loops (False: the same operations, for comparisons and timings)."""

    cdef const symdae_model* km
    cdef const symdae_model* source    # the module's table; km points at a copy
    cdef symdae_model table
    cdef readonly object module
    cdef readonly int n, m, n_p, n_u, n_s, n_tau, n_st

    def __cinit__(self, module):
        cap = getattr(module, "kernels", None)
        if cap is None or not PyCapsule_IsValid(cap, b"symdae.model"):
            raise TypeError(f"{module!r} does not export a 'symdae.model' kernel capsule")
        self.source = <const symdae_model*>PyCapsule_GetPointer(cap, b"symdae.model")
        if self.source.abi_version != SYMDAE_ABI_VERSION:
            raise ImportError(f"kernel module {module!r} has ABI {self.source.abi_version}, "
                              f"the core expects {SYMDAE_ABI_VERSION}: rebuild it")
        if self.source.refresh_horizon < 1:
            raise ImportError(f"kernel module {module!r} has refresh horizon "
                              f"{self.source.refresh_horizon}, expected >= 1: rebuild it")
        self.table = self.source[0]
        self.km = &self.table
        self.module = module
        self.n, self.m, self.n_p = self.km.n, self.km.m, self.km.n_p
        self.n_u, self.n_s, self.n_tau = self.km.n_u, self.km.n_s, self.km.n_tau
        self.n_st = self.km.n_st

    @property
    def model_lu(self):
        return self.table.lu_factor != NULL

    @model_lu.setter
    def model_lu(self, bint on):
        self.table.lu_factor = self.source.lu_factor if on else NULL

    @property
    def refresh_horizon(self):
        """Newton refreshes K when it predicts more further iterations than this (newton.pxd)."""
        return self.table.refresh_horizon

    def lu_order(self):
        """The pivot order the module's LU is written for (a list of N = n + m indices of K,
        rows as columns), or None (no written-out LU, or model_lu switched off)."""
        if self.table.lu_factor == NULL:
            return None
        return [self.table.lu_order[k] for k in range(self.n + self.m)]

    def newton_lu(self, double t, const double[::1] q, const double[::1] v,
                  const double[::1] a, const double[::1] lam, const double[::1] p,
                  const double[::1] u, const double[::1] kw, double[::1] b, double[::1] bt,
                  order=None):
        """The Newton matrix at one state (weights kw = (c_m, c_q, c_v)), prepared and
        factorised as a forward sweep's first step does (``order``: 2 N row and column
        indices, as a derivative sweep is given them), and b <- K^{-1} b, bt <- K^{-T} bt
        with that factorisation. Returns (K, B, piv, orders, status, model code used): for
        checking the written-out LU against the core's loops (model_lu). Arrays of the
        model's sizes (a zero-size one as one element)."""
        cdef int N = self.n + self.m, status
        for name, arr, size in (("q", q, self.n), ("v", v, self.n), ("a", a, self.n),
                                ("lam", lam, self.m), ("p", p, self.n_p), ("u", u, self.n_u),
                                ("kw", kw, 3), ("b", b, N), ("bt", bt, N)):
            if arr.shape[0] != max(size, 1):
                raise ValueError(f"newton_lu: {name} has {arr.shape[0]} entries, the model "
                                 f"{max(size, 1)}")
        cdef Arena arena
        cdef SparseLU lu
        cdef Scheme c
        cdef symdae_args x
        K = np.zeros((N, N))
        B = np.zeros((N, N))
        piv = np.zeros(N + 1, dtype=np.intc)
        tau = np.zeros(self.n_tau + 1)
        cdef bint given = order is not None
        orders = np.array(order, dtype=np.intc) if given else np.zeros(2 * N, dtype=np.intc)
        if orders.shape != (2 * N,) or (given and not (
                np.array_equal(np.sort(orders[:N]), np.arange(N))
                and np.array_equal(np.sort(orders[N:]), np.arange(N)))):
            raise ValueError(f"newton_lu: order must be two permutations of 0..{N - 1}, got "
                             f"{list(orders)}")
        cdef double[:, ::1] Kv = K, Bv = B
        cdef int[::1] pv = piv, ov = orders
        st = np.zeros(self.n_st + 1)
        cdef double[::1] tv = tau, sv = st
        memset(&arena, 0, sizeof(Arena))
        carve_sparse(&arena, &lu, N)
        mem = arena_allocate(&arena)
        carve_sparse(&arena, &lu, N)
        arena_check(&arena, mem)
        c.kw[0], c.kw[1], c.kw[2] = kw[0], kw[1], kw[2]
        x.t, x.q, x.v, x.a, x.lam, x.p, x.u = t, &q[0], &v[0], &a[0], &lam[0], &p[0], &u[0]
        x.st = NULL
        with nogil:
            time_terms(self.km, &x, &tv[0], False)
            state_terms(self.km, &x, &sv[0])     # once, for every kernel at this state
            status = prepare_lu(self.km, &x, &c, &lu, &Kv[0, 0], &Bv[0, 0], &ov[0], given)
            if status == 0:
                status = factor_into(self.km, &x, c.kw, &lu, &Kv[0, 0], &Bv[0, 0], &pv[0])
            if status == 0:
                apply(&lu, &Bv[0, 0], &pv[0], &b[0])
                apply_t(&lu, &Bv[0, 0], &pv[0], &bt[0])
        memcpy(&ov[0], lu.pr, N * sizeof(int))
        memcpy(&ov[N], lu.pc, N * sizeof(int))
        return K, B, piv, orders, status, lu.mfactor != NULL

    def consistent_start(self, double t, const double[::1] q, const double[::1] v,
                         const double[::1] p, const double[::1] u, double tol):
        """(a0, lam0) consistent with (t, q, v) in one call, where nothing needs the general
        path (symdae/simulation/initial.py): every |C| and |C_q v + C_t| within ``tol``, no
        massless row (a zero row of M that no constraint reaches), the initialisation matrix
        [[M, C_q^T], [C_q, 0]] finite with every pivot above N eps max|K0| (dense.pxd's test,
        that of initial.py), a finite solution. Else None: the general path then decides and
        names what failed. Arrays of the model's sizes (at least one element each)."""
        cdef int n = self.n, m = self.m, N = self.n + self.m, k, j, status
        cdef bint ok = True, row_zero
        cdef StartWork sw
        cdef Arena arena
        # one block of memory for the scratch arrays (an allocation and a buffer each cost
        # more than the kernels at a state of a small model)
        memset(&arena, 0, sizeof(Arena))
        carve_start(&arena, &sw, self.km)
        mem = arena_allocate(&arena)
        carve_start(&arena, &sw, self.km)
        arena_check(&arena, mem)
        cdef double* Kv = sw.K0
        cdef double* rv = sw.res
        cdef double* cv = sw.cdot
        cdef double* av = sw.acc
        cdef double* yv = sw.y
        cdef double* zv = sw.zeros
        cdef int* pv = sw.piv
        for k in range(self.n_tau):
            sw.tau[k] = NAN     # the time terms no kernel here reads stay NaN
        cdef symdae_args x
        x.t, x.q, x.v, x.a, x.lam, x.p, x.u = t, &q[0], &v[0], zv, zv, &p[0], &u[0]
        x.st = NULL
        with nogil:
            time_terms_for(self.km, &x, sw.tau, TAU_FORWARD | TAU_SENSITIVITY)
            state_terms(self.km, &x, sw.st)     # once, for every kernel at this state
            call(self.km, SYMDAE_RESIDUAL, &x, NULL, rv)        # at a = 0, lam = 0: g, C
            for k in range(m):
                ok = ok and fabs(rv[2 * n + k]) <= tol
            if ok and m > 0:
                call(self.km, SYMDAE_CONSTRAINT_VELOCITY, &x, NULL, cv)
                for k in range(m):
                    ok = ok and fabs(cv[k]) <= tol
            if ok:
                initialisation_matrix(self.km, &x, Kv)
                for k in range(n):
                    row_zero = True
                    for j in range(N):
                        row_zero = row_zero and Kv[k * N + j] == 0.0
                    ok = ok and not row_zero
            if ok:
                if m > 0:
                    call(self.km, SYMDAE_ACCELERATION_CONSTRAINT, &x, NULL, av)
                for k in range(n):
                    yv[k] = -rv[n + k]
                for k in range(m):
                    yv[n + k] = -av[k]
                status = lu_factor(Kv, pv, N)
                ok = status == 0
            if ok:
                lu_solve(Kv, pv, yv, N)
                for k in range(N):
                    ok = ok and isfinite(yv[k])
        if not ok:
            return None
        a0 = np.empty(n)
        lam0 = np.empty(m)
        cdef double[::1] a0v = a0, l0v = lam0
        for k in range(n):
            a0v[k] = yv[k]
        for k in range(m):
            l0v[k] = yv[n + k]
        return a0, lam0

    def initial_adjoint(self, double t, const double[::1] q, const double[::1] v,
                        const double[::1] a, const double[::1] lam, const double[::1] p,
                        const double[::1] u, const double[::1] xbar,
                        const double[::1] from_model, const int[::1] blocks):
        """dJ/dp through the consistent initial state x0 = (q, v, a, lam) at t, given its
        adjoint xbar (3n + m), in one call (symdae/simulation/initial.py, init_adjoint: the
        same products, for an initial state without massless rows). ``from_model`` (2n): 1
        where q0, v0 come from the model's expressions in p, 0 where given as numbers;
        ``blocks``: the starts of the blocks it reads (the kernel spec's layout) JM, JG, GV
        (jacobians), PM, PG (param_jacobians), Rc_q, gamma_v, Rc_p (acceleration_constraint),
        q0_p, v0_p (initial_state_jacobian). None where the initialisation matrix is singular
        (the Python path then raises). Arrays of the model's sizes (at least one element)."""
        cdef int n = self.n, m = self.m, N = self.n + self.m, n_p = self.n_p, i, status = 0
        cdef StartDerivativeWork sw
        cdef Arena arena
        memset(&arena, 0, sizeof(Arena))      # one block for the scratch (consistent_start)
        carve_start_derivative(&arena, &sw, self.km)
        mem = arena_allocate(&arena)
        carve_start_derivative(&arena, &sw, self.km)
        arena_check(&arena, mem)
        cdef double* Kv = sw.K0
        cdef double* jv = sw.jac
        cdef double* pv = sw.pj
        cdef double* av = sw.acc
        cdef double* iv = sw.ini
        cdef double* rv = sw.rb
        cdef double* bv = sw.qv
        cdef double* gv = sw.grad
        cdef int* pivv = sw.piv
        cdef symdae_args x
        x.t, x.q, x.v, x.a, x.lam, x.p, x.u = t, &q[0], &v[0], &a[0], &lam[0], &p[0], &u[0]
        x.st = NULL
        with nogil:
            status = start_blocks(self.km, &x, &sw)
            if status == 0:
                # rb = -K0^{-T} (abar, lbar) = (r_d, r_c)
                for i in range(N):
                    rv[i] = xbar[2 * n + i]
                lu_solve_t(Kv, pivv, rv, N)
                for i in range(N):
                    rv[i] = -rv[i]
                # grad = (PM + PG)^T r_d + Rc_p^T r_c
                gemv_t(pv + blocks[3], n, n_p, rv, gv, 1.0)
                gemv_t(pv + blocks[4], n, n_p, rv, gv, 1.0)
                gemv_t(av + blocks[7], m, n_p, rv + n, gv, 1.0)
                # (qb, vb) += ((JM + JG)^T r_d + Rc_q^T r_c, GV^T r_d + gamma_v^T r_c)
                for i in range(2 * n):
                    bv[i] = xbar[i]
                gemv_t(jv + blocks[0], n, n, rv, bv, 1.0)
                gemv_t(jv + blocks[1], n, n, rv, bv, 1.0)
                gemv_t(av + blocks[5], m, n, rv + n, bv, 1.0)
                gemv_t(jv + blocks[2], n, n, rv, bv + n, 1.0)
                gemv_t(av + blocks[6], m, n, rv + n, bv + n, 1.0)
                # grad += Q0p^T qb + V0p^T vb over the entries that come from the model
                for i in range(2 * n):
                    bv[i] *= from_model[i]
                gemv_t(iv + blocks[8], n, n_p, bv, gv, 1.0)
                gemv_t(iv + blocks[9], n, n_p, bv + n, gv, 1.0)
        if status != 0:
            return None
        grad = np.empty(n_p)
        cdef double[::1] gr = grad
        for i in range(n_p):
            gr[i] = gv[i]
        return grad

    def initial_tangent(self, double t, const double[::1] q, const double[::1] v,
                        const double[::1] a, const double[::1] lam, const double[::1] p,
                        const double[::1] u, const double[:, ::1] DT,
                        const double[::1] from_model, const int[::1] blocks,
                        double[:, ::1] out):
        """The sensitivities of the consistent initial state x0 = (q, v, a, lam) at t along
        the parameter directions DT (nd x n_p, one per row) in one call
        (symdae/simulation/initial.py, init_tangent: the same products, one direction at a
        time, for an initial state without massless rows): row d of out (nd x (3n + m)) is
        (dq, dv, da, dlam) along DT[d]. ``from_model`` and ``blocks`` as initial_adjoint's.
        False where the initialisation matrix is singular (the Python path then raises), else
        True. Arrays of the model's sizes (at least one element)."""
        cdef int n = self.n, m = self.m, N = self.n + self.m, n_p = self.n_p, i, j, d
        cdef int nd = <int>DT.shape[0], status = 0
        cdef StartDerivativeWork sw
        cdef Arena arena
        cdef const double* dp
        cdef double* o
        cdef double s
        # the nogil loops below read these unchecked
        if (DT.shape[1] < max(n_p, 1) or out.shape[0] != nd or out.shape[1] < 3 * n + m
                or blocks.shape[0] < 10 or from_model.shape[0] < 2 * n):
            raise ValueError(f"initial_tangent: directions {DT.shape}, out {out.shape}, "
                             f"blocks {blocks.shape[0]}, from_model {from_model.shape[0]} "
                             f"for n = {n}, m = {m}, n_p = {n_p}")
        memset(&arena, 0, sizeof(Arena))      # one block for the scratch (consistent_start)
        carve_start_derivative(&arena, &sw, self.km)
        mem = arena_allocate(&arena)
        carve_start_derivative(&arena, &sw, self.km)
        arena_check(&arena, mem)
        cdef double* Kv = sw.K0
        cdef double* jv = sw.jac
        cdef double* pv = sw.pj
        cdef double* av = sw.acc
        cdef double* iv = sw.ini
        cdef double* rv = sw.rb
        cdef int* pivv = sw.piv
        cdef symdae_args x
        x.t, x.q, x.v, x.a, x.lam, x.p, x.u = t, &q[0], &v[0], &a[0], &lam[0], &p[0], &u[0]
        x.st = NULL
        with nogil:
            status = start_blocks(self.km, &x, &sw)
            if status == 0:
                for d in range(nd):
                    dp = &DT[d, 0]
                    o = &out[d, 0]
                    # (dq, dv) = (Q0p dp, V0p dp) over the entries that come from the model
                    memset(o, 0, 2 * n * sizeof(double))
                    gemv(iv + blocks[8], n, n_p, dp, o, 1.0)
                    gemv(iv + blocks[9], n, n_p, dp, o + n, 1.0)
                    for i in range(2 * n):
                        if from_model[i] == 0.0:
                            o[i] = 0.0
                    # rhs = ((J_M + J_G) dq + G_V dv + (P_M + P_G) dp,
                    #        Rc_q dq + gamma_v dv + Rc_p dp), then (da, dlam) = -K0^{-1} rhs
                    for i in range(n):
                        s = 0.0
                        for j in range(n):
                            s += (jv[blocks[0] + i * n + j] + jv[blocks[1] + i * n + j]) * o[j]
                        rv[i] = s
                    for i in range(m):
                        rv[n + i] = 0.0
                    gemv(jv + blocks[2], n, n, o + n, rv, 1.0)
                    gemv(pv + blocks[3], n, n_p, dp, rv, 1.0)
                    gemv(pv + blocks[4], n, n_p, dp, rv, 1.0)
                    gemv(av + blocks[5], m, n, o, rv + n, 1.0)
                    gemv(av + blocks[6], m, n, o + n, rv + n, 1.0)
                    gemv(av + blocks[7], m, n_p, dp, rv + n, 1.0)
                    lu_solve(Kv, pivv, rv, N)
                    for i in range(N):
                        o[2 * n + i] = -rv[i]
        return status == 0

    def tau_reads(self, int k):
        """The time terms kernel number k reads: 1 the forward ones, 2 the sensitivity ones."""
        if not 0 <= k < SYMDAE_N_KERNELS:
            raise IndexError(f"kernel index {k} outside 0..{SYMDAE_N_KERNELS - 1}")
        return self.km.kernel[k].tau

    def layout(self, int k):
        """(output size, weight size, accumulate) of kernel number k, as compiled."""
        if not 0 <= k < SYMDAE_N_KERNELS:
            raise IndexError(f"kernel index {k} outside 0..{SYMDAE_N_KERNELS - 1}")
        return (self.km.kernel[k].out_size, self.km.kernel[k].w_size,
                bool(self.km.kernel[k].accumulate))

    def evaluate(self, int k, double t, const double[::1] q, const double[::1] v,
                 const double[::1] a, const double[::1] lam, const double[::1] p,
                 const double[::1] u, const double[::1] w, int reads=3,
                 bint pass_state_terms=False):
        """Kernel number k at one state, from zero (the time terms that ``reads`` asks for
        evaluated first: 1 the forward ones, 2 the sensitivity ones, 3 all; the others are
        NaN). ``pass_state_terms``: pass the kernel the state terms (x.st), computed first, as a
        forward sweep does; else x.st is NULL. The caller passes contiguous arrays of the
        model's sizes (at least one element each)."""
        out = np.zeros(self.km.kernel[k].out_size + 1)
        tau = np.full(self.n_tau + 1, np.nan)
        st = np.full(self.n_st + 1, np.nan)
        cdef double[::1] bo = out, btau = tau, bst = st
        cdef symdae_args x
        x.t = t
        x.q = &q[0]
        x.v = &v[0]
        x.a = &a[0]
        x.lam = &lam[0]
        x.p = &p[0]
        x.u = &u[0]
        x.st = NULL
        with nogil:
            time_terms_for(self.km, &x, &btau[0], reads)
            if pass_state_terms:
                state_terms(self.km, &x, &bst[0])
            call(self.km, k, &x, &w[0], &bo[0])
        return out[:self.km.kernel[k].out_size]


# ---------------------------------------------------------------------------- shared parts

cdef inline double* base(double[:, ::1] X) noexcept nogil:
    return &X[0, 0] if X.shape[0] > 0 and X.shape[1] > 0 else _EMPTY


cdef inline const double* cbase(const double[:, ::1] X) noexcept nogil:
    return &X[0, 0] if X.shape[0] > 0 and X.shape[1] > 0 else _EMPTY


cdef struct Traj:
    # raw views of a trajectory: row i of q starts at q + i * n and holds step offset + i of
    # the grid t0 + k h (a segment of a longer run has offset > 0: its times are computed
    # from the global step index, so that they are the same numbers as in one long run)
    double* q
    double* v
    double* a
    double* w       # algorithmic accelerations (scheme.pxd); hht-paper may pass a itself
    double* lam
    const double* u
    int n, m, n_u
    double t0, h
    Py_ssize_t offset


cdef inline double time_of(const Traj* tr, Py_ssize_t i) noexcept nogil:
    return tr.t0 + (tr.offset + i) * tr.h


cdef inline Traj traj_of(double t0, double h, double[:, ::1] Q, double[:, ::1] V,
                         double[:, ::1] A, double[:, ::1] W, double[:, ::1] L,
                         const double[:, ::1] U, Py_ssize_t offset) noexcept nogil:
    cdef Traj tr
    tr.offset = offset
    tr.q = base(Q)
    tr.v = base(V)
    tr.a = base(A)
    tr.w = base(W)
    tr.lam = base(L)
    tr.u = cbase(U)
    tr.n = <int>Q.shape[1]
    tr.m = <int>L.shape[1]
    tr.n_u = <int>U.shape[1]
    tr.t0 = t0
    tr.h = h
    return tr


cdef inline void set_state(symdae_args* x, const Traj* tr, Py_ssize_t i) noexcept nogil:
    """Point x at state i of the trajectory (x.tau is left alone)."""
    x.t = time_of(tr, i)
    x.q = tr.q + i * tr.n
    x.v = tr.v + i * tr.n
    x.a = tr.a + i * tr.n
    x.lam = tr.lam + i * tr.m
    x.u = tr.u + i * tr.n_u


cdef struct Factors:
    # the factorised Newton matrices, time terms and state terms of every state (stored), or
    # work space to recompute them state by state; the sparse LU's orders and structure
    # (sparse.pxd)
    double* LU       # (N+1) x nm x nm, or NULL
    int* piv         # (N+1) x (nm + 1)
    double* TAU      # (N+1) x n_tau, or NULL
    double* ST       # (N+1) x n_st: the state terms of every state, or NULL
    double* K        # work: Newton matrix, its factorisation and pivots
    double* LUw
    int* pw
    int nm, n_tau, n_st
    SparseLU lu


cdef inline Factors factors_of(double[:, :, ::1] LU, int[:, ::1] PIV, double[:, ::1] TAU,
                               double[:, ::1] ST, int nm, int n_tau, int n_st) noexcept nogil:
    cdef Factors f
    f.LU = &LU[0, 0, 0] if LU is not None and nm > 0 else NULL
    f.piv = &PIV[0, 0] if LU is not None and nm > 0 else NULL
    f.TAU = &TAU[0, 0] if TAU is not None and n_tau > 0 else NULL
    f.ST = &ST[0, 0] if ST is not None and n_st > 0 else NULL
    f.nm = nm
    f.n_tau = n_tau
    f.n_st = n_st
    return f


cdef void carve_factors(Arena* a, Factors* f) noexcept nogil:
    cdef int N = f.nm
    f.K = take(a, N * N)
    f.LUw = take(a, N * N)
    f.pw = take_int(a, N + 1)
    carve_sparse(a, &f.lu, N)


cdef inline int factors_at(const symdae_model* km, const symdae_args* x, const Scheme* c,
                           Factors* f, Py_ssize_t i, double** LU, int** piv) noexcept nogil:
    """The factorisation of K at state i (x): the stored one, or computed into f's work space.
    Returns 0 or the vanished pivot + 1."""
    if f.LU != NULL:
        LU[0] = f.LU + i * f.nm * f.nm
        piv[0] = f.piv + i * (f.nm + 1)
        return 0
    LU[0] = f.LUw
    piv[0] = f.pw
    return factor_into(km, x, c.kw, &f.lu, f.K, f.LUw, f.pw)


cdef inline void tau_at(const symdae_model* km, symdae_args* x, const Factors* f, Py_ssize_t i,
                        double* buf, int reads) noexcept nogil:
    """The time terms at state i (x): the stored row (all of them), or those ``reads`` asks
    for (scheme.pxd) evaluated into buf."""
    if f.TAU != NULL:
        x.tau = f.TAU + i * f.n_tau
    else:
        time_terms_for(km, x, buf, reads)


cdef inline void st_at(const symdae_model* km, symdae_args* x, const Factors* f, Py_ssize_t i,
                       double* buf) noexcept nogil:
    """The state terms at state i (x, its time terms set): the stored row, which the forward
    sweep computed at the very same state (the Newton iterate it accepted), or evaluated into
    buf (scheme.pxd's state_terms)."""
    if f.ST != NULL:
        x.st = f.ST + i * f.n_st
    else:
        state_terms(km, x, buf)


cdef struct ForwardReport:
    int status
    Py_ssize_t steps
    Py_ssize_t newton_iterations
    Py_ssize_t factorizations
    Py_ssize_t jacobian_refreshes
    Py_ssize_t restarts     # second (and third) solves of a step (the forward loop)
    Py_ssize_t compiled_steps   # steps taken by the kernel module's forward_steps
    double time             # of the failure
    Py_ssize_t step         # index of the state that could not be computed
    int iterations          # Newton iterations of the failed step
    double residual_norm    # residual max-norm at its last iterate
    double first_residual_norm
    double noise_ratio      # residual over its round-off level at the last iterate
    int pivot               # vanished pivot (singular matrix), or -1


# ---------------------------------------------------------------------------- forward

cdef void carve_newton(Arena* a, NewtonWork* w, int n, int m, int n_tau,
                       int n_st) noexcept nogil:
    cdef int nm = n + m
    w.res = take(a, 2 * n + m)
    w.mag = take(a, 2 * n + m)
    w.qsb = take(a, n)
    w.vsb = take(a, n)
    w.sz = take(a, 2 * n + 1)
    w.gprev = take(a, n)
    w.qc = take(a, n)
    w.vc = take(a, n)
    w.qh = take(a, n)
    w.vh = take(a, n)
    w.R = take(a, nm)
    w.dy = take(a, nm)
    w.y = take(a, nm)
    w.y0 = take(a, nm)
    w.nu = take(a, nm)
    w.fq = take(a, nm)
    w.K = take(a, nm * nm)
    w.LUr = take(a, nm * nm)
    w.pr = take_int(a, nm)
    w.tau = take(a, n_tau)
    w.st = take(a, n_st)
    w.ys = take(a, 4 * nm)


cdef int settle(const symdae_model* km, symdae_args* x, const Scheme* c, NewtonWork* w,
                const Traj* tr, Factors* f, Py_ssize_t i, double* S, bint fresh) noexcept nogil:
    """State i is in the trajectory: its outputs, g_i for the next step and, where the sweep
    stores them for the derivative sweeps, its time terms, state terms and the factorisation
    of K there.
    ``fresh``: the time terms and residual at state i are not in w yet (state 0). x.st holds
    state i's state terms: for state 0 the caller's, else those of the Newton iterate it was
    accepted at (newton.pxd, residual_at). Returns 0 or factor_into's pivot code."""
    cdef int n = km.n, nm = km.n + km.m
    set_state(x, tr, i)
    if fresh:
        time_terms(km, x, w.tau, w.all_terms)
        call(km, SYMDAE_RESIDUAL, x, NULL, w.res)
    x.tau = w.tau
    memcpy(w.gprev, w.res + n, n * sizeof(double))
    call(km, SYMDAE_OUTPUTS, x, NULL, S + i * km.n_s)
    if f.TAU != NULL:       # w.all_terms: the step evaluated all of them
        memcpy(f.TAU + i * f.n_tau, w.tau, f.n_tau * sizeof(double))
    if f.ST != NULL:
        memcpy(f.ST + i * f.n_st, x.st, f.n_st * sizeof(double))
    if f.LU == NULL:
        return 0
    return factor_into(km, x, c.kw, &f.lu, f.K, f.LU + i * nm * nm, f.piv + i * (nm + 1))


cdef inline symdae_run run_of(const Scheme* c, const Traj* tr, const double* p) noexcept nogil:
    """The run of the kernel module's compiled steps (symdae_kernels.h): time grid, scheme,
    parameters and trajectory."""
    cdef symdae_run g
    g.t0 = tr.t0
    g.h = tr.h
    g.offset = tr.offset
    g.cM = c.cM
    g.ap = c.ap
    g.s = c.s
    g.gh = c.gh
    g.ca = c.ca
    g.cv1 = c.cv1
    g.cq = c.cq
    g.cvq = c.cvq
    g.ry = c.ry
    g.rp = c.rp
    memcpy(g.kw, c.kw, 3 * sizeof(double))
    g.p = p
    g.u = tr.u
    g.q = tr.q
    g.v = tr.v
    g.a = tr.a
    g.w = tr.w
    g.lam = tr.lam
    return g


cdef void compiled_steps(symdae_steps* fs, const Scheme* c, const Traj* tr, const Factors* f,
                         NewtonWork* w, const symdae_model* km, const double* p, double* S,
                         double rtol, int max_iter) noexcept nogil:
    """The record of the kernel module's forward_steps (symdae_kernels.h): the scheme, the
    trajectory, what the sweep stores of each state (f), and the round-off levels and g_i
    that the generic step reads and leaves in w."""
    fs.run = run_of(c, tr, p)
    fs.rtol = rtol
    fs.pivot_tol = pivot_tolerance()
    fs.max_iter = max_iter
    fs.refresh_horizon = km.refresh_horizon
    fs.s_out = S
    fs.noise_row = f.lu.nrow
    fs.noise_idx = f.lu.nidx
    fs.noise_nn = f.lu.nn
    fs.nu = w.nu
    fs.fq = w.fq
    fs.gprev = w.gprev
    fs.K = w.K          # the generic step's own scratch: it evaluates them anew
    fs.LU = w.LUr
    fs.Ks = f.K
    fs.lu_out = f.LU
    fs.piv_out = f.piv
    fs.piv_sparse = SPARSE
    fs.tau_out = f.TAU
    fs.st_out = f.ST
    fs.tau_in = NULL


def forward(Kernels K, double t0, double h, Py_ssize_t N, double alpha, int kind,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] W,
            double[:, ::1] L, double[:, ::1] S, double[:, :, ::1] LU, int[:, ::1] PIV, double[:, ::1] TAU,
            double[:, ::1] ST, double rtol, int max_iter, Py_ssize_t first, Py_ssize_t i0, double[::1] carry,
            int[::1] order, bint have_order, bint compiled=True, const double[:, ::1] TAU_in=None):
    """Forward sweep of N steps of scheme ``kind`` (scheme.pxd) from the consistent state in
    row ``first`` of Q, V, A, W, L, which is step i0 of the grid t0 + k h (W: the algorithmic
    accelerations; for hht-paper it may be A itself).

    Fills rows first+1..first+N of Q, V, A, W, L and first..first+N of the outputs S (all arrays
    are indexed by row, U too). Rows before ``first`` hold the previous states' a and lam for
    the start values (a restart from a checkpoint passes first = min(i0, 2)). ``carry``
    (2 nm + 1): the round-off levels the last step left (and a flag that they are there); read
    at the start, written at the end, so that a run in segments takes the very steps of one
    long run. ``order`` (2 nm): the sparse LU's row and column orders (sparse.pxd), read when
    ``have_order`` (a continued run), else analysed from the first Newton matrix; written at
    the end for the derivative sweeps and the next segment. With LU (rows, nm, nm), PIV (rows,
    nm + 1) and TAU (rows, n_tau) given, stores the factorised Newton matrix and all time terms
    of every accepted state for the sensitivity sweeps; with ST (rows, n_st), its state terms.
    The steps go to the kernel module's compiled ones where it has them (compiled_steps.h:
    the same numbers; ``compiled`` False keeps every step in the core's generic one).
    ``TAU_in`` (rows, n_tau): all time terms of every row, as time_term_table computes them,
    which the compiled steps then read instead of evaluating them (the generic step evaluates
    its own: the same numbers); not with TAU, which would be a copy of it.
    Returns a ForwardReport (dict).
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m, pivot
    cdef Scheme c = scheme(h, alpha, kind)
    cdef Arena arena
    cdef NewtonWork w
    cdef StepOutcome so
    cdef ForwardReport rep
    cdef Traj tr = traj_of(t0, h, Q, V, A, W, L, U, i0 - first)
    cdef Factors f = factors_of(LU, PIV, TAU, ST, nm, K.n_tau, K.n_st)
    cdef double* Sb = base(S)
    cdef Py_ssize_t i = first, i1, i2, last = first + N
    cdef int extrapolation, attempt
    cdef bint found
    cdef bint have_noise = carry[2 * nm] != 0.0
    cdef symdae_args x
    cdef symdae_steps fs
    cdef Py_ssize_t reached, limit, resume = first, backoff = 1
    if TAU_in is not None and (TAU is not None or TAU_in.shape[0] != Q.shape[0]
                               or TAU_in.shape[1] != K.n_tau or K.n_tau == 0):
        raise ValueError(f"TAU_in must be ({Q.shape[0]}, {K.n_tau}) with n_tau > 0 and TAU None,"
                         f" got ({TAU_in.shape[0]}, {TAU_in.shape[1]})")
    memset(&arena, 0, sizeof(Arena))
    memset(&rep, 0, sizeof(ForwardReport))
    carve_newton(&arena, &w, n, m, K.n_tau, K.n_st)
    carve_factors(&arena, &f)
    mem = arena_allocate(&arena)
    carve_newton(&arena, &w, n, m, K.n_tau, K.n_st)
    carve_factors(&arena, &f)
    arena_check(&arena, mem)
    w.all_terms = f.TAU != NULL
    x.p = &p[0]
    x.st = NULL         # from state 0 on, the state terms of x's state
    rep.pivot = -1
    memcpy(w.nu, &carry[0], nm * sizeof(double))
    memcpy(w.fq, &carry[nm], nm * sizeof(double))
    with nogil:
        set_state(&x, &tr, i)
        time_terms(km, &x, w.tau, False)
        state_terms(km, &x, w.st)       # state 0's, for prepare_lu and settle
        pivot = prepare_lu(km, &x, &c, &f.lu, f.K, f.LUw, &order[0], have_order)
        if pivot == 0:
            pivot = settle(km, &x, &c, &w, &tr, &f, i, Sb, True)
        rep.factorizations = f.LU != NULL
        if pivot != 0:
            rep.status = NOT_FINITE if pivot < 0 else SINGULAR
            rep.pivot = pivot - 1
            rep.step = tr.offset + i
        # the module's compiled steps where the LU in use is the module's written one
        # (compiled_steps.h)
        compiled = (compiled and km.forward_steps != NULL and f.lu.mfactor != NULL
                    and f.lu.mfactor == km.lu_factor)
        if compiled:
            compiled_steps(&fs, &c, &tr, &f, &w, km, x.p, Sb, rtol, max_iter)
            if TAU_in is not None:
                fs.tau_in = &TAU_in[0, 0]
        while rep.status == OK and i < last:
            if (i - first) % INTERRUPT_EVERY == 0 and interrupted():
                rep.status = INTERRUPTED
                rep.step = tr.offset + i
                break
            if compiled and have_noise and i >= resume:
                # up to the next interrupt check
                limit = min(last, i + INTERRUPT_EVERY - (i - first) % INTERRUPT_EVERY)
                fs.iterations = 0
                fs.factorizations = 0
                reached = km.forward_steps(&fs, i, limit)
                rep.newton_iterations += fs.iterations
                rep.factorizations += fs.factorizations
                rep.compiled_steps += reached - i
                if reached == limit:
                    i = reached
                    continue
                # it stopped before a step off its path, which the generic step below takes;
                # where it stops at once again and again (a model whose steps keep refreshing
                # K), the generic step takes more of them before it is tried again
                backoff = 1 if reached > i else min(2 * backoff, MAX_BACKOFF)
                resume = reached + backoff
                i = reached
            i1 = i - 1 if i > 0 else 0        # a, lam extrapolated from states i, i-1, i-2
            i2 = i - 2 if i > 1 else 0
            extrapolation = min(tr.offset + i, 2)
            attempt = 0
            while True:
                rep.status = newton_step(
                    km, &x, &c, &w, &f.lu, tr.q + i * n, tr.v + i * n, tr.w + i * n,
                    tr.a + i * n, tr.lam + i * m, tr.a + i1 * n, tr.lam + i1 * m,
                    tr.a + i2 * n, tr.lam + i2 * m, extrapolation, time_of(&tr, i + 1),
                    tr.u + (i + 1) * tr.n_u, rtol, max_iter, have_noise, &so)
                rep.newton_iterations += so.iterations
                rep.factorizations += so.factorizations
                rep.jacobian_refreshes += so.refreshes
                if attempt == 0 and extrapolation > 0 and (rep.status != OK or (
                        so.iterations > 2 and far_root(&w, tr.a + i * n, n))):
                    # Where a changes fast (a whipping chain of links at a large h) the
                    # extrapolation can overshoot so far that Newton from there, with K
                    # there, fails or finds a root of the step's equations far from the
                    # trajectory: the step once more from state i's (a, lam), K close to
                    # state i (at a jump, a switch or an impact, the same root again). A
                    # step accepted after one correction (two residuals, most steps) is not
                    # checked: one Newton update lands within the tolerance of a root only
                    # where the equations are nearly linear between start and root, and
                    # then that root is the near one.
                    found = rep.status == OK
                    extrapolation = 0
                elif attempt == 1 and rep.status != OK and found:
                    # Newton failed from state i where the extrapolation found a root: that
                    # one, once more
                    extrapolation = min(tr.offset + i, 2)
                else:
                    break
                attempt += 1
                have_noise = False
                rep.restarts += 1
            have_noise = not so.on_switch   # a switch's round-off level holds only on it
            if rep.status != OK:
                rep.iterations = so.iterations
                rep.residual_norm = so.last_norm
                rep.first_residual_norm = so.first_norm
                rep.noise_ratio = so.noise_ratio
                rep.pivot = so.pivot
                rep.step = tr.offset + i + 1
                break
            i += 1
            memcpy(tr.q + i * n, w.qc, n * sizeof(double))
            memcpy(tr.v + i * n, w.vc, n * sizeof(double))
            memcpy(tr.a + i * n, w.y, n * sizeof(double))
            memcpy(tr.lam + i * m, w.y + n, m * sizeof(double))
            recursion(&c, tr.a + i * n, tr.a + (i - 1) * n, tr.w + i * n, n)
            pivot = settle(km, &x, &c, &w, &tr, &f, i, Sb, False)
            rep.factorizations += f.LU != NULL
            if pivot != 0:
                rep.status = NOT_FINITE if pivot < 0 else SINGULAR
                rep.pivot = pivot - 1
                rep.step = tr.offset + i
    rep.steps = i - first
    if rep.status != OK:
        rep.time = t0 + rep.step * h
    memcpy(&carry[0], w.nu, nm * sizeof(double))
    memcpy(&carry[nm], w.fq, nm * sizeof(double))
    carry[2 * nm] = 1.0 if have_noise else 0.0
    memcpy(&order[0], f.lu.pr, nm * sizeof(int))
    memcpy(&order[nm], f.lu.pc, nm * sizeof(int))
    return rep


def time_term_table(Kernels K, double t0, double h, const double[::1] p,
                    const double[:, ::1] U, double[:, ::1] TAU):
    """All time terms (SYMDAE_TIME_TERMS_SENSITIVITY) of the grid t0 + k h at k = r into row r
    of TAU, for every row of TAU, with the inputs of row r of U: each row is the time
    terms a sweep over these rows evaluates at that state, bit for bit (the same kernel at the
    same t, p and u). The forward sweep reads such a table (TAU_in) and the derivative sweeps
    read it as the forward sweep's stored time terms."""
    cdef const symdae_model* km = K.km
    cdef symdae_args x
    cdef Traj tr
    cdef Py_ssize_t r, rows = TAU.shape[0]
    if TAU.shape[1] != K.n_tau or K.n_tau == 0 or U.shape[0] != rows or U.shape[1] != K.n_u \
            or p.shape[0] != max(K.n_p, 1):
        raise ValueError(f"time_term_table: TAU ({TAU.shape[0]}, {TAU.shape[1]}), U "
                         f"({U.shape[0]}, {U.shape[1]}) and p ({p.shape[0]}) do not fit n_tau "
                         f"{K.n_tau}, n_u {K.n_u}, n_p {K.n_p}")
    memset(&x, 0, sizeof(symdae_args))
    memset(&tr, 0, sizeof(Traj))
    tr.t0 = t0
    tr.h = h
    x.p = &p[0]
    with nogil:
        for r in range(rows):
            x.t = time_of(&tr, r)
            x.u = &U[r, 0] if K.n_u > 0 else &_EMPTY[0]
            call(km, SYMDAE_TIME_TERMS_SENSITIVITY, &x, NULL, &TAU[r, 0])


# ---------------------------------------------------------------------------- tangent

cdef inline Tangents tangents_at(double[:, :, ::1] dQ, double[:, :, ::1] dV, double[:, :, ::1] dA,
                                 double[:, :, ::1] dW, double[:, :, ::1] dL,
                                 Py_ssize_t i) noexcept nogil:
    cdef Tangents t
    t.q = &dQ[i, 0, 0]
    t.v = &dV[i, 0, 0]
    t.a = &dA[i, 0, 0]
    t.lam = &dL[i, 0, 0]
    t.w = &dW[i, 0, 0]
    t.sn = <int>dQ.shape[2]
    t.sm = <int>dL.shape[2]
    return t


cdef void tangent_record(symdae_tangent_steps* ts, const Scheme* c, const Traj* tr,
                         Factors* f, TangentWork* w, const double* p, int nd, int reads,
                         double[:, :, ::1] dS, double[:, :, ::1] dQ, double[:, :, ::1] dV,
                         double[:, :, ::1] dA, double[:, :, ::1] dW, double[:, :, ::1] dL,
                         Py_ssize_t N) noexcept nogil:
    """The record of the kernel module's tangent_steps (symdae_kernels.h): the scheme, the
    trajectory and what the forward sweep stored of it, the sweep's work buffers and product
    lists (w) and its output arrays; w's T, J and P pairs themselves, which the steps swap as
    the generic step does."""
    cdef int k
    cdef int lists[3]
    cdef int states[3]
    lists[:] = [NEW_PARAMS, OLD_PARAMS, OUT_PARAMS]
    states[:] = [NEW_STATE, OLD_STATE, OUT_STATE]
    ts.run = run_of(c, tr, p)
    ts.nd = nd
    ts.tau_in = f.TAU
    ts.st_in = f.ST
    ts.tau_reads = reads
    ts.lu = f.LU
    ts.piv = f.piv
    ts.piv_sparse = SPARSE
    ts.pivot_tol = pivot_tolerance()
    ts.K = f.K
    ts.LUw = f.LUw
    ts.T = w.T
    ts.J = w.J
    ts.P = w.P
    ts.S = w.S
    ts.xnew = w.xnew
    ts.rhs = w.rhs
    ts.D = w.D
    ts.coef = w.coef
    for k in range(3):
        ts.state_product[k] = w.written[states[k]]
        ts.prow[k] = w.prod[lists[k]].row
        ts.pcol[k] = w.prod[lists[k]].col
        ts.pat[k] = w.prod[lists[k]].at
        ts.pcoef[k] = w.prod[lists[k]].coef
        ts.pnnz[k] = w.prod[lists[k]].nnz
    ts.ds = &dS[0, 0, 0]
    ts.ds_stride = dS.shape[1] * dS.shape[2]
    ts.rows = dQ.shape[0]
    ts.N = N
    ts.dq = &dQ[0, 0, 0]
    ts.dv = &dV[0, 0, 0]
    ts.da = &dA[0, 0, 0]
    ts.dw = &dW[0, 0, 0]
    ts.dl = &dL[0, 0, 0]
    ts.sn = <int>dQ.shape[2]
    ts.sm = <int>dL.shape[2]


def tangent(Kernels K, double t0, double h, Py_ssize_t N, double alpha, int kind,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] W,
            double[:, ::1] L, double[:, :, ::1] LU, int[:, ::1] PIV, double[:, ::1] TAU,
            double[:, ::1] ST, const double[:, ::1] DT, double[:, :, ::1] dQ, double[:, :, ::1] dV,
            double[:, :, ::1] dA, double[:, :, ::1] dW, double[:, :, ::1] dL,
            double[:, :, ::1] dS, Py_ssize_t i0, const int[::1] order, bint compiled=True):
    """Tangent-linear (forward sensitivity) sweep of the forward scheme, over the N steps
    from row 0 (step i0 of the grid t0 + k h), all directions at once (tangent.pxd).

    DT (nd, n_p): the parameter directions, one per row. dS is (N+1, n_s, nd) (by output, the
    layout the products write); dQ, dV, dA, dW, dL are (rows, nd, size) with rows = N+1, or 2
    to keep only the last two states (state i in row i % rows: the output sensitivities
    without the states'); row 0 of dQ, dV, dA, dW, dL must hold the sensitivities at row 0
    (for hht-paper dW may be dA itself). Uses LU, PIV, TAU and ST from forward() when given,
    else refactorises at each state, with the sparse LU orders ``order`` of that forward run.
    ``compiled``: the kernel module's compiled steps (compiled_steps.h) and written-out
    products where it has them (False: the core's generic step and lists only, the same
    numbers). Returns {"status", "step", "compiled_steps": the steps taken by the module's
    compiled steps} (INTERRUPTED on Ctrl-C, interrupt.pxd; SINGULAR with the step whose
    matrix was singular).
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m
    cdef int nd = <int>DT.shape[0], ldp = <int>DT.shape[1], pivot = 0
    cdef bint written = False
    cdef Scheme c = scheme(h, alpha, kind)
    cdef Arena arena, parena
    cdef TangentWork w
    cdef Tangents d0, d1
    cdef double* tau
    cdef double* st
    cdef double* tmp
    cdef Traj tr = traj_of(t0, h, Q, V, A, W, L, U, i0)
    cdef Factors f = factors_of(LU, PIV, TAU, ST, nm, K.n_tau, K.n_st)
    cdef double* LUcur
    cdef int* pcur
    cdef const double* dt = cbase(DT)
    cdef Py_ssize_t i = 0, rows = dQ.shape[0]
    cdef symdae_args x
    cdef int used[4]
    cdef bint steps = False
    cdef symdae_tangent_steps ts
    cdef Py_ssize_t limit, reached, taken = 0
    used[:] = [SYMDAE_NEWTON, SYMDAE_JACOBIANS, SYMDAE_PARAM_JACOBIANS, SYMDAE_OUTPUT_JACOBIANS]
    cdef int reads = tau_reads(km, used, 4)
    if rows != N + 1 and rows < 2:
        raise ValueError(f"the tangent arrays have {rows} rows: N + 1 = {N + 1} or at least 2")
    memset(&arena, 0, sizeof(Arena))
    memset(&parena, 0, sizeof(Arena))
    memset(&w, 0, sizeof(TangentWork))
    carve_tangent_work(&arena, &w, n, m, K.n_p, K.n_s, nd)
    tau = take(&arena, K.n_tau)
    st = take(&arena, K.n_st)
    carve_factors(&arena, &f)
    mem = arena_allocate(&arena)
    carve_tangent_work(&arena, &w, n, m, K.n_p, K.n_s, nd)
    tau = take(&arena, K.n_tau)
    st = take(&arena, K.n_st)
    carve_factors(&arena, &f)
    arena_check(&arena, mem)
    x.p = &p[0]
    x.st = NULL
    with nogil:
        set_state(&x, &tr, 0)
        tau_at(km, &x, &f, 0, tau, reads)
        st_at(km, &x, &f, 0, st)     # once per state, for all the kernels there
        prepare_lu(km, &x, &c, &f.lu, f.K, f.LUw, &order[0], True)
        written_entries(km, &x, &w)          # the blocks at state 0 and their structure
        collect_products(km, &c, &w, dt, ldp, nd)         # counting pass
    carve_products(&parena, &w)
    pmem = arena_allocate(&parena)
    carve_products(&parena, &w)
    arena_check(&parena, pmem)
    with nogil:
        collect_products(km, &c, &w, dt, ldp, nd)
        written = written_products(km, &c, &w, nd, compiled)
        d0 = tangents_at(dQ, dV, dA, dW, dL, 0)
        load_tangents(km, &d0, w.T[0], nd)
        output_tangents(km, &w, w.T[0], nd, &dS[0, 0, 0])
        # the module's compiled steps (compiled_steps.h) where it has them for these
        # directions and the LU in use is its written one
        steps = (written and km.tangent_steps != NULL
                 and f.lu.msolve_rows != NULL and f.lu.msolve_rows == km.lu_solve_rows
                 and (f.LU != NULL or f.lu.mfactor == km.lu_factor))
        if steps:
            tangent_record(&ts, &c, &tr, &f, &w, &p[0], nd, reads, dS, dQ, dV, dA, dW, dL, N)
        while i < N:
            if i % INTERRUPT_EVERY == 0 and interrupted():
                pivot = -1
                break
            if steps:
                # up to the next interrupt check; it stops before a step whose factorisation
                # is not the written LU's, which the generic step below takes
                limit = min(N, i + INTERRUPT_EVERY - i % INTERRUPT_EVERY)
                reached = km.tangent_steps(&ts, i, limit)
                taken += reached - i
                i = reached
                if i == limit:
                    continue
            set_state(&x, &tr, i + 1)
            tau_at(km, &x, &f, i + 1, tau, reads)
            st_at(km, &x, &f, i + 1, st)
            pivot = factors_at(km, &x, &c, &f, i + 1, &LUcur, &pcur)
            if pivot != 0:
                break
            state_blocks(km, &x, w.J[1], w.P[1], w.S)
            tangent_step(km, &c, &w, &f.lu, LUcur, pcur, nd)
            if rows > N or i + 1 == N:      # with two rows only the last state is returned
                d1 = tangents_at(dQ, dV, dA, dW, dL, (i + 1) % rows)
                store_tangents(km, w.T[1], &d1, nd)
            output_tangents(km, &w, w.T[1], nd, &dS[i + 1, 0, 0])
            tmp = w.T[0]
            w.T[0] = w.T[1]
            w.T[1] = tmp
            tmp = w.J[0]
            w.J[0] = w.J[1]
            w.J[1] = tmp
            tmp = w.P[0]
            w.P[0] = w.P[1]
            w.P[1] = tmp
            i += 1
    if pivot < 0:
        return {"status": INTERRUPTED, "step": i0 + i, "compiled_steps": taken}
    return {"status": OK if pivot == 0 else SINGULAR, "step": i0 + i + 1 if pivot else -1,
            "compiled_steps": taken}


# ---------------------------------------------------------------------------- adjoint

cdef void carve_adjoint(Arena* a, AdjointWork* w, double** xb, double** gacc, double** wb,
                        double** tau, double** st, int n, int m, int n_p, int n_tau,
                        int n_st) noexcept nogil:
    xb[0] = take(a, 3 * n + m)
    gacc[0] = take(a, n_p)        # must follow xb: output_vjp writes [xbar, pbar] in one go
    wb[0] = take(a, n)
    w.mu = take(a, n + m)
    w.rd_next = take(a, n)
    w.hat = take(a, 3 * n + m)
    w.wv = take(a, 3 * n + m)
    w.wo = take(a, 3 * n + m)     # zeroed by arena_allocate, as AdjointWork needs
    tau[0] = take(a, n_tau)       # time terms at x_i and x_{i+1}
    tau[1] = take(a, n_tau)
    st[0] = take(a, n_st)         # state terms there
    st[1] = take(a, n_st)


cdef inline void output_source(const symdae_model* km, const symdae_args* x,
                               const double* dphi, double* xb_and_grad) noexcept nogil:
    """[xbar, pbar] += dphi^T [ds/dx, ds/dp], skipped when dphi = 0."""
    cdef int r
    for r in range(km.n_s):
        if dphi[r] != 0.0:
            call(km, SYMDAE_OUTPUT_VJP, x, dphi, xb_and_grad)
            return


cdef void adjoint_record(symdae_adjoint_steps* ar, const Scheme* c, const Traj* tr,
                         const Factors* f, AdjointWork* w, const double* p, const double* dphi,
                         double* xb, double* gacc, double* wb) noexcept nogil:
    """The record of the kernel module's adjoint_steps (symdae_kernels.h): the scheme, the
    trajectory and what the forward sweep stored of it, and the adjoint sweep's running state
    (xb, gacc, wb and w's rd_next and hat), which the generic step reads and leaves there."""
    ar.run = run_of(c, tr, p)
    ar.lu = f.LU
    ar.piv = f.piv
    ar.piv_sparse = SPARSE
    ar.pivot_tol = pivot_tolerance()
    ar.K = f.K
    ar.LUw = f.LUw
    ar.tau = f.TAU if f.TAU != NULL else &_EMPTY[0]     # none: a model without time terms
    ar.st = f.ST if f.ST != NULL else &_EMPTY[0]
    ar.dphi = dphi
    ar.xb = xb
    ar.gacc = gacc
    ar.wb = wb
    ar.rd_next = w.rd_next
    ar.hat = w.hat


def adjoint(Kernels K, double t0, double h, Py_ssize_t N, double alpha, int kind,
            const double[::1] p, const double[:, ::1] U,
            double[:, ::1] Q, double[:, ::1] V, double[:, ::1] A, double[:, ::1] W,
            double[:, ::1] L, double[:, :, ::1] LU, int[:, ::1] PIV, double[:, ::1] TAU,
            double[:, ::1] ST, const double[:, ::1] dPhi, double[::1] carry, Py_ssize_t i0, bint last,
            bint first, const int[::1] order, bint compiled=True):
    """Discrete adjoint sweep (paper eqs. 9 and 11) of the forward scheme, backwards over the
    N steps of rows 0..N (steps i0..i0+N of the grid t0 + k h).

    dPhi (N+1, n_s): the derivative of the cost with respect to every output sample of these
    rows. ``carry`` (3n + m + n + n + n_p): the adjoint of the state at row N, of its
    algorithmic acceleration, the r_d of the step after it and the parameter adjoint summed so
    far; ``last``: row N is the end of the run
    (carry is read as zeros: the sweep starts from the output source there). On return carry
    holds the adjoint of the state at row 0 (with its output source), the r_d of step 0 -> 1
    and the parameter adjoint of every step from row 0 on, for the segment before: one running
    sum, so a run in segments gives the very numbers of one long run. With ``first`` (row 0 is
    the initial state) the term of g_0 is added too, carry[:3n + m] is the adjoint of
    x_0 = (q0, v0, a0, lam0) (w_0 = a_0: its adjoint is added to a0's), which the Python layer
    carries through the consistent initialisation, and carry[3n + m + 2n:] the steps' part of
    dJ/dp. ``order``: the sparse LU
    orders of the forward run. Over stored states the steps go to the kernel module's
    compiled ones where it has them (compiled_steps.h: the same numbers; ``compiled`` False
    keeps every step in the core's generic one).
    Returns {"status", "step", "compiled_steps"} (INTERRUPTED on Ctrl-C, interrupt.pxd).
    """
    cdef const symdae_model* km = K.km
    cdef int n = K.n, m = K.m, nm = K.n + K.m, n_p = K.n_p, ns = K.n_s, nx = 3 * K.n + K.m
    cdef int pivot = 0, k
    cdef Scheme c = scheme(h, alpha, kind)
    cdef Arena arena
    cdef AdjointWork w
    cdef double* xb
    cdef double* wb
    cdef double* gacc
    cdef double* tau[2]
    cdef double* st[2]
    cdef double* tmp
    cdef Traj tr = traj_of(t0, h, Q, V, A, W, L, U, i0)
    cdef Factors f = factors_of(LU, PIV, TAU, ST, nm, K.n_tau, K.n_st)
    cdef const double* dphi = cbase(dPhi)
    cdef double* LUcur
    cdef int* pcur
    cdef Py_ssize_t i = N
    cdef symdae_args x0, x1
    cdef int used[4]
    cdef symdae_adjoint_steps ar
    cdef Py_ssize_t stop, reached, taken = 0
    used[:] = [SYMDAE_NEWTON, SYMDAE_STATE_VJP, SYMDAE_PARAM_VJP, SYMDAE_OUTPUT_VJP]
    cdef int reads = tau_reads(km, used, 4)
    memset(&arena, 0, sizeof(Arena))
    carve_adjoint(&arena, &w, &xb, &gacc, &wb, tau, st, n, m, n_p, K.n_tau, K.n_st)
    carve_factors(&arena, &f)
    mem = arena_allocate(&arena)
    carve_adjoint(&arena, &w, &xb, &gacc, &wb, tau, st, n, m, n_p, K.n_tau, K.n_st)
    carve_factors(&arena, &f)
    arena_check(&arena, mem)
    x0.p = &p[0]
    x1.p = &p[0]
    x0.st = NULL
    x1.st = NULL
    if not last:
        memcpy(xb, &carry[0], nx * sizeof(double))
        memcpy(wb, &carry[nx], n * sizeof(double))
        memcpy(w.rd_next, &carry[nx + n], n * sizeof(double))
        memcpy(gacc, &carry[nx + 2 * n], n_p * sizeof(double))
    with nogil:
        set_state(&x1, &tr, N)
        tau_at(km, &x1, &f, N, tau[1], reads)
        st_at(km, &x1, &f, N, st[1])     # once per state, for all the kernels there
        prepare_lu(km, &x1, &c, &f.lu, f.K, f.LUw, &order[0], True)
        if last:
            output_source(km, &x1, dphi + N * ns, xb)
        # the module's compiled steps over stored states, where the LU in use is the module's
        # written one (compiled_steps.h)
        # (without stored factors, where the LU the generic step would factorise with is the
        # module's written one)
        compiled = (compiled and km.adjoint_steps != NULL
                    and (f.LU != NULL or (f.lu.mfactor != NULL and f.lu.mfactor == km.lu_factor))
                    and (f.TAU != NULL or km.n_tau == 0) and (f.ST != NULL or km.n_st == 0)
                    and f.lu.msolve_t != NULL and f.lu.msolve_t == km.lu_solve_t)
        if compiled:
            adjoint_record(&ar, &c, &tr, &f, &w, &p[0], dphi, xb, gacc, wb)
        while i > 0:
            if (N - i) % INTERRUPT_EVERY == 0 and interrupted():
                pivot = -1
                break
            if compiled:
                # up to the next interrupt check; it stops at a state whose stored
                # factorisation is the dense LU's, whose step the generic one below takes
                stop = max(0, i - INTERRUPT_EVERY + (N - i) % INTERRUPT_EVERY)
                reached = km.adjoint_steps(&ar, i, stop)
                if reached < i:
                    taken += i - reached
                    i = reached
                    set_state(&x1, &tr, i)
                    tau_at(km, &x1, &f, i, tau[1], reads)
                    st_at(km, &x1, &f, i, st[1])
                    if i == stop:
                        continue
            # x1 is at row i, xb its complete adjoint; step i-1 -> i
            pivot = factors_at(km, &x1, &c, &f, i, &LUcur, &pcur)
            if pivot != 0:
                break
            set_state(&x0, &tr, i - 1)
            tau_at(km, &x0, &f, i - 1, tau[0], reads)
            st_at(km, &x0, &f, i - 1, st[0])
            adjoint_step(km, &x1, &x0, &c, &w, &f.lu, LUcur, pcur, xb, wb, gacc)
            output_source(km, &x0, dphi + (i - 1) * ns, xb)
            x1 = x0
            tmp = tau[0]
            tau[0] = tau[1]
            tau[1] = tmp
            tmp = st[0]
            st[0] = st[1]
            st[1] = tmp
            i -= 1
        if pivot == 0 and first and i0 + N > 0:
            initial_g_adjoint(km, &x1, &c, &w, gacc)
        if pivot == 0 and first:
            # w_0 = a_0 at the initial state: one adjoint for both
            for k in range(n):
                xb[2 * n + k] += wb[k]
                wb[k] = 0.0
    memcpy(&carry[0], xb, nx * sizeof(double))
    memcpy(&carry[nx], wb, n * sizeof(double))
    memcpy(&carry[nx + n], w.rd_next, n * sizeof(double))
    memcpy(&carry[nx + 2 * n], gacc, n_p * sizeof(double))
    if pivot < 0:
        return {"status": INTERRUPTED, "step": i0 + i, "compiled_steps": taken}
    return {"status": OK if pivot == 0 else SINGULAR, "step": i0 + i if pivot else -1,
            "compiled_steps": taken}
