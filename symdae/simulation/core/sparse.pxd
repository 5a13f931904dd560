# Sparse LU of the Newton matrix with a pivot order fixed per run (KLU's refactorisation idea).
#
# The Newton matrix K of eq. (16) has the same structure at every step (the kernel never writes
# its structural zeros) and is 2-15 % nonzero for mechanisms of any size. Dense LU costs
# (n+m)^3 / 3 per step; this costs what the fill of K's structure costs.
#
# * Analysis (once per run, at its first factorisation): a column order by minimum degree on
#   the structure of K + K^T, then partial pivoting (numerical, on the values of that first K)
#   in that column order, which fixes the row order; the structure of the factors under that
#   order follows symbolically (a restart from a checkpoint and the derivative sweeps rebuild it
#   from the two orders alone).
# * Refactorisation (every other factorisation): the same orders, elimination over the factors'
#   structure only. A pivot smaller than TAU times the largest entry of its column fails the
#   stability check; that one factorisation is then the dense LU with partial pivoting of
#   dense.pxd (a deterministic function of K, so the forward, tangent and adjoint sweeps make
#   the same choice at the same step and their factorisations agree bit for bit).
#
# B, the factors, is stored densely (n+m)^2 (unit lower L below the diagonal, U above it and
# the reciprocals of U's pivots on it), so a stored factorisation is one matrix per step as
# before; piv has n+m+1 entries, the last one saying which kind it is. The solves multiply by
# the stored reciprocal where they would divide by the pivot: a division's latency is four
# times a multiplication's, and a triangular solve's divisions wait on each other (the
# written-out solve on the engine mount spent three quarters of its time in them).
#
# A kernel module may carry refactor, solve and solve_t written out for one pair of orders
# (symdae/model/lu_plan.py: the same operations with constant indices). Where a run's orders
# are those (factors.pxd proposes them at the first factorisation), the SparseLU holds that
# code (mfactor, msolve, msolve_t, msolve_rows) and factorize/apply call it instead of the loops
# below.
from libc.math cimport fabs
from libc.string cimport memcpy, memset

from symdae.simulation.core.dense cimport lu_factor, lu_solve, lu_solve_t, DBL_EPSILON, DBL_MAX
from symdae.simulation.core.kernel_api cimport (SYMDAE_LU_UNSTABLE, symdae_lu_factor,
                                                symdae_lu_solve, symdae_lu_solve_rows)
from symdae.simulation.core.scheme cimport Arena, take, take_int

cdef enum:
    SPARSE = 0
    DENSE = 1
    UNSTABLE = SYMDAE_LU_UNSTABLE


cdef inline double pivot_tolerance() noexcept nogil:
    return 1e-3         # KLU's default partial-pivoting tolerance


cdef inline double sentinel() noexcept nogil:
    # written into K before the newton kernel runs: what is still there was not written,
    # a structural zero (kernels never write those)
    return -1.7976931348623157e308


cdef struct SparseLU:
    int N
    int* pr          # row k of the permuted matrix is row pr[k] of K
    int* pc          # column k of the permuted matrix is column pc[k] of K
    int* lptr        # rows i > k with L[i, k] != 0: lidx[lptr[k] : lptr[k + 1]]
    int* lidx
    int* uptr        # columns j > k with U[k, j] != 0: uidx[uptr[k] : uptr[k + 1]]
    int* uidx
    int* zpos        # every position of B the factors use (B is zeroed there, not all N^2)
    int nz
    int* kpos        # K's structural nonzeros (flat index in K) and their place in B
    int* bpos
    int nk
    int* KS          # N x N: K's structure
    int* cons        # N: 1 for a column some constraint row of K reaches (rows >= n_dyn)
    int* nrow        # the nonzeros of K in a dynamic row and a constrained column: their
    int* nidx        # row and flat index (newton.pxd's round-off model reads these)
    int nn
    int* S           # N x N scratch
    int* deg         # N scratch
    double* x        # N scratch for the solves
    symdae_lu_factor mfactor    # the kernel module's code for these orders, or NULL
    symdae_lu_solve msolve
    symdae_lu_solve msolve_t
    symdae_lu_solve_rows msolve_rows


cdef inline void carve_sparse(Arena* ar, SparseLU* a, int N) noexcept nogil:
    """The buffers of an N x N sparse LU, from a sweep's workspace (scheme.pxd)."""
    a.N = N
    a.pr = take_int(ar, N)
    a.pc = take_int(ar, N)
    a.lptr = take_int(ar, N + 1)
    a.uptr = take_int(ar, N + 1)
    a.lidx = take_int(ar, N * N)
    a.uidx = take_int(ar, N * N)
    a.zpos = take_int(ar, N * N)
    a.kpos = take_int(ar, N * N)
    a.bpos = take_int(ar, N * N)
    a.KS = take_int(ar, N * N)
    a.cons = take_int(ar, N)
    a.nrow = take_int(ar, N * N)
    a.nidx = take_int(ar, N * N)
    a.S = take_int(ar, N * N)
    a.deg = take_int(ar, N)
    a.x = take(ar, N)
    loops_only(a)


cdef inline void loops_only(SparseLU* a) noexcept nogil:
    """Factorise and solve with the loops below (no kernel module's code)."""
    a.mfactor = NULL
    a.msolve = NULL
    a.msolve_t = NULL
    a.msolve_rows = NULL


cdef inline void structure_of(SparseLU* a, double* K, int n_dyn) noexcept nogil:
    """a.KS[i, j] = 1 where the newton kernel wrote K (the caller filled K with sentinel()
    before calling it); the unwritten entries of K are set to 0. a.cons: the columns the rows
    from n_dyn on (the constraints) reach."""
    cdef int i, k
    for k in range(a.N * a.N):
        if K[k] == sentinel():
            a.KS[k] = 0
            K[k] = 0.0
        else:
            a.KS[k] = 1
    for k in range(a.N):
        a.cons[k] = 0
        for i in range(n_dyn, a.N):
            if a.KS[i * a.N + k]:
                a.cons[k] = 1
    a.nn = 0
    for i in range(n_dyn):
        for k in range(n_dyn):
            if a.KS[i * a.N + k] and a.cons[k]:
                a.nrow[a.nn] = i
                a.nidx[a.nn] = i * a.N + k
                a.nn += 1


cdef inline void gather_maps(SparseLU* a, const int* KS) noexcept nogil:
    """kpos/bpos: where each structural nonzero of K goes in the permuted matrix."""
    cdef int i, j, N = a.N, n = 0
    for i in range(N):
        for j in range(N):
            if KS[a.pr[i] * N + a.pc[j]]:
                a.kpos[n] = a.pr[i] * N + a.pc[j]
                a.bpos[n] = i * N + j
                n += 1
    a.nk = n


cdef inline void symbolic(SparseLU* a) noexcept nogil:
    """The structure of the factors of K permuted by (pr, pc): lptr/lidx, uptr/uidx, zpos."""
    cdef int i, j, k, N = a.N, nl = 0, nu = 0, nz = 0
    cdef int* S = a.S
    cdef const int* KS = a.KS
    for i in range(N):
        for j in range(N):
            S[i * N + j] = KS[a.pr[i] * N + a.pc[j]]
    for k in range(N):
        S[k * N + k] = 1
        for i in range(k + 1, N):
            if S[i * N + k]:
                for j in range(k + 1, N):
                    if S[k * N + j]:
                        S[i * N + j] = 1
    for k in range(N):
        a.lptr[k] = nl
        a.uptr[k] = nu
        for i in range(k + 1, N):
            if S[i * N + k]:
                a.lidx[nl] = i
                nl += 1
        for j in range(k + 1, N):
            if S[k * N + j]:
                a.uidx[nu] = j
                nu += 1
    a.lptr[N] = nl
    a.uptr[N] = nu
    for k in range(N * N):
        if S[k]:
            a.zpos[nz] = k
            nz += 1
    a.nz = nz
    gather_maps(a, KS)


cdef inline void min_degree(SparseLU* a) noexcept nogil:
    """Column order: minimum degree on the structure of K + K^T (a greedy elimination; the
    matrices are at most a few hundred rows, and this runs once per run)."""
    cdef int i, j, k, best, N = a.N
    cdef int* G = a.S
    cdef const int* KS = a.KS
    for i in range(N):
        for j in range(N):
            G[i * N + j] = 1 if (i != j and (KS[i * N + j] or KS[j * N + i])) else 0
    for i in range(N):
        a.deg[i] = 0
        for j in range(N):
            a.deg[i] += G[i * N + j]
    for k in range(N):
        best = -1
        for i in range(N):
            if a.deg[i] >= 0 and (best < 0 or a.deg[i] < a.deg[best]):
                best = i
        a.pc[k] = best
        # eliminate best: its neighbours become a clique
        for i in range(N):
            if G[best * N + i] and a.deg[i] >= 0:
                for j in range(N):
                    if j != i and G[best * N + j] and a.deg[j] >= 0 and not G[i * N + j]:
                        G[i * N + j] = 1
                        a.deg[i] += 1
        for i in range(N):
            if G[best * N + i] and a.deg[i] >= 0:
                G[i * N + best] = 0
                a.deg[i] -= 1
        a.deg[best] = -1


cdef inline int pivot_rows(SparseLU* a, const double* K, double* B) noexcept nogil:
    """Row order: partial pivoting on K[:, pc] (values of this K). Returns 0 or k + 1 when
    column k has no nonzero pivot left. B is scratch here."""
    cdef int i, j, k, p, N = a.N, t
    cdef double amax, v, l
    for i in range(N):
        a.pr[i] = i
        for j in range(N):
            B[i * N + j] = K[i * N + a.pc[j]]
    for k in range(N):
        p = -1
        amax = 0.0
        for i in range(k, N):
            v = fabs(B[i * N + k])
            if v > amax:
                amax = v
                p = i
        if p < 0:
            return k + 1
        if p != k:
            t = a.pr[k]
            a.pr[k] = a.pr[p]
            a.pr[p] = t
            for j in range(N):
                v = B[k * N + j]
                B[k * N + j] = B[p * N + j]
                B[p * N + j] = v
        for i in range(k + 1, N):
            if B[i * N + k] != 0.0:
                l = B[i * N + k] / B[k * N + k]
                for j in range(k + 1, N):
                    B[i * N + j] -= l * B[k * N + j]
    return 0


cdef inline int refactor(const SparseLU* a, const double* K, double* B) noexcept nogil:
    """LU of K with the analysis' orders into B (the pivots' reciprocals on its diagonal).
    Returns 0, UNSTABLE (a pivot below TAU times its column, or one whose reciprocal
    overflows: the caller falls back to dense LU), -1 (NaN or infinity) or k + 1 (a zero
    pivot)."""
    cdef int i, k, e, N = a.N, row, col
    cdef double piv, inv, l, cmax, v
    cdef const int* L
    cdef const int* U
    cdef int nl, nu
    for e in range(a.nz):
        B[a.zpos[e]] = 0.0
    for e in range(a.nk):
        v = K[a.kpos[e]]
        if not (fabs(v) <= DBL_MAX):
            return -1
        B[a.bpos[e]] = v
    for k in range(N):
        piv = B[k * N + k]
        L = a.lidx + a.lptr[k]
        nl = a.lptr[k + 1] - a.lptr[k]
        U = a.uidx + a.uptr[k]
        nu = a.uptr[k + 1] - a.uptr[k]
        cmax = 0.0
        for i in range(nl):
            cmax = max(cmax, fabs(B[L[i] * N + k]))
        if piv == 0.0:
            return UNSTABLE if cmax > 0.0 else k + 1
        if fabs(piv) < pivot_tolerance() * cmax:
            return UNSTABLE
        inv = 1.0 / piv
        if fabs(inv) > DBL_MAX:     # a subnormal pivot: the dense LU divides by it instead
            return UNSTABLE
        B[k * N + k] = inv      # the solves multiply by it (see the top of this file)
        for i in range(nl):
            row = L[i] * N
            l = B[row + k] * inv
            B[row + k] = l
            for e in range(nu):     # a zero l leaves the row as it is (finite entries)
                col = U[e]
                B[row + col] -= l * B[k * N + col]
    return 0


cdef inline void solve(const SparseLU* a, const double* B, double* b) noexcept nogil:
    """b <- K^{-1} b with the factors B of refactor()."""
    cdef int i, k, e, N = a.N
    cdef double s
    cdef double* x = a.x
    for k in range(N):
        x[k] = b[a.pr[k]]
    for k in range(N):
        s = x[k]
        if s != 0.0:
            for e in range(a.lptr[k], a.lptr[k + 1]):
                i = a.lidx[e]
                x[i] -= B[i * N + k] * s
    for k in range(N - 1, -1, -1):
        s = x[k]
        for e in range(a.uptr[k], a.uptr[k + 1]):
            s -= B[k * N + a.uidx[e]] * x[a.uidx[e]]
        x[k] = s * B[k * N + k]
    for k in range(N):
        b[a.pc[k]] = x[k]


cdef inline void solve_t(const SparseLU* a, const double* B, double* b) noexcept nogil:
    """b <- K^{-T} b with the factors B of refactor() (B = P K Q = L U, so K^T = Q U^T L^T P)."""
    cdef int i, k, e, N = a.N
    cdef double s
    cdef double* x = a.x
    for k in range(N):
        x[k] = b[a.pc[k]]
    for k in range(N):               # U^T z = x
        s = x[k] * B[k * N + k]
        x[k] = s
        if s != 0.0:
            for e in range(a.uptr[k], a.uptr[k + 1]):
                x[a.uidx[e]] -= B[k * N + a.uidx[e]] * s
    for k in range(N - 1, -1, -1):   # L^T y = z
        s = x[k]
        for e in range(a.lptr[k], a.lptr[k + 1]):
            i = a.lidx[e]
            s -= B[i * N + k] * x[i]
        x[k] = s
    for k in range(N):
        b[a.pr[k]] = x[k]


cdef inline int analyse(SparseLU* a, const double* K, double* B) noexcept nogil:
    """Fix both orders from this K (its structure in a.KS): minimum degree, then partial
    pivoting. Returns 0 or k + 1 if K is structurally or numerically singular at column k."""
    cdef int r
    min_degree(a)
    r = pivot_rows(a, K, B)
    if r != 0:
        return r
    symbolic(a)
    return 0


# ---------------------------------------------------------------------------- one interface
# A factorisation is (B, piv): piv[N] = SPARSE (B from refactor with the analysis' orders) or
# DENSE (B, piv[:N] from dense.pxd's lu_factor of K).

cdef inline int factorize(const SparseLU* a, const double* K, double* B,
                          int* piv) noexcept nogil:
    """Factorise K into (B, piv): sparse, or dense where the sparse pivots are not stable.
    Returns 0, -1 (not finite) or k + 1 (pivot k vanished)."""
    cdef int r = a.mfactor(K, B, pivot_tolerance()) if a.mfactor != NULL else refactor(a, K, B)
    if r != UNSTABLE:
        piv[a.N] = SPARSE
        return r
    piv[a.N] = DENSE
    memcpy(B, K, a.N * a.N * sizeof(double))
    return lu_factor(B, piv, a.N)


cdef inline void apply(const SparseLU* a, const double* B, const int* piv,
                       double* b) noexcept nogil:
    """b <- K^{-1} b."""
    if piv[a.N] == SPARSE:
        if a.msolve != NULL:
            a.msolve(B, b)
        else:
            solve(a, B, b)
    else:
        lu_solve(B, piv, b, a.N)


cdef inline void apply_t(const SparseLU* a, const double* B, const int* piv,
                         double* b) noexcept nogil:
    """b <- K^{-T} b."""
    if piv[a.N] == SPARSE:
        if a.msolve_t != NULL:
            a.msolve_t(B, b)
        else:
            solve_t(a, B, b)
    else:
        lu_solve_t(B, piv, b, a.N)


cdef inline void apply_many(const SparseLU* a, const double* B, const int* piv, double* b,
                            int nd, double* x) noexcept nogil:
    """b <- K^{-1} b for nd right-hand sides stored by row (entry k of right-hand side d at
    b[k * nd + d]); x: N nd scratch. Each right-hand side takes the same operations whatever
    nd is: apply()'s where the factorisation is dense or the kernel module's written-out
    solve is in use (one right-hand side at a time: that straight-line code beats the loops
    below even for several, the engine mount's four directions 1 100 -> 270 instructions per
    step; on the strided entries in place, which spares copying each one in and out: 646 ->
    290), else those of the loops below, whose loops over the right-hand sides are innermost
    (apply()'s operations in another order: the same numbers)."""
    cdef int i, k, e, d, N = a.N, j
    cdef double l
    if piv[N] == SPARSE and a.msolve_rows != NULL:
        for d in range(nd):
            a.msolve_rows(B, b + d, nd)
        return
    if piv[N] != SPARSE or a.msolve != NULL:
        for d in range(nd):
            for k in range(N):
                x[k] = b[k * nd + d]
            if piv[N] != SPARSE:
                lu_solve(B, piv, x, N)
            else:
                a.msolve(B, x)
            for k in range(N):
                b[k * nd + d] = x[k]
        return
    for k in range(N):
        memcpy(x + k * nd, b + a.pr[k] * nd, nd * sizeof(double))
    for k in range(N):
        for e in range(a.lptr[k], a.lptr[k + 1]):
            i = a.lidx[e]
            l = B[i * N + k]
            for d in range(nd):      # apply() skips x[k] = 0: the same numbers (K is finite)
                x[i * nd + d] -= l * x[k * nd + d]
    for k in range(N - 1, -1, -1):
        for e in range(a.uptr[k], a.uptr[k + 1]):
            j = a.uidx[e]
            l = B[k * N + j]
            for d in range(nd):
                x[k * nd + d] -= l * x[j * nd + d]
        l = B[k * N + k]            # the pivot's reciprocal
        for d in range(nd):
            x[k * nd + d] *= l
    for k in range(N):
        memcpy(b + a.pc[k] * nd, x + k * nd, nd * sizeof(double))
