# One step i -> i+1 of the tangent-linear (forward sensitivity) sweep, for all directions at once.
#
# Differentiating R(x_{i+1}, x_i, p) = 0 along a parameter direction dp (scheme.pxd), with
#   dqhat = dq_i + h dv_i + ca dw_i + cq da_i,  dvhat = dv_i + cv1 dw_i + cvq da_i,
#   dq_{i+1} = dqhat + s da_{i+1},  dv_{i+1} = dvhat + gh da_{i+1},
#   dw_{i+1} = ry da_{i+1} + rp da_i:
#   K_{i+1} (da, dlam)_{i+1} = -rhs,
#   rhs_dyn = cM dMa_{i+1} + dg_{i+1} - ap dg_i,   rhs_con = dC_{i+1} / s,
# where (dMa, dg, dC)_{i+1} = J_{i+1} (dqhat, dvhat, 0) + P_{i+1} dp and
# dg_i = J_G,i dq_i + G_V,i dv_i + C_q,i^T dlam_i + P_G,i dp (J: the state Jacobian blocks, P: the
# parameter ones, kernels.py). The output tangent is ds = S_x dx + S_p dp.
#
# The cost per step must not grow with the number of directions by more than the flops of the
# products: the Jacobian blocks at a state are evaluated once (the dense jacobians,
# param_jacobians and output_jacobians kernels, which never write their structural zeros) and
# kept for the next step, where the state is x_i; each product of a block with all directions is
# a loop over the block's written entries (a Product, found once per sweep by filling the
# buffers with sentinel() before the first call); the step's factorisation of K_{i+1} solves
# every direction's right-hand side.

from libc.string cimport memset

from symdae.simulation.core.kernel_api cimport (symdae_args, symdae_model, SYMDAE_JACOBIANS,
                                     SYMDAE_PARAM_JACOBIANS, SYMDAE_OUTPUT_JACOBIANS,
                                     SYMDAE_TANGENT_ND, symdae_tangent_product)
from symdae.simulation.core.scheme cimport Scheme, Arena, take, take_int, predictor, call
from symdae.simulation.core.sparse cimport SparseLU, apply_many, sentinel


cdef extern from "vector_ops.h":
    void sd_product(int nnz, const int* row, const int* col, const int* at, const double* coef,
                    const double* vals, const double* x, double* y, int nd) noexcept nogil
    void sd_tangent_corrector(double s, double gh, double ry, double rp, const double* y,
                              const double* qh, const double* vh, const double* a0, double* q,
                              double* v, double* a, double* w, int n, int nl) noexcept nogil


cdef struct Product:
    # y[d, row[e]] += coef[e] * vals[at[e]] * x[d, col[e]] over the entries e, for every
    # direction d (vals: a kernel's output buffer)
    int* row
    int* col
    int* at
    double* coef
    int nnz


cdef enum:
    NEW_STATE = 0      # rhs from J_{i+1} (dqhat, dvhat)
    NEW_PARAMS = 1     # rhs from P_{i+1} dp
    OLD_STATE = 2      # rhs from J_i (dq, dv, dlam): -ap dg_i
    OLD_PARAMS = 3     # rhs from P_i dp: -ap P_G,i dp
    OUT_STATE = 4      # ds from S_x dx
    OUT_PARAMS = 5     # ds from S_p dp
    N_PRODUCTS = 6


cdef struct TangentWork:
    # every per-direction buffer holds its entries by row: entry k of direction d at k nd + d,
    # so that the loops over the directions are innermost and contiguous
    double* J[2]     # jacobians at x_i, x_{i+1} (3n^2 + mn)
    double* P[2]     # param_jacobians at x_i, x_{i+1} ((2n + m) n_p)
    double* S        # output_jacobians at the current state (n_s (3n + m + n_p))
    double* D        # the directions (n_p x nd)
    double* T[2]     # the tangents of x_i, x_{i+1}: (dq, dv, da, dlam, dw) ((4n + m) x nd)
    double* xnew     # (dqhat, dvhat) (2n x nd)
    double* rhs      # (n + m) x nd
    double* scratch  # (n + m) x nd, for the solves
    int* used        # (n_p) 1 where a direction moves the parameter
    Product prod[N_PRODUCTS]
    # the kernel module's written-out product for these directions, or NULL (the lists);
    # coef: their coefficients (c_M, 1 / s, -alpha_p), as collect_products gives them
    symdae_tangent_product written[N_PRODUCTS]
    double coef[3]


cdef struct Tangents:
    # the tangents of one state in the sweep's arrays, (nd, size) each: direction d's row at
    # base + d * stride (sizes >= 1)
    double* q
    double* v
    double* a
    double* lam
    double* w        # may be a: hht-paper's w is a
    int sn, sm


cdef inline void carve_tangent_work(Arena* a, TangentWork* w, int n, int m, int n_p, int n_s,
                                    int nd) noexcept nogil:
    cdef int k
    for k in range(2):
        w.J[k] = take(a, 3 * n * n + m * n)
        w.P[k] = take(a, (2 * n + m) * n_p)
        w.T[k] = take(a, (4 * n + m) * nd)
    w.S = take(a, n_s * (3 * n + m + n_p))
    w.D = take(a, n_p * nd)
    w.xnew = take(a, 2 * n * nd)
    w.rhs = take(a, (n + m) * nd)
    w.scratch = take(a, (n + m) * nd)
    w.used = take_int(a, n_p)


cdef inline void carve_products(Arena* a, TangentWork* w) noexcept nogil:
    """The entry lists of the products, sized by a counting pass of collect_products."""
    cdef int k
    for k in range(N_PRODUCTS):
        w.prod[k].row = take_int(a, w.prod[k].nnz)
        w.prod[k].col = take_int(a, w.prod[k].nnz)
        w.prod[k].at = take_int(a, w.prod[k].nnz)
        w.prod[k].coef = take(a, w.prod[k].nnz)


cdef inline void block(Product* P, const double* vals, int start, int rows, int cols, int row0,
                       int col0, double coef, bint transpose, const int* keep) noexcept nogil:
    """Add the written entries (r, k) of the row-major rows x cols block at vals + start as
    y row row0 + r, x column col0 + k (transposed: y row row0 + k, x column col0 + r), only
    the columns k with keep[k] != 0 unless keep is NULL. Only counts while P's lists are
    NULL."""
    cdef int r, k, at, e
    for r in range(rows):
        for k in range(cols):
            at = start + r * cols + k
            if vals[at] == sentinel() or (keep != NULL and keep[k] == 0):
                continue
            e = P.nnz
            P.nnz += 1
            if P.row == NULL:
                continue
            P.row[e] = row0 + k if transpose else row0 + r
            P.col[e] = col0 + r if transpose else col0 + k
            P.at[e] = at
            P.coef[e] = coef


cdef inline void written_entries(const symdae_model* km, const symdae_args* x,
                                 TangentWork* w) noexcept nogil:
    """The blocks at x into w.J[0], w.P[0], w.S, with sentinel() where a kernel writes nothing."""
    cdef int k, j
    cdef int ids[3]
    cdef double* bufs[3]
    ids[0] = SYMDAE_JACOBIANS
    ids[1] = SYMDAE_PARAM_JACOBIANS
    ids[2] = SYMDAE_OUTPUT_JACOBIANS
    bufs[0] = w.J[0]
    bufs[1] = w.P[0]
    bufs[2] = w.S
    for k in range(3):
        for j in range(km.kernel[ids[k]].out_size):
            bufs[k][j] = sentinel()
        call(km, ids[k], x, NULL, bufs[k])


cdef inline void collect_products(const symdae_model* km, const Scheme* c, TangentWork* w,
                                  const double* DT, int ldp, int nd) noexcept nogil:
    """The directions DT (nd rows, ldp apart) into w.D, and the entry lists of every product
    from the structure written_entries left in w (a counting pass while the lists are NULL);
    the parameter blocks only in the columns that a direction moves. Its twin for the state
    blocks, symdae/model/tangent_products.py, writes the same entries out in the same order
    (tests/simulation/test_tangent_products.py compares them bit for bit)."""
    cdef int n = km.n, m = km.m, n_p = km.n_p, n_s = km.n_s, nx = 3 * km.n + km.m, k, d
    cdef const double* J = w.J[0]
    cdef const double* P = w.P[0]
    cdef const int* u = w.used
    for k in range(N_PRODUCTS):
        w.prod[k].nnz = 0
    for k in range(n_p):
        w.used[k] = 0
        for d in range(nd):
            if w.D != NULL:
                w.D[k * nd + d] = DT[d * ldp + k]
            if DT[d * ldp + k] != 0.0:
                w.used[k] = 1
    # J = [J_M; J_G; G_V; C_q] (row-major blocks), x = (dqhat, dvhat), y = rhs
    block(&w.prod[NEW_STATE], J, 0, n, n, 0, 0, c.cM, False, NULL)
    block(&w.prod[NEW_STATE], J, n * n, n, n, 0, 0, 1.0, False, NULL)
    block(&w.prod[NEW_STATE], J, 2 * n * n, n, n, 0, n, 1.0, False, NULL)
    block(&w.prod[NEW_STATE], J, 3 * n * n, m, n, n, 0, 1.0 / c.s, False, NULL)
    # P = [P_M; P_G; P_C], x = dp
    block(&w.prod[NEW_PARAMS], P, 0, n, n_p, 0, 0, c.cM, False, u)
    block(&w.prod[NEW_PARAMS], P, n * n_p, n, n_p, 0, 0, 1.0, False, u)
    block(&w.prod[NEW_PARAMS], P, 2 * n * n_p, m, n_p, n, 0, 1.0 / c.s, False, u)
    if c.ap != 0.0:
        # x = the tangents of x_i (dq, dv, da, dlam, dw): -ap (J_G dq + G_V dv + C_q^T dlam
        # + P_G dp)
        block(&w.prod[OLD_STATE], J, n * n, n, n, 0, 0, -c.ap, False, NULL)
        block(&w.prod[OLD_STATE], J, 2 * n * n, n, n, 0, n, -c.ap, False, NULL)
        block(&w.prod[OLD_STATE], J, 3 * n * n, m, n, 0, 3 * n, -c.ap, True, NULL)
        block(&w.prod[OLD_PARAMS], P, n * n_p, n, n_p, 0, 0, -c.ap, False, u)
    # x = the tangents (dq, dv, da, dlam, ...), y = ds
    block(&w.prod[OUT_STATE], w.S, 0, n_s, nx, 0, 0, 1.0, False, NULL)
    block(&w.prod[OUT_PARAMS], w.S, n_s * nx, n_s, n_p, 0, 0, 1.0, False, u)


cdef inline bint written_products(const symdae_model* km, const Scheme* c, TangentWork* w,
                                  int nd, bint use) noexcept nogil:
    """The kernel module's written-out products (symdae/model/tangent_products.py) for nd
    directions where ``use`` is set, the module has them and collect_products counted the
    entries they were written for (the same entries, in the same order: the same numbers);
    else the lists. True where every product with the state blocks the step takes is
    written out."""
    cdef int k
    cdef int which[3]
    which[0] = NEW_STATE
    which[1] = OLD_STATE
    which[2] = OUT_STATE
    w.coef[0] = c.cM
    w.coef[1] = 1.0 / c.s
    w.coef[2] = -c.ap
    for k in range(N_PRODUCTS):
        w.written[k] = NULL
    if not use or nd > SYMDAE_TANGENT_ND:
        return False
    for k in range(3):
        if km.tangent.fn[nd][k] != NULL and km.tangent.nnz[k] == w.prod[which[k]].nnz:
            w.written[which[k]] = km.tangent.fn[nd][k]
    return (w.written[NEW_STATE] != NULL and w.written[OUT_STATE] != NULL
            and (c.ap == 0.0 or w.written[OLD_STATE] != NULL))


cdef inline void product(const TangentWork* w, int k, const double* vals, const double* x,
                         double* y, int nd) noexcept nogil:
    """y += P(vals) x for product k and the nd directions (x, y by row: entry k of direction
    d at k nd + d; y overlaps neither x nor vals)."""
    cdef const Product* P = &w.prod[k]
    if w.written[k] != NULL:
        w.written[k](vals, x, y, w.coef)
    else:
        sd_product(P.nnz, P.row, P.col, P.at, P.coef, vals, x, y, nd)


cdef inline void state_blocks(const symdae_model* km, const symdae_args* x, double* J, double* P,
                              double* S) noexcept nogil:
    """The Jacobian blocks at x (the written entries of J, P, S; the rest is never read)."""
    call(km, SYMDAE_JACOBIANS, x, NULL, J)
    call(km, SYMDAE_PARAM_JACOBIANS, x, NULL, P)
    call(km, SYMDAE_OUTPUT_JACOBIANS, x, NULL, S)


cdef inline void by_row(double* T, const double* X, int stride, int size, int nd) noexcept nogil:
    """T[k nd + d] = X[d stride + k]: nd vectors of length size into by-row storage."""
    cdef int k, d
    for d in range(nd):
        for k in range(size):
            T[k * nd + d] = X[d * stride + k]


cdef inline void by_direction(double* X, const double* T, int stride, int size,
                              int nd) noexcept nogil:
    """X[d stride + k] = T[k nd + d] (the inverse of by_row)."""
    cdef int k, d
    for d in range(nd):
        for k in range(size):
            X[d * stride + k] = T[k * nd + d]


cdef inline void load_tangents(const symdae_model* km, const Tangents* t, double* T,
                               int nd) noexcept nogil:
    """The sweep's tangents t into T (dq, dv, da, dlam, dw by row)."""
    cdef int n = km.n, m = km.m
    by_row(T, t.q, t.sn, n, nd)
    by_row(T + n * nd, t.v, t.sn, n, nd)
    by_row(T + 2 * n * nd, t.a, t.sn, n, nd)
    by_row(T + 3 * n * nd, t.lam, t.sm, m, nd)
    by_row(T + (3 * n + m) * nd, t.w, t.sn, n, nd)


cdef inline void store_tangents(const symdae_model* km, const double* T, const Tangents* t,
                                int nd) noexcept nogil:
    """T (dq, dv, da, dlam, dw by row) into the sweep's tangents t."""
    cdef int n = km.n, m = km.m
    by_direction(t.q, T, t.sn, n, nd)
    by_direction(t.v, T + n * nd, t.sn, n, nd)
    by_direction(t.a, T + 2 * n * nd, t.sn, n, nd)
    by_direction(t.lam, T + 3 * n * nd, t.sm, m, nd)
    if t.w != t.a:
        by_direction(t.w, T + (3 * n + m) * nd, t.sn, n, nd)


cdef inline void tangent_step(const symdae_model* km, const Scheme* c, TangentWork* w,
                              const SparseLU* lu, const double* LU, const int* piv,
                              int nd) noexcept nogil:
    """w.T[1], the tangents of x_{i+1}, from w.T[0], those of x_i, along the nd directions
    w.D, with w.J[1], w.P[1] at x_{i+1} and w.J[0], w.P[0] at x_i."""
    cdef int n = km.n, m = km.m, nn = km.n * nd
    cdef double* T0 = w.T[0]
    cdef double* T1 = w.T[1]
    cdef double* b = w.rhs
    cdef int q = 0, v = nn, a = 2 * nn, wa = (3 * km.n + km.m) * nd
    predictor(c, T0 + q, T0 + v, T0 + wa, T0 + a, w.xnew, w.xnew + nn, nn)
    memset(b, 0, (n + m) * nd * sizeof(double))
    product(w, NEW_STATE, w.J[1], w.xnew, b, nd)
    product(w, NEW_PARAMS, w.P[1], w.D, b, nd)
    if c.ap != 0.0:
        product(w, OLD_STATE, w.J[0], T0, b, nd)
        product(w, OLD_PARAMS, w.P[0], w.D, b, nd)
    apply_many(lu, LU, piv, b, nd, w.scratch)
    # (dq, dv, da, dw, then dlam: T1 holds lam's after a's)
    sd_tangent_corrector(c.s, c.gh, c.ry, c.rp, b, w.xnew, w.xnew + nn, T0 + a, T1 + q, T1 + v,
                         T1 + a, T1 + wa, nn, m * nd)


cdef inline void output_tangents(const symdae_model* km, TangentWork* w, const double* T,
                                 int nd, double* ds) noexcept nogil:
    """ds (n_s x nd, by row) = S_x dx + S_p dp along the nd directions, at the state whose
    tangents T holds and whose blocks w.S holds."""
    memset(ds, 0, km.n_s * nd * sizeof(double))
    product(w, OUT_STATE, w.S, T, ds, nd)
    product(w, OUT_PARAMS, w.S, w.D, ds, nd)
