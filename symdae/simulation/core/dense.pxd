# Dense linear algebra for the HHT core: inline so that it compiles into the sweeps.
#
# Matrices are row-major. Systems of size <= SMALL_LU use a plain LU with partial pivoting
# (2.3x faster than a LAPACK call at 5 x 5, still ahead up to N = 32: benchmarks/bench_linalg.py);
# larger ones use LAPACK dgetrf/dgetrs from scipy.linalg.cython_lapack. A row-major matrix is
# the column-major storage of its transpose, so LAPACK factorises K^T and the two solves swap
# their 'N'/'T' flags. Which path was taken depends only on N, so a factorisation is always
# solved with the matching routine.
from libc.math cimport fabs
from scipy.linalg.cython_lapack cimport dgetrf, dgetrs

cdef enum:
    SMALL_LU = 32

cdef extern from "float.h":
    double DBL_EPSILON
    double DBL_MAX


cdef inline double max_abs(const double* A, int size) noexcept nogil:
    cdef double m = 0.0, x
    cdef int k
    for k in range(size):
        x = fabs(A[k])
        if x > m or x != x:
            m = x
    return m


cdef inline int lu_factor(double* A, int* piv, int N) noexcept nogil:
    """Factorise the row-major N x N matrix A in place.

    Returns 0; k + 1 if pivot k is zero or below N * eps * max|A| (numerically singular);
    -1 if A holds a NaN or an infinity.
    """
    cdef int i, j, k, p, info = 0
    cdef double amax, x, l, inv, tmp
    cdef double big = max_abs(A, N * N)
    cdef double tiny = N * DBL_EPSILON * big
    if N == 0:
        return 0
    if not (big <= DBL_MAX):
        return -1
    if N > SMALL_LU:
        dgetrf(&N, &N, A, &N, piv, &info)
        if info != 0:
            return info
        for k in range(N):
            if not (fabs(A[k * N + k]) > tiny):
                return k + 1
        return 0
    for k in range(N):
        p = k
        amax = fabs(A[k * N + k])
        for i in range(k + 1, N):
            x = fabs(A[i * N + k])
            if x > amax:
                amax = x
                p = i
        piv[k] = p
        if not (amax > tiny):
            return k + 1
        if p != k:
            for j in range(N):
                tmp = A[k * N + j]
                A[k * N + j] = A[p * N + j]
                A[p * N + j] = tmp
        inv = 1.0 / A[k * N + k]
        for i in range(k + 1, N):
            l = A[i * N + k] * inv
            A[i * N + k] = l
            if l != 0.0:
                for j in range(k + 1, N):
                    A[i * N + j] -= l * A[k * N + j]
    return 0


cdef inline void lu_solve(const double* LU, const int* piv, double* b, int N) noexcept nogil:
    """Solve K x = b in place, LU from lu_factor(K)."""
    cdef int i, j, k, one = 1, info = 0
    cdef double s, tmp
    cdef char trans = b'T'
    if N == 0:
        return
    if N > SMALL_LU:
        dgetrs(&trans, &N, &one, <double*>LU, &N, <int*>piv, b, &N, &info)
        return
    for k in range(N):
        if piv[k] != k:
            tmp = b[k]
            b[k] = b[piv[k]]
            b[piv[k]] = tmp
    for i in range(1, N):
        s = b[i]
        for j in range(i):
            s -= LU[i * N + j] * b[j]
        b[i] = s
    for i in range(N - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, N):
            s -= LU[i * N + j] * b[j]
        b[i] = s / LU[i * N + i]


cdef inline void lu_solve_t(const double* LU, const int* piv, double* b, int N) noexcept nogil:
    """Solve K^T x = b in place, LU from lu_factor(K)."""
    cdef int i, j, k, one = 1, info = 0
    cdef double s, tmp
    cdef char trans = b'N'
    if N == 0:
        return
    if N > SMALL_LU:
        dgetrs(&trans, &N, &one, <double*>LU, &N, <int*>piv, b, &N, &info)
        return
    # K = P^T L U  =>  K^T = U^T L^T P: solve U^T z = b, L^T y = z, x = P^T y.
    for i in range(N):
        s = b[i]
        for j in range(i):
            s -= LU[j * N + i] * b[j]
        b[i] = s / LU[i * N + i]
    for i in range(N - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, N):
            s -= LU[j * N + i] * b[j]
        b[i] = s
    for k in range(N - 1, -1, -1):
        if piv[k] != k:
            tmp = b[k]
            b[k] = b[piv[k]]
            b[piv[k]] = tmp


cdef inline void gemv(const double* A, int rows, int cols, const double* x, double* y,
                      double alpha) noexcept nogil:
    """y += alpha A x for a row-major rows x cols matrix A."""
    cdef int i, j
    cdef double s
    for i in range(rows):
        s = 0.0
        for j in range(cols):
            s += A[i * cols + j] * x[j]
        y[i] += alpha * s


cdef inline void gemv_t(const double* A, int rows, int cols, const double* x, double* y,
                        double alpha) noexcept nogil:
    """y += alpha A^T x for a row-major rows x cols matrix A."""
    cdef int i, j
    cdef double xi
    for i in range(rows):
        xi = alpha * x[i]
        if xi != 0.0:
            for j in range(cols):
                y[j] += A[i * cols + j] * xi
