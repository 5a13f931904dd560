# Step functions of the reverse-over-tangent (second-order adjoint) sweep of optimal input design:
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
# reverse_step is adjoint.pxd's adjoint_step without the parameter gradient, returning the
# step's multiplier r = (r_d, r_c) instead: the rho and pi recursions both use it. The
# factorisations are the forward sweep's (sparse.pxd: sparse with the run's orders, or dense).
from libc.string cimport memcpy, memset

from symdae.core.kernel_api cimport symdae_args, symdae_model, SYMDAE_STATE_VJP
from symdae.core.scheme cimport Scheme, call
from symdae.core.sparse cimport SparseLU, apply_t


cdef struct ReverseWork:
    double* hat      # [qhat_bar, vhat_bar, scratch]: x-shaped (3n + m)
    double* wv       # weights of state_vjp (3n + m)


cdef inline void reverse_step(const symdae_model* km, const symdae_args* x1,
                              const symdae_args* x0, const Scheme* c, ReverseWork* w,
                              const SparseLU* lu, const double* LU, const int* piv,
                              double* xb, double* r) noexcept nogil:
    """xb: complete adjoint of x_i in (x1 = x_i), adjoint of x_{i-1} (less its own sources)
    out (x0 = x_{i-1}); r (n + m): the multiplier (r_d, r_c) of step i's residual rows."""
    cdef int n = km.n, m = km.m, nm = km.n + km.m, k
    cdef double* qb = xb
    cdef double* vb = xb + n
    cdef double* ab = xb + 2 * n
    cdef double* lb = xb + 3 * n
    cdef double* qh = w.hat
    cdef double* vh = w.hat + n
    for k in range(n):
        r[k] = ab[k] + c.s * qb[k] + c.gh * vb[k]
    for k in range(m):
        r[n + k] = lb[k]
    apply_t(lu, LU, piv, r)
    for k in range(nm):
        r[k] = -r[k]
    memcpy(qh, qb, n * sizeof(double))
    memcpy(vh, vb, n * sizeof(double))
    for k in range(n):
        w.wv[k] = c.cM * r[k]
        w.wv[n + k] = r[k]
        w.wv[2 * n + m + k] = 0.0
    for k in range(m):
        w.wv[2 * n + k] = r[n + k] / c.s
    call(km, SYMDAE_STATE_VJP, x1, w.wv, w.hat)
    memset(xb, 0, (3 * n + m) * sizeof(double))
    if c.ap != 0.0:
        for k in range(n):
            w.wv[k] = 0.0
            w.wv[n + k] = -c.ap * r[k]
            w.wv[2 * n + m + k] = -c.ap * r[k]
        for k in range(m):
            w.wv[2 * n + k] = 0.0
        call(km, SYMDAE_STATE_VJP, x0, w.wv, xb)
    for k in range(n):
        qb[k] += qh[k]
        vb[k] += c.h * qh[k] + vh[k]
        ab[k] += c.ca * qh[k] + c.cv1 * vh[k]


cdef inline void step_weights(const symdae_model* km, const Scheme* c, const double* r,
                              const double* rd_next, double* w) noexcept nogil:
    """w[0 : 2n + m] = (cM r_d, r_d - ap rd_next, r_c / s): how step i's multiplier r and
    step i+1's rd_next weigh (Ma, g, C) at x_i (state_hvp's and input_vjp's first blocks)."""
    cdef int n = km.n, m = km.m, k
    for k in range(n):
        w[k] = c.cM * r[k]
        w[n + k] = r[k] - c.ap * rd_next[k]
    for k in range(m):
        w[2 * n + k] = r[n + k] / c.s
