# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled reductions over a trajectory: the least-squares sum of a fitted output and the
finiteness test of the outputs.

An evaluation runs them once right after its forward sweep, whose arrays have pushed
everything else out of the processor's caches: there each NumPy call costs tens of
microseconds (the engine mount's least-squares cost took 100 us in five such calls, against
a 1.5 ms sweep). A call here reads the samples once (twice when it adds dJ/ds too) and
allocates nothing.

The sum is NumPy's pairwise summation (numpy/_core/src/umath/loops_utils.h.src,
``pairwise_sum``: blocks of 128 in eight partial sums, halved above that) over the same
products in the same order, so the number is NumPy's ``np.sum`` bit for bit
(tests/simulation/test_reductions.py); the module is built with ``-ffp-contract=off`` so that
no product is fused into a sum (setup.py).
"""
from libc.math cimport isfinite

cdef enum:
    BLOCK = 128     # NumPy's PW_BLOCKSIZE
    UNROLL = 8


cdef inline double _term(const double[:] s, const double[:] ref, const double[:] w,
                         Py_ssize_t i) noexcept nogil:
    # LeastSquares' product: (w r) r with r = s - ref
    cdef double r = s[i] - ref[i]
    return (w[i] * r) * r


cdef double _pairwise(const double[:] s, const double[:] ref, const double[:] w,
                      Py_ssize_t i0, Py_ssize_t n) noexcept nogil:
    """NumPy's pairwise sum of the terms i0 .. i0 + n - 1."""
    cdef double acc[UNROLL]
    cdef double res
    cdef Py_ssize_t i, j, n2
    if n < UNROLL:
        res = 0.0
        for i in range(i0, i0 + n):
            res += _term(s, ref, w, i)
        return res
    if n <= BLOCK:
        for j in range(UNROLL):
            acc[j] = _term(s, ref, w, i0 + j)
        i = UNROLL
        while i < n - (n % UNROLL):
            for j in range(UNROLL):
                acc[j] += _term(s, ref, w, i0 + i + j)
            i += UNROLL
        res = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
        while i < n:
            res += _term(s, ref, w, i0 + i)
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % UNROLL
    return _pairwise(s, ref, w, i0, n2) + _pairwise(s, ref, w, i0 + n2, n - n2)


def least_squares(const double[:] s, const double[:] ref, const double[:] w,
                  double[:] g=None) -> float:
    """sum_i w_i (s_i - ref_i)^2 (without the 1/2), as ``np.sum((w * r) * r)`` computes it;
    with ``g`` also g_i += w_i r_i (dJ/ds of half the sum). Equal lengths (the caller's
    check)."""
    cdef Py_ssize_t i, n = s.shape[0]
    cdef double total
    if ref.shape[0] != n or w.shape[0] != n or (g is not None and g.shape[0] != n):
        raise ValueError(f"least_squares: lengths {n}, {ref.shape[0]}, {w.shape[0]}"
                         + ("" if g is None else f", {g.shape[0]}") + " differ")
    with nogil:
        total = _pairwise(s, ref, w, 0, n)
        if g is not None:
            for i in range(n):
                g[i] += w[i] * (s[i] - ref[i])
    return total


cdef enum:
    LANES = 8       # independent sums of the finiteness test (one chain per row waits on
                    # each addition's latency: 2-3x slower on 10 001 x 4 outputs)
    CHUNK = 512     # entries summed between two tests (a multiple of LANES)


cdef Py_ssize_t _first_nonfinite_flat(const double* x, Py_ssize_t n) noexcept nogil:
    """Index of the first non-finite x[k], k < n, or -1: the sums of 0 x over chunks of CHUNK
    (NaN exactly when a term is not finite), then the first chunk that fails entry by entry."""
    cdef double acc[LANES]
    cdef double tot
    cdef Py_ssize_t start = 0, k, j, end
    while start < n:
        end = min(start + CHUNK, n)
        for j in range(LANES):
            acc[j] = 0.0
        k = start
        while k + LANES <= end:
            for j in range(LANES):
                acc[j] += 0.0 * x[k + j]
            k += LANES
        tot = 0.0
        for j in range(LANES):
            tot += acc[j]
        while k < end:
            tot += 0.0 * x[k]
            k += 1
        if tot != tot:
            for k in range(start, end):
                if not isfinite(x[k]):
                    return k
        start = end
    return -1


def first_nonfinite(const double[:, :] S) -> tuple | None:
    """(row, column) of the first NaN or infinity of S in row order, or None."""
    cdef Py_ssize_t i, j, rows = S.shape[0], cols = S.shape[1], bad = -1
    cdef double acc
    if rows == 0 or cols == 0:
        return None
    if S.strides[1] == sizeof(double) and S.strides[0] == cols * sizeof(double):
        # C-contiguous (a sweep's outputs, a cost's dJ/dS): the rows one after the other
        with nogil:
            bad = _first_nonfinite_flat(&S[0, 0], rows * cols)
        return None if bad < 0 else (bad // cols, bad % cols)
    with nogil:
        for i in range(rows):
            # 0 * x is NaN exactly when x is not finite: one test per row
            acc = 0.0
            for j in range(cols):
                acc += 0.0 * S[i, j]
            if acc != acc:
                bad = i
                break
    if bad < 0:
        return None
    i = bad
    for j in range(cols):
        if not isfinite(S[i, j]):
            return i, j
    return None
