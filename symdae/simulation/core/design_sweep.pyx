# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled reverse-over-tangent sweep: the exact gradient of a function of the outputs and
output sensitivities with respect to every input sample (optimal input design).

The mathematics is in the comment below; the scheme in scheme.pxd; each backward step is
adjoint.pxd's state_step. Like hht.pyx this module knows no model: it reaches one through the
kernel capsule of its generated module (symdae_kernels.h). It shares the workspace
(scheme.pxd), the sparse LU (sparse.pxd) and its preparation (factors.pxd) with hht.pyx. The
Python layer (symdae/simulation/backends/design.py) validates every shape before calling in, so the
nogil loop trusts its inputs.
"""
# The reverse-over-tangent (second-order adjoint) sweep of optimal input design:
# the exact gradient, with respect to every input sample U_i, of a function Psi of the outputs
# s_i and of the output sensitivities S_i = ds_i/db (the Fisher information is one).
#
# The forward scheme is scheme.pxd's; the tangent sweep (tangent.pxd) gives sigma_{j,i} =
# dx_i/db along each parameter direction d_j. With pi_i the multiplier of step i's residual
# f_i(x_i, x_{i-1}, U_i, U_{i-1}) = 0 and rho_{j,i} that of its tangent
# tau_{j,i} = A_i sigma_{j,i} + B_i sigma_{j,i-1} + F_i d_j = 0, the Lagrangian
# L = Psi + sum pi^T f + sum rho^T tau is stationary when (one fused backward sweep, i = N..1):
#
#   (a) rho_j: the first-order adjoint recursion with source dPsi/dS[:, j] (sx^T dPsi/dS);
#   (b) pi: the same recursion with the sources dPsi/ds (sx^T dPsi/ds), dPsi/dx and the
#       second-order term grad_x l_j of the state_hvp kernel at x_i, for every j, with
#         wM = cM rho^d_{j,i},  wG = rho^d_{j,i} - ap rho^d_{j,i+1},  wC = rho^c_{j,i} / s,
#         wS = dPsi/dS_{i,:,j},  (dx, dp) = (sigma_{j,i}, d_j).
#       HHT has no mixed x_i - x_{i-1} second derivatives (f^d is a function of x_i plus one of
#       x_{i-1}; f^q, f^v are linear with constant coefficients), so tau_{j,i} and tau_{j,i+1}
#       meet at x_i in this one call;
#   (c) dL/dU_i = input_vjp(x_i; cM pi^d_i, pi^d_i - ap pi^d_{i+1}, pi^c_i / s, dPsi/ds_i)
#       + grad_u l_j (the u-block of the same state_hvp calls).
#
# Each backward step is adjoint.pxd's state_step, which returns the step's multiplier
# r = (r_d, r_c): the rho and pi recursions both use it. The
# factorisations are the forward sweep's (sparse.pxd: sparse with the run's orders, or dense).
import numpy as np

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.string cimport memcpy, memset

from symdae.simulation.core.kernel_api cimport *
from symdae.simulation.core.scheme cimport (Scheme, scheme, call, zero_call, time_terms,
                                 state_terms, Arena, arena_allocate, arena_check)
from symdae.simulation.core.newton cimport factor_into
from symdae.simulation.core.sparse cimport SparseLU, carve_sparse
from symdae.simulation.core.factors cimport prepare_lu
from symdae.simulation.core.adjoint cimport AdjointWork, state_step, step_weights
from symdae.simulation.core.interrupt cimport INTERRUPTED, INTERRUPT_EVERY, interrupted

ABI_VERSION = SYMDAE_ABI_VERSION
N_KERNELS = SYMDAE_N_KERNELS

cdef double _EMPTY[1]


cdef const symdae_model* _model(object module) except NULL:
    cap = getattr(module, "kernels", None)
    if cap is None or not PyCapsule_IsValid(cap, b"symdae.model"):
        raise TypeError(f"{module!r} does not export a 'symdae.model' kernel capsule")
    cdef const symdae_model* km = <const symdae_model*>PyCapsule_GetPointer(cap, b"symdae.model")
    if km.abi_version != SYMDAE_ABI_VERSION:
        raise ImportError(f"kernel module {module!r} has ABI {km.abi_version}, the design "
                          f"sweep expects {SYMDAE_ABI_VERSION}: rebuild it")
    return km


cdef inline const double* row(const double[:, ::1] X, Py_ssize_t i) noexcept nogil:
    return &X[i, 0] if X.shape[1] > 0 else _EMPTY


cdef inline void set_state(symdae_args* x, double t0, double h, Py_ssize_t i,
                           const double[:, ::1] Q, const double[:, ::1] V,
                           const double[:, ::1] A, const double[:, ::1] L,
                           const double[:, ::1] U) noexcept nogil:
    x.t = t0 + i * h
    x.q = row(Q, i)
    x.v = row(V, i)
    x.a = row(A, i)
    x.lam = row(L, i)
    x.u = row(U, i)


cdef inline void add_output_source(const symdae_model* km, const symdae_args* x,
                                   const double* dphi, double* scratch,
                                   double* xb) noexcept nogil:
    """xb += ds/dx^T dphi at x (skipped when dphi = 0); scratch: nx + n_p."""
    cdef int r, k, nx = 3 * km.n + km.m
    for r in range(km.n_s):
        if dphi[r] != 0.0:
            zero_call(km, SYMDAE_OUTPUT_VJP, x, dphi, scratch)
            for k in range(nx):
                xb[k] += scratch[k]
            return


def design_adjoint(object module, double t0, double h, Py_ssize_t N, double alpha, int kind,
                   const double[::1] p, const double[:, ::1] U,
                   const double[:, ::1] Q, const double[:, ::1] V, const double[:, ::1] A,
                   const double[:, ::1] L, object LU, object PIV, object TAU, object ST,
                   const double[:, ::1] DT, const double[:, :, ::1] dQ,
                   const double[:, :, ::1] dV, const double[:, :, ::1] dA,
                   const double[:, :, ::1] dL, const double[:, :, ::1] dPsiS,
                   const double[:, ::1] dPsis, const double[:, ::1] dPsix,
                   double[:, ::1] ubar, const int[::1] order):
    """Reverse-over-tangent sweep (the comment at the top) of scheme ``kind`` (scheme.pxd)
    over a forward trajectory and its tangents.

    DT (nd, n_p): parameter directions; dQ, dV, dA, dL (N+1, nd, size): the tangents; dPsiS
    (N+1, nd, n_s): dPsi/dS; dPsis (N+1, n_s): dPsi/ds; dPsix (N+1, 3n + m): dPsi/dx; every
    array at least one element wide (the caller pads). ubar (N+1, n_u) receives dPsi/dU_i for
    i = 1..N (row 0 is left alone: U_0 is not a design variable). LU (N+1, nm, nm), PIV,
    TAU (N+1, n_tau) and ST (N+1, n_st) are the forward sweep's stored factorisations, time
    terms and state terms, or None (recomputed state by state); ``order`` (2 nm): the forward
    run's sparse LU orders.
    Returns {"status": 0 | 1 (singular) | 4 (interrupted: Ctrl-C, interrupt.pxd), "step"}.
    """
    cdef const symdae_model* km = _model(module)
    cdef int n = km.n, m = km.m, nm = km.n + km.m, n_p = km.n_p, ns = km.n_s, nu = km.n_u
    cdef int nx = 3 * km.n + km.m, n_tau = km.n_tau
    cdef int nd = <int>DT.shape[0], j, k, pivot = 0
    cdef int nwh = 2 * n + m + ns + nx + n_p          # state_hvp weights
    cdef int nwi = 2 * n + m + ns                     # input_vjp weights
    cdef Scheme c = scheme(h, alpha, kind)
    cdef bint stored = LU is not None
    cdef bint tau_stored = TAU is not None
    cdef bint st_stored = ST is not None and km.n_st > 0
    cdef double[:, :, ::1] LUv
    cdef int[:, ::1] PIVv
    cdef double[:, ::1] TAUv
    cdef double[:, ::1] STv
    if stored:
        LUv = LU
        PIVv = PIV
    if tau_stored:
        TAUv = TAU
    if st_stored:
        STv = ST
    # work buffers (one element of slack each: zero-size buffers stay valid pointers)
    xbr_a = np.zeros(nd * nx + 1)      # rho adjoints, one row per direction
    rr_a = np.zeros(nd * nm + 1)       # rho multipliers of the current step
    rdr_a = np.zeros(nd * n + 1)       # rho^d of the step after
    xbp_a = np.zeros(nx + 1)
    wbr_a = np.zeros(nd * n + 1)       # adjoints of the algorithmic accelerations (scheme.pxd)
    wbp_a = np.zeros(n + 1)
    rp_a = np.zeros(nm + 1)
    rdp_a = np.zeros(n + 1)
    hat_a = np.zeros(nx + 1)
    wv_a = np.zeros(nx + 1)
    wo_a = np.zeros(nx + 1)     # zeroed, as AdjointWork needs
    wh_a = np.zeros(nwh + 1)
    hout_a = np.zeros(nx + nu + 1)
    wi_a = np.zeros(nwi + 1)
    scr_a = np.zeros(nx + n_p + 1)
    tau_a = np.zeros(2 * n_tau + 2)
    st_a = np.zeros(2 * km.n_st + 2)
    K_a = np.zeros(nm * nm + 1)
    LUw_a = np.zeros(nm * nm + 1)
    pw_a = np.zeros(nm + 2, dtype=np.intc)
    cdef double[::1] xbr = xbr_a, rr = rr_a, rdr = rdr_a, xbp = xbp_a, rp = rp_a
    cdef double[::1] rdp = rdp_a, hat = hat_a, wv = wv_a, wh = wh_a, hout = hout_a, wi = wi_a
    cdef double[::1] wo = wo_a
    cdef double[::1] scr = scr_a, taub = tau_a, Kb = K_a, LUwb = LUw_a, stb = st_a
    cdef double[::1] wbr = wbr_a, wbp = wbp_a
    cdef int[::1] pwb = pw_a
    cdef double* tau[2]
    cdef double* st[2]
    cdef double* tmp
    cdef const double* LUcur
    cdef const int* pcur
    cdef AdjointWork w
    cdef SparseLU lu
    cdef Arena arena
    cdef symdae_args x0, x1
    cdef Py_ssize_t i = N
    arena.d = NULL
    arena.i = NULL
    arena.nd = 0
    arena.ni = 0
    carve_sparse(&arena, &lu, nm)
    keep = arena_allocate(&arena)
    carve_sparse(&arena, &lu, nm)
    arena_check(&arena, keep)
    w.hat = &hat[0]
    w.wv = &wv[0]
    w.wo = &wo[0]
    tau[0] = &taub[0]
    tau[1] = &taub[n_tau + 1]
    st[0] = &stb[0]
    st[1] = &stb[km.n_st + 1]
    x0.p = &p[0]
    x1.p = &p[0]
    x0.st = NULL
    x1.st = NULL
    with nogil:
        set_state(&x1, t0, h, N, Q, V, A, L, U)
        if tau_stored:
            x1.tau = row(TAUv, N)
        else:
            time_terms(km, &x1, tau[1], True)
        if st_stored:
            x1.st = row(STv, N)
        else:
            state_terms(km, &x1, st[1])     # once per state, for all the kernels there
        prepare_lu(km, &x1, &c, &lu, &Kb[0], &LUwb[0], &order[0], True)
        for k in range(nx):
            xbp[k] = dPsix[N, k]
        add_output_source(km, &x1, &dPsis[N, 0], &scr[0], &xbp[0])
        for j in range(nd):
            add_output_source(km, &x1, &dPsiS[N, j, 0], &scr[0], &xbr[j * nx])
        while i > 0:
            if (N - i) % INTERRUPT_EVERY == 0 and interrupted():
                pivot = -1
                break
            # x1 = x_i with its complete adjoints (less the second-order term for pi)
            if stored:
                LUcur = &LUv[i, 0, 0] if nm > 0 else _EMPTY
                pcur = &PIVv[i, 0] if nm > 0 else NULL
            else:
                pivot = factor_into(km, &x1, c.kw, &lu, &Kb[0], &LUwb[0], &pwb[0])
                if pivot != 0:
                    break
                LUcur = &LUwb[0]
                pcur = &pwb[0]
            set_state(&x0, t0, h, i - 1, Q, V, A, L, U)
            if tau_stored:
                x0.tau = row(TAUv, i - 1)
            else:
                time_terms(km, &x0, tau[0], True)
            if st_stored:
                x0.st = row(STv, i - 1)
            else:
                state_terms(km, &x0, st[0])
            memset(&hout[0], 0, (nx + nu) * sizeof(double))
            for j in range(nd):
                state_step(km, &x1, &x0, &c, &w, &lu, LUcur, pcur, &xbr[j * nx],
                           &wbr[j * n], &rr[j * nm])
                # second order at x_i: wM, wG, wC | wS | dx = sigma_{j,i} | dp = d_j
                step_weights(km, &c, &rr[j * nm], &rdr[j * n], &wh[0])
                for k in range(ns):
                    wh[2 * n + m + k] = dPsiS[i, j, k]
                for k in range(n):
                    wh[2 * n + m + ns + k] = dQ[i, j, k]
                    wh[3 * n + m + ns + k] = dV[i, j, k]
                    wh[4 * n + m + ns + k] = dA[i, j, k]
                for k in range(m):
                    wh[5 * n + m + ns + k] = dL[i, j, k]
                for k in range(n_p):
                    wh[5 * n + 2 * m + ns + k] = DT[j, k]
                call(km, SYMDAE_STATE_HVP, &x1, &wh[0], &hout[0])
                memcpy(&rdr[j * n], &rr[j * nm], n * sizeof(double))
                add_output_source(km, &x0, &dPsiS[i - 1, j, 0], &scr[0], &xbr[j * nx])
            for k in range(nx):
                xbp[k] += hout[k]
            for k in range(nu):
                ubar[i, k] += hout[nx + k]
            state_step(km, &x1, &x0, &c, &w, &lu, LUcur, pcur, &xbp[0], &wbp[0], &rp[0])
            step_weights(km, &c, &rp[0], &rdp[0], &wi[0])
            for k in range(ns):
                wi[2 * n + m + k] = dPsis[i, k]
            call(km, SYMDAE_INPUT_VJP, &x1, &wi[0], &ubar[i, 0])
            memcpy(&rdp[0], &rp[0], n * sizeof(double))
            for k in range(nx):
                xbp[k] += dPsix[i - 1, k]
            add_output_source(km, &x0, &dPsis[i - 1, 0], &scr[0], &xbp[0])
            x1 = x0
            tmp = tau[0]
            tau[0] = tau[1]
            tau[1] = tmp
            tmp = st[0]
            st[0] = st[1]
            st[1] = tmp
            i -= 1
    del keep
    if pivot < 0:
        return {"status": INTERRUPTED, "step": i}
    return {"status": 0 if pivot == 0 else 1, "step": i if pivot else -1}
