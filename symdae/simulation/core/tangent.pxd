# One step i -> i+1 of the tangent-linear (forward sensitivity) sweep, for one direction.
#
# Differentiating R(x_{i+1}, x_i, p) = 0 along a parameter direction dp (scheme.pxd), with
#   dqhat = dq_i + h dv_i + ca dw_i + cq da_i,  dvhat = dv_i + cv1 dw_i + cvq da_i,
#   dq_{i+1} = dqhat + s da_{i+1},  dv_{i+1} = dvhat + gh da_{i+1},
#   dw_{i+1} = ry da_{i+1} + rp da_i:
#   K_{i+1} (da, dlam)_{i+1} = -rhs,
#   rhs_dyn = cM dMa_{i+1} + dg_{i+1} - ap dg_i,   rhs_con = dC_{i+1} / s,
# where (dMa, dg, dC)_{i+1} = state_jvp(x_{i+1}; dqhat, dvhat, 0) + param_jvp(x_{i+1}; dp) and
# dg_i = state_jvp(x_i; dq_i, dv_i, dlam_i) + param_jvp(x_i; dp). Every product with a Jacobian
# block is a generated sparse kernel; the solve reuses the step's factorisation of K_{i+1}.

from libc.string cimport memset

from symdae.simulation.core.kernel_api cimport (symdae_args, symdae_model, SYMDAE_STATE_JVP,
                                     SYMDAE_PARAM_JVP, SYMDAE_OUTPUT_JVP)
from symdae.simulation.core.scheme cimport Scheme, predictor, recursion, call
from symdae.simulation.core.sparse cimport SparseLU, apply


cdef struct TangentWork:
    double* w        # weights: (dq, dv, dlam) for state_jvp, (dx, dp) for output_jvp
    double* r1       # (dMa, dg, dC) at x_{i+1} (2n + m)
    double* r0       # ... at x_i
    double* rhs      # (nm)
    double* dqh      # dqhat, dvhat (n each)
    double* dvh


cdef inline void tangent_step(const symdae_model* km, const symdae_args* x1,
                              const symdae_args* x0, const Scheme* c, TangentWork* w,
                              const SparseLU* lu, const double* LU, const int* piv,
                              const double* dp,
                              const double* p1, const double* p0,
                              const double* dq, const double* dv, const double* dw,
                              const double* da, const double* dl, double* dq1, double* dv1,
                              double* dw1, double* da1, double* dl1) noexcept nogil:
    """(dq, dv, dw, da, dlam)_{i+1} from (...)_i along dp (dw may be da, dw1 da1: hht-paper).
    p1, p0: param_jvp(x_{i+1}; dp) and param_jvp(x_i; dp), which the sweep computes once per
    state and keeps for the next step."""
    cdef int n = km.n, m = km.m, nm = km.n + km.m, nr = 2 * km.n + km.m, k
    predictor(c, dq, dv, dw, da, w.dqh, w.dvh, n)
    for k in range(nr):
        w.r1[k] = p1[k]
    for k in range(n):
        w.w[k] = w.dqh[k]
        w.w[n + k] = w.dvh[k]
    for k in range(m):
        w.w[2 * n + k] = 0.0
    call(km, SYMDAE_STATE_JVP, x1, w.w, w.r1)
    for k in range(n):
        w.rhs[k] = c.cM * w.r1[k] + w.r1[n + k]
    for k in range(m):
        w.rhs[n + k] = w.r1[2 * n + k] / c.s
    if c.ap != 0.0:
        for k in range(nr):
            w.r0[k] = p0[k]
        for k in range(n):
            w.w[k] = dq[k]
            w.w[n + k] = dv[k]
        for k in range(m):
            w.w[2 * n + k] = dl[k]
        call(km, SYMDAE_STATE_JVP, x0, w.w, w.r0)
        for k in range(n):
            w.rhs[k] -= c.ap * w.r0[n + k]
    apply(lu, LU, piv, w.rhs)
    for k in range(n):
        da1[k] = -w.rhs[k]
        dq1[k] = w.dqh[k] - c.s * w.rhs[k]
        dv1[k] = w.dvh[k] - c.gh * w.rhs[k]
    for k in range(m):
        dl1[k] = -w.rhs[n + k]
    recursion(c, da1, da, dw1, n)


cdef inline void output_tangent(const symdae_model* km, const symdae_args* x, double* wbuf,
                                const double* dq, const double* dv, const double* da,
                                const double* dl, const double* dp, double* ds) noexcept nogil:
    """ds = ds/dx dx + ds/dp dp at x (output_jvp, weights (dx, dp))."""
    cdef int n = km.n, m = km.m, k
    for k in range(n):
        wbuf[k] = dq[k]
        wbuf[n + k] = dv[k]
        wbuf[2 * n + k] = da[k]
    for k in range(m):
        wbuf[3 * n + k] = dl[k]
    for k in range(km.n_p):
        wbuf[3 * n + m + k] = dp[k]
    memset(ds, 0, km.n_s * sizeof(double))
    call(km, SYMDAE_OUTPUT_JVP, x, wbuf, ds)
