# Factorising the Newton matrix in a sweep: the sparse LU's preparation from the model's
# kernels (shared by the sweeps of hht.pyx and design_sweep.pyx).
from libc.string cimport memcpy

from symdae.simulation.core.kernel_api cimport symdae_args, symdae_model, SYMDAE_NEWTON
from symdae.simulation.core.scheme cimport Scheme, call
from symdae.simulation.core.sparse cimport SparseLU, analyse, symbolic, structure_of, sentinel


cdef inline int prepare_lu(const symdae_model* km, const symdae_args* x, const Scheme* c,
                           SparseLU* lu, double* K, double* B, const int* order,
                           bint have_order) noexcept nogil:
    """The sparse LU's structure from the Newton matrix at x (into K, whose structural zeros
    stay zero), and its orders: given (a run continued, or a derivative sweep of a forward
    run), else analysed from this matrix (B: scratch). Returns 0 or the vanished pivot + 1."""
    cdef int k, N = lu.N
    for k in range(N * N):
        K[k] = sentinel()
    call(km, SYMDAE_NEWTON, x, c.kw, K)
    structure_of(lu, K, km.n)
    if have_order:
        memcpy(lu.pr, order, N * sizeof(int))
        memcpy(lu.pc, order + N, N * sizeof(int))
        symbolic(lu)
        return 0
    return analyse(lu, K, B)
