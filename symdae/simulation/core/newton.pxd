# One step i -> i+1 of the forward sweep (either scheme of scheme.pxd): Newton on
# y = (a_{i+1}, lam_{i+1}).
#
# Its common path has a compiled twin in every kernel module that has the written-out LU
# (compiled_steps.h: the same operations on local arrays, for the module's sizes): a change to
# the step's arithmetic or tests here must be made there too, and
# tests/simulation/test_compiled_steps.py compares the two bit for bit.
#
# Newton starts from (a, lam) extrapolated quadratically from the last three states (constant,
# then linear, over a run's first two steps: extrapolate), and its iteration matrix is K of
# eq. (16) evaluated and factorised there, at the start value (simplified Newton). The start
# value is within O(h^3) of the step's solution, the last accepted state O(h) away from it:
# K taken there contracts so much faster that it saves more iterations than the factorisation
# costs (four-cylinder TVD: 3.7 -> 2.0 residuals per step and no refreshes instead of 0.37 per
# step; engine mount: 2.9 -> 2.0), the choice of the generalized-alpha codes for multibody
# systems. K is refreshed at the current iterate when the measured contraction rate theta
# cannot reach the tolerance within k = km.refresh_horizon more iterations (norm * theta^k > 1)
# or the correction grows. k is what a refresh is worth in iterations: 3 where K comes from its
# own kernel (about the cost of a residual), more where it is a vector-mode pass over the whole
# residual program (graph modules, emit.py). Where the extrapolation overshoots and Newton
# fails from there, or converges to a root far from it (far_root), the forward sweep solves
# the step once more from the last state's (a, lam) (order 0: hht.pyx). The derivative
# sweeps need K at the accepted states: they factorise it there (or the forward sweep does,
# storing it: hht.pyx).
#
# A step is accepted at the first iterate y that passes either test:
#  (a) the next correction is small: max_k |dy_k| / w_k <= 1 with
#      w_k = rtol |y_k| + 10 (f_k + eps max|a|) for accelerations, where f_k is the rounding
#      of q_k = qhat_k + s a_k (scheme.pxd) divided by s (q cannot resolve a better than that),
#      and w_k = rtol |y_k| + 10 eps max|lam| for multipliers;
#  (b) the residual is at its round-off level: |R_r| <= 4 nu_r for every row, where nu_r is the
#      rounding of row r's own terms (the residual_magnitude kernel: a constraint's constants
#      count, not only the coordinates; q and v with the rounding of the sums they come from,
#      see residual_noise), evaluated at the step's first corrected iterate (the extrapolated
#      start can be far off when a and lam oscillate) and used from there on, and at the
#      first iterate of the next step;
#  (c) it stagnates at the round-off level: with a matrix refreshed at the current iterate
#      the scaled residual max_r |R_r| / nu_r no longer halves, and it is below 64: the
#      iteration is limited by rounding, not by the matrix.
# The round-off model scales with each row's own terms, so it holds wherever the coordinates
# are (a mechanism passing through the origin, or far from it) and for every h. It has a floor,
# the smallest normal number DBL_MIN: below it doubles are subnormal, their rounding is absolute
# (not eps-relative) and eps times a subnormal size underflows to 0, so a damped model decaying
# to rest would otherwise never pass test (b).
#
# The max-norms (residual_at, noise_ratio, correction_norm) are NaN when any entry is: a
# running max `m = x if x > m else m` is one maxsd instruction, where the comparison-and-blend
# that would also carry a NaN along is a chain of four that the loop waits on at every entry
# (a quarter of the TVD's Newton loop); the NaN goes into a flag beside it instead. Systems of
# 16 rows or more take these maxima in vector lanes (vector_ops.h).
#
# Switches (non-smooth residuals: sign, Max, Piecewise, ...): K holds the derivative of the
# active branch, so a switch inside a step shows as poor contraction and refreshes K at the
# current iterate (the refresh when the active set changes). In a model whose residual has
# terms that jump (km.jumps: sign, Heaviside, Piecewise), when the step has no root on
# either branch (the jump carries each branch's Newton root onto the other branch), the
# full-Newton corrections reverse without shrinking, far above round-off; switch_search then
# bisects the segment between the two iterates for the switching point and accepts it by test
# (b): there the switching argument is at its rounding and the round-off model (roundoff.py)
# makes the switch undetermined by its jump. Such a step ends exactly on a switch. A search
# that finds no switching point hands the step back to Newton (once per step).
from libc.math cimport fabs, isfinite, INFINITY, NAN
from libc.string cimport memcpy

from symdae.simulation.core.kernel_api cimport (symdae_args, symdae_model, SYMDAE_RESIDUAL, SYMDAE_NEWTON,
                                     SYMDAE_RESIDUAL_MAGNITUDE)
from symdae.simulation.core.dense cimport DBL_EPSILON
from symdae.simulation.core.scheme cimport (Scheme, predictor, call, time_terms, state_terms,
                                            sd_corrector, sd_residual_rows, sd_predictor_sizes,
                                            sd_corrector_sizes, sd_correction_norm,
                                            sd_within, sd_noise_rows, sd_floor, sd_extrapolate)
from symdae.simulation.core.sparse cimport SparseLU, factorize, apply

cdef extern from "float.h":
    double DBL_MIN

cdef enum Status:
    OK = 0
    NEWTON_FAILED = 1
    SINGULAR = 2
    NOT_FINITE = 3

cdef enum:
    FLOOR_FACTOR = 10    # round-off floor of test (a), in units of the rounding of a
    NOISE_FACTOR = 4     # test (b): residual within this many times its round-off level
    STALL_FACTOR = 64    # test (c): stagnation accepted below this many times that level
    SWITCH_HALVINGS = 64 # switch_search: from a step's change of a down to its rounding
    FAR_FACTOR = 10      # far_root: a miss of the extrapolation this many times a's change


cdef struct NewtonWork:
    double* res      # [Ma, g, C] at the current iterate (2n + m)
    double* mag      # the size of their terms (2n + m)
    double* qsb      # qhat's terms |q_i| + h |v_i| + |ca a_i|, vhat's |v_i| + |cv1 a_i| (n each)
    double* vsb
    double* sz       # the (qs, vs, switch) weights of residual_magnitude (2n + 1)
    double* gprev    # g_i (n)
    double* qc       # q, v of the current iterate (n each)
    double* vc
    double* qh       # predictors qhat, vhat (n each)
    double* vh
    double* R        # residual, correction, iterate, round-off levels, scratch (nm each)
    double* dy
    double* y
    double* y0       # the start value (extrapolated) of the step's Newton iterations
    double* nu       # round-off level of each residual row
    double* fq       # rounding of (a, lam) that q's rounding implies
    double* K        # the iteration matrix (nm x nm): at the start value, or refreshed
    double* LUr      # its factorisation (nm x nm) and pivots (nm + 1)
    int* pr
    double* tau      # time terms at t_{i+1}
    double* st       # state terms at the current iterate (n_st; x.st points at them)
    bint all_terms   # ... all of them (the sweep stores them for derivative sweeps), else
                     # the forward ones the Newton iterations read
    double* ys       # switch_search: the segment's ends, the previous correction and the
                     # iterate it started from (4 nm)


cdef struct StepOutcome:
    int iterations       # residual evaluations
    int factorizations   # of K: at the start value, and at each refresh
    int refreshes        # Jacobian refreshes (at an iterate after the first)
    int pivot            # vanished pivot of a refreshed matrix, or -1
    double first_norm    # residual max-norm at the first iterate
    double last_norm     # ... at the last
    double noise_ratio   # max_r |R_r| / nu_r at the last iterate of a step that failed
                         # (or that test (c) or switch_search accepted; tests (a) and (b)
                         # leave it: its divisions cost, and only a failure's report reads it)
    bint on_switch       # accepted by switch_search: nu holds the switch's jump


cdef inline int factor_into(const symdae_model* km, const symdae_args* x, const double* kw,
                            const SparseLU* a, double* K, double* LU, int* piv) noexcept nogil:
    """Evaluate the Newton matrix at x into K and factorise it into (LU, piv) (sparse.pxd).
    K's structural zeros stay zero: the kernel never writes them."""
    call(km, SYMDAE_NEWTON, x, kw, K)
    return factorize(a, K, LU, piv)


cdef inline void residual_noise(const symdae_model* km, const symdae_args* x, const Scheme* c,
                                const SparseLU* lu, NewtonWork* w,
                                double switches=0.0) noexcept nogil:
    """nu_r <- round-off level of residual row r at the iterate x of a step.

    Each row rounds like eps times the size of its own terms (the residual_magnitude kernel),
    where q and v count with the size of the terms they are summed from:
    q_{i+1} = qhat + s a with qhat = q_i + h v_i + ca w_i + cq a_i carries the rounding of
    |q_i| + h |v_i| + |ca w_i| + |cq a_i| + s |a|, not of q (which may cross zero); v_{i+1}
    likewise.
    fq: what that rounding of q means for a (divided by s), the floor of test (a).
    A constraint row sees a only through q, so it fixes a coordinate's acceleration only to
    fq; every Newton update then moves a by up to that much along the constrained
    coordinates, which the dynamic rows see through K: their floor gains |K_rk| fq_k for each
    coordinate k a constraint involves (K: the iteration matrix, w.K; those structural
    nonzeros only, lu.nidx).
    """
    cdef int e, idx, n = km.n, m = km.m, nm = km.n + km.m
    sd_corrector_sizes(c.s, c.gh, x.a, w.qsb, w.vsb, w.sz, w.sz + n, n)
    w.sz[2 * n] = switches      # 1: a switch at round-off counts its jump (switch_search)
    # w.mag was zeroed when it was made: the kernel assigns the same entries every time and
    # never writes its structural zeros (symdae_kernels.h)
    call(km, SYMDAE_RESIDUAL_MAGNITUDE, x, w.sz, w.mag)
    sd_noise_rows(c.cM, 1.0 + fabs(c.ap), c.s, w.mag, w.sz, x.lam, w.nu, w.fq, n, m)
    for e in range(lu.nn):
        idx = lu.nidx[e]
        w.nu[lu.nrow[e]] += fabs(w.K[idx]) * w.fq[idx - lu.nrow[e] * nm]
    sd_floor(DBL_MIN, w.nu, nm)     # the floor (see the top of this file)


cdef inline void term_sizes(const Scheme* c, const double* q, const double* v, const double* wa,
                            const double* a, NewtonWork* w, int n) noexcept nogil:
    """The sizes of the terms of qhat and vhat from state i (see residual_noise)."""
    sd_predictor_sizes(c.h, c.ca, c.cq, c.cv1, c.cvq, q, v, wa, a, w.qsb, w.vsb, n)


cdef inline bint far_root(const NewtonWork* w, const double* ai, int n) noexcept nogil:
    """Whether Newton accepted accelerations w.y farther from its extrapolated start w.y0
    than FAR_FACTOR times the start is from state i's ai: on a smooth trajectory the
    extrapolation errs by O(h^3) where a moves by O(h) per step, so such a miss is a jump (a
    switch, an impact) or a root of the step's equations far from the trajectory, which an
    extrapolation overshooting a fast change can lead Newton to (a whipping chain at a large
    h); the forward sweep then solves the step from state i's a (hht.pyx). Max-norms over
    the accelerations (w.y is finite: Newton accepted it)."""
    cdef int k
    cdef double miss = 0.0, moved = 0.0, d
    for k in range(n):
        d = fabs(w.y[k] - w.y0[k])
        miss = d if d > miss else miss
        d = fabs(w.y0[k] - ai[k])
        moved = d if d > moved else moved
    return not (miss <= FAR_FACTOR * moved)


cdef inline double residual_at(const symdae_model* km, symdae_args* x, const Scheme* c,
                               NewtonWork* w, StepOutcome* out) noexcept nogil:
    """R at the iterate w.y (q, v from it; x points at w.qc, w.vc, w.y), the Newton right-hand
    side w.dy = -R, and R's max-norm (one pass per block: at n of a few, loop overhead is
    much of the work). The state terms there too, which the round-off level, a refreshed
    matrix and, once accepted, the state's outputs and matrix read (x.st)."""
    sd_corrector(c.s, c.gh, w.y, w.qh, w.vh, w.qc, w.vc, km.n)
    state_terms(km, x, w.st)
    call(km, SYMDAE_RESIDUAL, x, NULL, w.res)
    out.iterations += 1
    return sd_residual_rows(c.cM, c.ap, c.s, w.res, w.gprev, w.R, w.dy, km.n, km.m)


cdef inline double noise_ratio(const NewtonWork* w, int nm) noexcept nogil:
    """max_r |R_r| / nu_r, the measure of tests (b) and (c)."""
    cdef int k
    cdef double ratio = 0.0, wk
    cdef bint nan = False
    for k in range(nm):
        wk = fabs(w.R[k])
        wk = wk / w.nu[k] if w.nu[k] > 0.0 else (0.0 if wk == 0.0 else INFINITY)
        ratio = wk if wk > ratio else ratio
        nan = nan or wk != wk
    return NAN if nan else ratio


cdef inline bint at_noise(const NewtonWork* w, int nm) noexcept nogil:
    """Test (b), noise_ratio(w, nm) <= NOISE_FACTOR, without its divisions: every nu_r is
    at least DBL_MIN (or infinite) and NOISE_FACTOR a power of two, so NOISE_FACTOR nu_r is
    exact and |R_r| / nu_r rounds to at most NOISE_FACTOR exactly when |R_r| is at most it
    (a NaN fails both)."""
    return sd_within(w.R, w.nu, NOISE_FACTOR, nm)


cdef inline int switch_search(const symdae_model* km, symdae_args* x, const Scheme* c,
                              NewtonWork* w, const SparseLU* lu, const double* LU,
                              const int* piv, StepOutcome* out) noexcept nogil:
    """Bisect the segment [lo, hi] = [w.y - previous correction, w.y] between two iterates on
    different branches for the switching point, and accept it by test (b) (see the header).
    A midpoint is on lo's branch when its Newton correction points towards hi, as lo's did."""
    cdef int k, it, nm = km.n + km.m
    cdef double* lo = w.ys
    cdef double* hi = w.ys + nm
    cdef double side, rnorm
    for k in range(nm):
        hi[k] = w.y[k]
        lo[k] = w.y[k] - w.ys[2 * nm + k]
    memcpy(w.ys + 3 * nm, w.y, nm * sizeof(double))
    for it in range(SWITCH_HALVINGS):
        for k in range(nm):
            w.y[k] = 0.5 * (lo[k] + hi[k])
        rnorm = residual_at(km, x, c, w, out)
        residual_noise(km, x, c, lu, w, 1.0)    # at each midpoint: it may sit on the switch
        out.last_norm = rnorm
        out.noise_ratio = noise_ratio(w, nm)
        if not isfinite(rnorm):
            return NOT_FINITE
        if out.noise_ratio <= NOISE_FACTOR:
            out.on_switch = True
            return OK
        for k in range(nm):
            w.dy[k] = -w.R[k]
        apply(lu, LU, piv, w.dy)
        side = 0.0
        for k in range(nm):
            side += w.dy[k] * (hi[k] - lo[k])
        memcpy(lo if side > 0.0 else hi, w.y, nm * sizeof(double))
    memcpy(w.y, w.ys + 3 * nm, nm * sizeof(double))    # no switching point: back to Newton
    return NEWTON_FAILED


cdef inline double correction_norm(const NewtonWork* w, const Scheme* c, double rtol, int n,
                                   int nm) noexcept nogil:
    """max_k |dy_k| / w_k, the weights of test (a)."""
    return sd_correction_norm(rtol, FLOOR_FACTOR, FLOOR_FACTOR * DBL_EPSILON, w.y, w.fq, w.dy, n,
                              nm - n)


cdef inline int newton_step(const symdae_model* km, symdae_args* x, const Scheme* c,
                            NewtonWork* w, const SparseLU* lu, const double* qi,
                            const double* vi, const double* wi, const double* ai,
                            const double* li, const double* a1, const double* l1,
                            const double* a2, const double* l2, int order,
                            double t1, const double* u1, double rtol, int max_iter,
                            bint have_noise, StepOutcome* out) noexcept nogil:
    """Solve step i -> i+1 from state i (wi: its algorithmic acceleration, scheme.pxd);
    (a1, l1), (a2, l2): a and lam at i-1 and i-2 for the
    start value, extrapolated with polynomial ``order`` 0, 1 or 2. On OK, w.qc, w.vc, w.y hold
    (q, v, a, lam)_{i+1} and w.res the residual terms there; x points at them. ``have_noise``:
    w.nu and w.fq hold a round-off level from the previous step (else it is taken at once).
    The iteration matrix and its factorisation go to w.K, w.LUr, w.pr; a singular or
    non-finite K at the start value is reported as such (SINGULAR, NOT_FINITE; out.pivot)."""
    cdef int n = km.n, m = km.m, nm = km.n + km.m, j, k
    cdef double norm, norm_prev = INFINITY, rnorm, ratio = INFINITY, ratio_prev = INFINITY
    cdef double side, rate, power
    cdef bint refreshed = False, searched = False
    cdef int status = NEWTON_FAILED
    cdef const double* LU = w.LUr
    cdef const int* piv = w.pr
    out.iterations = 0
    out.factorizations = 0
    out.refreshes = 0
    out.pivot = -1
    out.first_norm = -1.0
    out.noise_ratio = NAN
    out.on_switch = False
    predictor(c, qi, vi, wi, ai, w.qh, w.vh, n)
    term_sizes(c, qi, vi, wi, ai, w, n)
    sd_extrapolate(order, ai, a1, a2, w.y0, w.y, n)
    sd_extrapolate(order, li, l1, l2, w.y0 + n, w.y + n, m)
    x.t = t1
    x.q = w.qc
    x.v = w.vc
    x.a = w.y
    x.lam = w.y + n
    x.u = u1
    time_terms(km, x, w.tau, w.all_terms)  # once per step: the Newton iterations share it
    for j in range(max_iter):
        rnorm = residual_at(km, x, c, w, out)
        if j == 0 and isfinite(rnorm):
            # the iteration matrix at the start value (the round-off level reads it)
            out.pivot = factor_into(km, x, c.kw, lu, w.K, w.LUr, w.pr)
            out.factorizations += 1
            if out.pivot != 0:
                out.first_norm = rnorm
                out.last_norm = rnorm
                if out.pivot < 0:
                    return NOT_FINITE
                out.pivot -= 1
                return SINGULAR
            out.pivot = -1
        if j == 1 or not have_noise:
            residual_noise(km, x, c, lu, w)
            have_noise = True
        if out.first_norm < 0.0:
            out.first_norm = rnorm
        out.last_norm = rnorm
        # the ratio itself (divisions) only where test (c) or a failure's report reads it
        if not isfinite(rnorm):
            out.noise_ratio = noise_ratio(w, nm)
            return NOT_FINITE
        if at_noise(w, nm):                                                # test (b)
            return OK
        if refreshed:
            ratio = noise_ratio(w, nm)
            if ratio > 0.5 * ratio_prev and ratio <= STALL_FACTOR:         # test (c)
                out.noise_ratio = ratio
                return OK
            ratio_prev = ratio
        apply(lu, LU, piv, w.dy)
        norm = correction_norm(w, c, rtol, n, nm)
        if norm <= 1.0:
            return OK
        # theta^k by multiplication (Cython's ** calls libm's pow), only where it is read: the
        # first correction of a step (most steps' only one) has no rate, and the division
        # waits on the correction norm's
        power = 0.0
        if j > 0 and norm < norm_prev:
            rate = norm / norm_prev
            power = rate
            for k in range(km.refresh_horizon - 1):
                power *= rate
        if j > 0 and (norm >= norm_prev or norm * power > 1.0):
            # simplified Newton cannot reach the tolerance soon: full Newton from here on
            out.pivot = factor_into(km, x, c.kw, lu, w.K, w.LUr, w.pr)
            out.factorizations += 1
            out.refreshes += 1
            if not refreshed:   # test (c) compares the next ratio with this iterate's
                ratio = noise_ratio(w, nm)
                ratio_prev = ratio
            if out.pivot != 0:
                # a singular or non-finite K at a later iterate, not at the start value,
                # means Newton has left the solution's neighbourhood: report divergence
                out.pivot -= 1
                out.noise_ratio = ratio
                return NEWTON_FAILED
            out.pivot = -1
            refreshed = True
            for k in range(nm):
                w.dy[k] = -w.R[k]
            apply(lu, LU, piv, w.dy)
        if km.jumps and refreshed and not searched and j > 1 and norm >= 0.5 * norm_prev \
                and ratio > STALL_FACTOR:
            # (near round-off, corrections are noise and may reverse: tests (b), (c) decide)
            side = 0.0
            for k in range(nm):
                side += w.dy[k] * w.ys[2 * nm + k]
            if side < 0.0:      # reversed, not shrinking: the step's root is on a switch
                status = switch_search(km, x, c, w, lu, LU, piv, out)
                if status != NEWTON_FAILED:
                    return status
                # no switching point on the segment: Newton goes on from where it was, with
                # a round-off level taken without the switches' jumps
                searched = True
                have_noise = False
                status = NEWTON_FAILED
                continue
        if km.jumps:    # the correction is kept for the switch search (and its test above)
            for k in range(nm):
                w.y[k] += w.dy[k]
                w.ys[2 * nm + k] = w.dy[k]
        else:
            for k in range(nm):
                w.y[k] += w.dy[k]
        norm_prev = norm
    out.noise_ratio = noise_ratio(w, nm)     # at the last residual (or switch_search's)
    return status
