# One step i+1 -> i of the discrete adjoint sweep (paper eqs. 9 and 11) for either scheme of
# scheme.pxd.
#
# xbar = (qbar, vbar, abar, lbar) and wbar hold the complete adjoint of x_{i+1} (wbar: of its
# algorithmic acceleration w) on entry. With r the adjoint of step i -> i+1's residual (solve
# K_{i+1}^T mu = (abar + ry wbar + s qbar + gh vbar, lbar), r = -mu = (r_d, r_c)):
#   qhat_bar = qbar_{i+1} + (cM J_M + J_G)_{i+1}^T r_d + C_q,{i+1}^T r_c / s
#   vhat_bar = vbar_{i+1} + G_V,{i+1}^T r_d
#   pbar    += P_{i+1}^T (cM r_d | r_d - ap r_d,next | r_c / s)   (g_{i+1} also enters the next
#              step through -ap g_{i+1}, whose r_d the sweep carries as rd_next)
#   xbar_i   = output source_i - ap (J_G,i^T r_d, G_V,i^T r_d, ., C_q,i r_d)
#              + predictor adjoints (qhat_bar, h qhat_bar + vhat_bar,
#                                    cq qhat_bar + cvq vhat_bar + rp wbar_{i+1}, .)
#   wbar_i   = ca qhat_bar + cv1 vhat_bar
# Every product with a Jacobian block is a generated sparse kernel (state_vjp, param_vjp,
# output_vjp). On return xbar, wbar hold the adjoint of x_i, without x_i's output source, which
# the sweep adds (output_vjp writes xbar and pbar in one call). In hht-paper w is a: the
# adjoint of a_i is then abar + wbar, which is what the next step's solve and the initial
# state read.
#
# adjoint_step and the sweep's loop over stored states have a compiled twin in every kernel
# module that has the written-out LU (compiled_steps.h: the same operations on local arrays,
# for the module's sizes): a change here must be made there too, and
# tests/simulation/test_compiled_steps.py compares the two bit for bit.

from libc.string cimport memcpy, memset

from symdae.simulation.core.kernel_api cimport (symdae_args, symdae_model, SYMDAE_STATE_VJP,
                                     SYMDAE_PARAM_VJP)
from symdae.simulation.core.scheme cimport (Scheme, call, sd_predictor_adjoint,
                                            sd_corrector_adjoint)
from symdae.simulation.core.sparse cimport SparseLU, apply_t


cdef struct AdjointWork:
    double* mu       # (nm) solve of K^T, then r
    double* rd_next  # r_d of the step after the current one (n)
    double* hat      # [qhat_bar, vhat_bar, unused, scratch]: x-shaped (3n + m)
    double* wv       # weights of the vjp kernels at x_{i+1} (3n + m; its last n stay zero)
    double* wo       # ... at x_i, (0, -ap r_d, 0, -ap r_d) (3n + m; zeroed when made: its
                     # first and third blocks stay zero)


cdef inline void state_step(const symdae_model* km, const symdae_args* x1,
                            const symdae_args* x0, const Scheme* c, AdjointWork* w,
                            const SparseLU* lu, const double* LU, const int* piv, double* xb,
                            double* wb, double* r) noexcept nogil:
    """The state part of a backward step: (xb, wb), the adjoint of x_{i+1} in (x1), becomes
    that of x_i (less its output source) (x0); r (n + m) receives the multiplier (r_d, r_c) of
    step i -> i+1's residual rows. Uses w.hat, w.wv and w.wo, and leaves in w.wv the weights
    (cM r_d, r_d, r_c / s, 0) of x_{i+1} as the new state."""
    cdef int n = km.n, m = km.m, nm = km.n + km.m, k
    cdef double* qb = xb
    cdef double* vb = xb + n
    cdef double* ab = xb + 2 * n
    cdef double* lb = xb + 3 * n
    cdef double* qh = w.hat
    cdef double* vh = w.hat + n
    sd_corrector_adjoint(c.ry, c.s, c.gh, ab, wb, qb, vb, r, n)
    for k in range(m):
        r[n + k] = lb[k]
    apply_t(lu, LU, piv, r)
    # predictor adjoints: role of x_{i+1} as the new state of step i -> i+1 (one pass per
    # block: at n of a few, loop overhead is most of the work)
    for k in range(n):
        r[k] = -r[k]
        qh[k] = qb[k]
        vh[k] = vb[k]
        w.wv[k] = c.cM * r[k]
        w.wv[n + k] = r[k]
    for k in range(m):
        r[n + k] = -r[n + k]
        w.wv[2 * n + k] = r[n + k] / c.s
    call(km, SYMDAE_STATE_VJP, x1, w.wv, w.hat)
    # x_i as the old state of step i -> i+1
    memset(xb, 0, (3 * n + m) * sizeof(double))
    if c.ap != 0.0:
        for k in range(n):
            w.wo[n + k] = -c.ap * r[k]
            w.wo[2 * n + m + k] = -c.ap * r[k]
        call(km, SYMDAE_STATE_VJP, x0, w.wo, xb)
    sd_predictor_adjoint(c.h, c.ca, c.cq, c.cv1, c.cvq, c.rp, qh, vh, qb, vb, ab, wb, n)


cdef inline void step_weights(const symdae_model* km, const Scheme* c, const double* r,
                              const double* rd_next, double* w) noexcept nogil:
    """w[0 : 2n + m] = (cM r_d, r_d - ap rd_next, r_c / s): how step i's multiplier r and
    step i+1's rd_next weigh (Ma, g, C) at x_{i+1} (x_{i+1} enters step i -> i+1, and step
    i+1 -> i+2 through g_{i+1}): the weights of param_vjp, and of the design sweep's
    second-order and input kernels."""
    cdef int n = km.n, m = km.m, k
    for k in range(n):
        w[k] = c.cM * r[k]
        w[n + k] = r[k] - c.ap * rd_next[k]
    for k in range(m):
        w[2 * n + k] = r[n + k] / c.s


cdef inline void adjoint_step(const symdae_model* km, const symdae_args* x1,
                              const symdae_args* x0, const Scheme* c, AdjointWork* w,
                              const SparseLU* lu, const double* LU, const int* piv, double* xb,
                              double* wb, double* gacc) noexcept nogil:
    """(xb, wb): adjoint of x_{i+1} in, of x_i (less its output source) out; gacc += the
    step's parameter adjoint."""
    cdef int k
    state_step(km, x1, x0, c, w, lu, LU, piv, xb, wb, w.mu)       # mu is now r = (r_d, r_c)
    if km.n_p > 0:
        # w.wv holds state_step's weights of x_{i+1}, (cM r_d, r_d, r_c / s): step_weights'
        # numbers but for the middle block's -ap rd_next (none in hht-ga, or at alpha = 0)
        if c.ap != 0.0:
            for k in range(km.n):
                w.wv[km.n + k] = w.mu[k] - c.ap * w.rd_next[k]
        call(km, SYMDAE_PARAM_VJP, x1, w.wv, gacc)
    memcpy(w.rd_next, w.mu, km.n * sizeof(double))


cdef inline void initial_g_adjoint(const symdae_model* km, const symdae_args* x0,
                                   const Scheme* c, AdjointWork* w,
                                   double* gacc) noexcept nogil:
    """g_0 enters step 0 -> 1 through -ap g_0: its parameter adjoint (x0 at state 0)."""
    cdef int n = km.n, k
    if km.n_p == 0 or c.ap == 0.0:
        return
    memset(w.wv, 0, (2 * n + km.m) * sizeof(double))
    for k in range(n):
        w.wv[n + k] = -c.ap * w.rd_next[k]
    call(km, SYMDAE_PARAM_VJP, x0, w.wv, gacc)
