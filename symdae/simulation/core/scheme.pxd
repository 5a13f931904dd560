# The two schemes of the HHT family, and what every sweep shares: the coefficients, the
# predictor, calling a kernel, the time terms and the workspace allocator.
#
# beta = (1 - alpha)^2 / 4, gamma = (1 - 2 alpha) / 2. A state holds q, v, the acceleration a
# that the kernels see (the model's q''), lam, and the algorithmic acceleration w of the Newmark
# formulas. One step i -> i+1 solves R(y) = 0 for y = (a_{i+1}, lam_{i+1}) with
#
#   q_{i+1} = qhat + s a_{i+1},  qhat = q_i + h v_i + ca w_i + cq a_i
#   v_{i+1} = vhat + gh a_{i+1}, vhat = v_i + cv1 w_i + cvq a_i
#   w_{i+1} = ry a_{i+1} + rp a_i
#   R_dyn = cM Ma_{i+1} + g_{i+1} - ap g_i = 0,   g = C_q^T lam - Q
#   R_con = C(q_{i+1}, t_{i+1}) / s = 0
#
#   field       hht-paper (eq. 15)     hht-ga (generalized-alpha, alpha_m = 0, alpha_f = -alpha)
#   cM          1 / (1 + alpha)        1
#   ap          alpha / (1 + alpha)    0
#   s           beta h^2               (1 + alpha) beta h^2
#   gh          gamma h                (1 + alpha) gamma h
#   ca, cv1     h^2 (1/2 - beta), h (1 - gamma)  (both)
#   cq, cvq     0, 0                   -alpha beta h^2, -alpha gamma h
#   ry, rp      1, 0 (w = a)           1 + alpha, -alpha
#   kw          (cM, s, gh): the newton kernel's weights (c_m, c_q, c_v)
#
# In hht-paper w and a are the same numbers (the sweeps may be given one array for both); in
# hht-ga the equations of motion hold at t_{i+1} for a and w follows its own recursion (Arnold
# and Bruels 2007), which keeps the scheme second order when M depends on q.
from libc.string cimport memset

from symdae.simulation.core.kernel_api cimport (symdae_args, symdae_model, SYMDAE_TIME_TERMS,
                                     SYMDAE_TIME_TERMS_SENSITIVITY, SYMDAE_STATE_TERMS)


cdef enum:
    HHT_PAPER = 0
    HHT_GA = 1


cdef extern from "vector_ops.h":
    void sd_predictor(double h, double ca, double cq, double cv1, double cvq, const double* q,
                      const double* v, const double* w, const double* a, double* qh,
                      double* vh, int n) noexcept nogil
    void sd_corrector(double s, double gh, const double* y, const double* qh, const double* vh,
                      double* q, double* v, int n) noexcept nogil
    void sd_predictor_adjoint(double h, double ca, double cq, double cv1, double cvq, double rp,
                              const double* qh, const double* vh, double* qb, double* vb,
                              double* ab, double* wb, int n) noexcept nogil
    void sd_predictor_sizes(double h, double ca, double cq, double cv1, double cvq,
                            const double* q, const double* v, const double* w, const double* a,
                            double* qs, double* vs, int n) noexcept nogil
    void sd_corrector_sizes(double s, double gh, const double* y, const double* qs,
                            const double* vs, double* q, double* v, int n) noexcept nogil
    void sd_corrector_adjoint(double ry, double s, double gh, const double* ab, const double* wb,
                              const double* qb, const double* vb, double* r, int n) noexcept nogil
    double sd_residual_rows(double cM, double ap, double s, const double* res,
                            const double* gprev, double* R, double* dy, int n,
                            int m) noexcept nogil
    double sd_correction_norm(double rtol, double ff, double tiny, const double* y,
                              const double* fq, const double* dy, int n, int m) noexcept nogil
    bint sd_within(const double* R, const double* nu, double factor, int n) noexcept nogil
    void sd_noise_rows(double cM, double g1, double s, const double* mag, const double* sz,
                       const double* lam, double* nu, double* fq, int n, int m) noexcept nogil
    void sd_floor(double lo, double* x, int n) noexcept nogil
    void sd_extrapolate(int order, const double* y0, const double* y1, const double* y2,
                        double* out, double* out2, int n) noexcept nogil


cdef struct Scheme:
    double h, alpha, cM, ap, s, gh, ca, cv1, cq, cvq, ry, rp
    double kw[3]
    int kind


cdef inline Scheme scheme(double h, double alpha, int kind) noexcept nogil:
    cdef Scheme c
    cdef double beta = 0.25 * (1.0 - alpha) * (1.0 - alpha), gam = 0.5 - alpha
    cdef double f = 1.0 + alpha
    c.h = h
    c.alpha = alpha
    c.kind = kind
    c.ca = h * h * (0.5 - beta)
    c.cv1 = h * (1.0 - gam)
    if kind == HHT_GA:
        c.cM = 1.0
        c.ap = 0.0
        c.s = f * beta * h * h
        c.gh = f * gam * h
        c.cq = -alpha * beta * h * h
        c.cvq = -alpha * gam * h
        c.ry = f
        c.rp = -alpha
    else:
        c.cM = 1.0 / f
        c.ap = alpha / f
        c.s = beta * h * h
        c.gh = gam * h
        c.cq = 0.0
        c.cvq = 0.0
        c.ry = 1.0
        c.rp = 0.0
    c.kw[0] = c.cM
    c.kw[1] = c.s
    c.kw[2] = c.gh
    return c


cdef inline void predictor(const Scheme* c, const double* q, const double* v, const double* w,
                           const double* a, double* qh, double* vh, int n) noexcept nogil:
    """qhat = q + h v + ca w + cq a, vhat = v + cv1 w + cvq a (the parts of q_{i+1}, v_{i+1}
    known at i; qh, vh overlap none of the inputs)."""
    sd_predictor(c.h, c.ca, c.cq, c.cv1, c.cvq, q, v, w, a, qh, vh, n)


cdef inline void recursion(const Scheme* c, const double* a1, const double* a0, double* w1,
                           int n) noexcept nogil:
    """w_{i+1} = ry a_{i+1} + rp a_i (w1 may be a1: hht-paper's w is a)."""
    cdef int k
    cdef double ry = c.ry, rp = c.rp
    if w1 == a1 and ry == 1.0 and rp == 0.0:
        return      # w is a itself (hht-paper): a_{i+1} = 1 a_{i+1} + 0 a_i, a_i finite
    for k in range(n):
        w1[k] = ry * a1[k] + rp * a0[k]


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
    """Evaluate the hoisted (t, p, u)-only terms of x into tau and point x.tau at them: the
    forward ones, or with ``sensitivity`` all of them (one kernel, which shares their costly
    subexpressions and computes the forward ones as SYMDAE_TIME_TERMS does)."""
    x.tau = tau
    call(km, SYMDAE_TIME_TERMS_SENSITIVITY if sensitivity else SYMDAE_TIME_TERMS, x, NULL, tau)


cdef inline void state_terms(const symdae_model* km, symdae_args* x,
                             double* st) noexcept nogil:
    """Evaluate the state terms at x (its t, q, v and time terms) into st and point x.st at
    them, for every kernel that runs at this state (a model without any leaves x.st alone:
    its kernels never read it). x.st must be computed again, or set NULL, before a
    kernel runs at another state."""
    if km.n_st > 0:
        call(km, SYMDAE_STATE_TERMS, x, NULL, st)
        x.st = st


cdef enum:
    TAU_FORWARD = 1         # bits of symdae_kernel_entry.tau
    TAU_SENSITIVITY = 2


cdef inline int tau_reads(const symdae_model* km, const int* kernels, int count) noexcept nogil:
    """The time terms (TAU_* bits) that the given kernels read."""
    cdef int k, reads = 0
    for k in range(count):
        reads |= km.kernel[kernels[k]].tau
    return reads


cdef inline void time_terms_for(const symdae_model* km, symdae_args* x, double* tau,
                                int reads) noexcept nogil:
    """Evaluate the time terms of x that ``reads`` (TAU_* bits) asks for into tau and point
    x.tau at them (a sweep asks for those its kernels read: the forward ones stay unset when
    none reads any; asking for the sensitivity ones evaluates all)."""
    x.tau = tau
    if reads & TAU_SENSITIVITY:
        call(km, SYMDAE_TIME_TERMS_SENSITIVITY, x, NULL, tau)     # all of them
    elif reads & TAU_FORWARD:
        call(km, SYMDAE_TIME_TERMS, x, NULL, tau)


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
