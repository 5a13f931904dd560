# The HHT scheme of the discrete-adjoint paper, eq. (15), and what every sweep shares: the
# coefficients, the predictor, calling a kernel, the time terms and the workspace allocator.
#
# State x_i = (q_i, v_i, a_i, lam_i); beta = (1 - alpha)^2 / 4, gamma = (1 - 2 alpha) / 2.
#
#   field  value               role
#   h      h                   the step
#   cM     1 / (1 + alpha)     weight of M a_{i+1} in R_dyn (the newton kernel's c_m)
#   ap     alpha / (1 + alpha) weight of g_i in R_dyn
#   s      beta h^2            q_{i+1} = qhat + s a_{i+1}; constraint rows are C / s (c_q)
#   gh     gamma h             v_{i+1} = vhat + gh a_{i+1} (the newton kernel's c_v)
#   ca     h^2 (1/2 - beta)    qhat = q_i + h v_i + ca a_i
#   cv1    h (1 - gamma)       vhat = v_i + cv1 a_i
#   kw     (cM, s, gh)         the newton kernel's weights
#
#   R_dyn = cM Ma_{i+1} + g_{i+1} - ap g_i = 0,   g = C_q^T lam - Q
#   R_con = C(q_{i+1}, t_{i+1}) / s = 0
from libc.string cimport memset

from symdae.simulation.core.kernel_api cimport (symdae_args, symdae_model, SYMDAE_TIME_TERMS,
                                     SYMDAE_TIME_TERMS_SENSITIVITY)


cdef struct Scheme:
    double h, alpha, cM, ap, s, gh, ca, cv1
    double kw[3]


cdef inline Scheme scheme(double h, double alpha) noexcept nogil:
    cdef Scheme c
    cdef double beta = 0.25 * (1.0 - alpha) * (1.0 - alpha), gam = 0.5 - alpha
    c.h = h
    c.alpha = alpha
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


cdef inline void predictor(const Scheme* c, const double* q, const double* v, const double* a,
                           double* qh, double* vh, int n) noexcept nogil:
    """qhat = q + h v + ca a, vhat = v + cv1 a (the parts of q_{i+1}, v_{i+1} known at i)."""
    cdef int k
    for k in range(n):
        qh[k] = q[k] + c.h * v[k] + c.ca * a[k]
        vh[k] = v[k] + c.cv1 * a[k]


cdef inline void call(const symdae_model* km, int k, const symdae_args* x, const double* w,
                      double* out) noexcept nogil:
    km.kernel[k].fn(x, w, out)


cdef inline void zero_call(const symdae_model* km, int k, const symdae_args* x, const double* w,
                           double* out) noexcept nogil:
    """out = kernel k (out zeroed first: kernels skip structural zeros)."""
    memset(out, 0, km.kernel[k].out_size * sizeof(double))
    km.kernel[k].fn(x, w, out)


cdef inline void time_terms(const symdae_model* km, symdae_args* x, double* tau,
                            bint sensitivity) noexcept nogil:
    """Evaluate the hoisted (t, p, u)-only terms of x into tau and point x.tau at them."""
    x.tau = tau
    call(km, SYMDAE_TIME_TERMS, x, NULL, tau)
    if sensitivity:
        call(km, SYMDAE_TIME_TERMS_SENSITIVITY, x, NULL, tau)


# ---------------------------------------------------------------------------- workspace
# A sweep lays out its work buffers in one function that takes them from an Arena. It runs twice:
# once on a counting arena (no memory: every pointer is NULL) to learn the sizes, then on the
# memory the Python wrapper allocated, which must then be used up exactly (checked). A zero-size
# buffer is a valid pointer (the wrapper allocates one element of slack), so no sweep needs to
# special-case models without constraints, inputs or outputs.
cdef struct Arena:
    double* d
    int* i
    Py_ssize_t nd, ni


cdef inline double* take(Arena* a, Py_ssize_t k) noexcept nogil:
    cdef double* p = NULL if a.d == NULL else a.d + a.nd
    a.nd += k
    return p


cdef inline int* take_int(Arena* a, Py_ssize_t k) noexcept nogil:
    cdef int* p = NULL if a.i == NULL else a.i + a.ni
    a.ni += k
    return p


cdef inline object arena_allocate(Arena* a):
    """After a counting pass over a carve function: memory for what it took (one element of
    slack, so zero-size buffers are valid pointers). The carve then runs again on it; keep
    the returned arrays alive while the pointers are used."""
    import numpy as np
    cdef object d = np.zeros(a.nd + 1)
    cdef object i = np.zeros(a.ni + 1, dtype=np.intc)
    cdef double[::1] dv = d
    cdef int[::1] iv = i
    a.d = &dv[0]
    a.i = &iv[0]
    a.nd = 0
    a.ni = 0
    return d, i


cdef inline void arena_check(Arena* a, object mem) except *:
    """The second carve took exactly what the first counted."""
    if a.nd + 1 != mem[0].shape[0] or a.ni + 1 != mem[1].shape[0]:
        raise AssertionError("a sweep's work buffers changed size between the two passes")
