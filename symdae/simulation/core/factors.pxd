# Factorising the Newton matrix in a sweep: the sparse LU's preparation from the model's
# kernels (shared by the sweeps of hht.pyx and design_sweep.pyx).
from libc.string cimport memcpy

from symdae.simulation.core.kernel_api cimport symdae_args, symdae_model, SYMDAE_NEWTON
from symdae.simulation.core.scheme cimport Scheme, call
from symdae.simulation.core.sparse cimport (SparseLU, analyse, symbolic, structure_of, sentinel,
                                            pivot_tolerance, loops_only)


cdef inline bint adopt_model_code(const symdae_model* km, SparseLU* lu) noexcept nogil:
    """Use the kernel module's written-out LU (symdae_kernels.h) where it is written for the
    orders and the structure of K that lu holds (after symbolic); else the core's loops."""
    cdef int k, N = lu.N
    loops_only(lu)
    if km.lu_factor == NULL or km.lu_nk != lu.nk:
        return False
    for k in range(N):
        if lu.pr[k] != km.lu_order[k] or lu.pc[k] != km.lu_order[N + k]:
            return False
    for k in range(lu.nk):
        if lu.kpos[k] != km.lu_kpos[k]:
            return False
    lu.mfactor = km.lu_factor
    lu.msolve = km.lu_solve
    lu.msolve_t = km.lu_solve_t
    lu.msolve_rows = km.lu_solve_rows
    return True


cdef inline int prepare_lu(const symdae_model* km, const symdae_args* x, const Scheme* c,
                           SparseLU* lu, double* K, double* B, const int* order,
                           bint have_order) noexcept nogil:
    """The sparse LU's structure from the Newton matrix at x (into K, whose structural zeros
    stay zero), and its orders: given (a run continued, or a derivative sweep of a forward
    run); else the kernel module's (lu_plan.py) where this matrix passes their pivot check,
    else analysed from this matrix (B: scratch). Returns 0 or the vanished pivot + 1."""
    cdef int k, N = lu.N
    for k in range(N * N):
        K[k] = sentinel()
    call(km, SYMDAE_NEWTON, x, c.kw, K)
    structure_of(lu, K, km.n)
    if have_order:
        memcpy(lu.pr, order, N * sizeof(int))
        memcpy(lu.pc, order + N, N * sizeof(int))
        symbolic(lu)
        adopt_model_code(km, lu)
        return 0
    if km.lu_factor != NULL:
        memcpy(lu.pr, km.lu_order, N * sizeof(int))
        memcpy(lu.pc, km.lu_order + N, N * sizeof(int))
        symbolic(lu)
        if adopt_model_code(km, lu) and lu.mfactor(K, B, pivot_tolerance()) == 0:
            return 0
        loops_only(lu)          # not stable for this matrix: the core's own orders
    return analyse(lu, K, B)
