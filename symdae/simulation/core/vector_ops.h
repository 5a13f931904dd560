/* The core's vector loops over a state's entries (or entries times directions), with the
 * arrays declared restrict: written in Cython, GCC cannot tell that the outputs do not
 * overlap the inputs and keeps every loop scalar (versioning it for six pointers costs more
 * than the alias checks it would allow); restrict-qualified, the loops vectorise (the tangent
 * sweep runs them over n x directions entries). Callers never pass overlapping outputs.
 *
 * Max-norms: under IEEE semantics GCC keeps a running max `m = x > m ? x : m` scalar (it may
 * not reorder comparisons that a NaN would make order-dependent); OpenMP's simd pragma
 * (-fopenmp-simd: the pragma only, no OpenMP runtime) lets it take the maximum in vector
 * lanes. The maximum of numbers is the same in any order, and a NaN never reaches the result
 * through it: a count beside it (nan) carries it, see the top of newton.pxd; a count of
 * doubles (0 or 1 per entry, exact), as a compare gives a double-wide lane mask that an int
 * would have to be packed from. Without the flag, the pragma is ignored and the loops stay
 * scalar, with the same results. */
#ifndef SYMDAE_VECTOR_OPS_H
#define SYMDAE_VECTOR_OPS_H

#include <float.h>
#include <math.h>
#include <string.h>

/* Reductions over fewer entries stay scalar: the vector loop's set-up, lane reduction and
 * remainder cost more than the lanes save on the engine mount's 5 rows (forward 2 946 -> 3 153
 * instructions per step in vector lanes), and less on the four-cylinder TVD's 42 (18 210 ->
 * 17 225). The vector paths are functions of their own (SD_LANES, not inlined), so that the
 * scalar ones stay small enough for GCC to inline them into the Newton loop as before. */
#define SD_SIMD_MIN 16
#if defined(__GNUC__)
#define SD_LANES static __attribute__((noinline))
#else
#define SD_LANES static
#endif

/* qhat = q + h v + ca w + cq a, vhat = v + cv1 w + cvq a (scheme.pxd's predictor) */
static inline void sd_predictor(double h, double ca, double cq, double cv1, double cvq,
                                const double *restrict q, const double *restrict v,
                                const double *restrict w, const double *restrict a,
                                double *restrict qh, double *restrict vh, int n)
{
    for (int k = 0; k < n; k++) {
        qh[k] = q[k] + h * v[k] + ca * w[k] + cq * a[k];
        vh[k] = v[k] + cv1 * w[k] + cvq * a[k];
    }
}

/* two doubles in one SSE2 register (GCC's vector extension; memcpy: any alignment): the
 * element-wise operations of the scalar code, so the same numbers */
typedef double sd_pair __attribute__((vector_size(16)));

static inline sd_pair sd_load_pair(const double *p)
{
    sd_pair v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void sd_store_pair(double *p, sd_pair v)
{
    memcpy(p, &v, sizeof v);
}

/* y[d, row[e]] += coef[e] vals[at[e]] x[d, col[e]] over the entries e and the nd directions
 * (tangent.pxd's Product; x, y by row: entry k of direction d at k nd + d). The directions
 * go two at a time and, for the few of a Fisher information, with nd a constant: GCC does
 * not vectorize this loop itself, and with a run-time nd its overhead costs more than the
 * product (the engine mount's four directions: 1 420 instructions per step). */
#define SD_PRODUCT_LOOP(ND)                                                     \
    for (int e = 0; e < nnz; e++) {                                             \
        const double c = coef[e] * vals[at[e]];                                 \
        const double *xr = x + col[e] * (ND);                                   \
        double *yr = y + row[e] * (ND);                                         \
        int d = 0;                                                              \
        for (; d + 1 < (ND); d += 2)                                            \
            sd_store_pair(yr + d, sd_load_pair(yr + d) + c * sd_load_pair(xr + d)); \
        for (; d < (ND); d++)                                                   \
            yr[d] += c * xr[d];                                                 \
    }

static inline void sd_product(int nnz, const int *row, const int *col, const int *at,
                              const double *coef, const double *vals,
                              const double *restrict x, double *restrict y, int nd)
{
    switch (nd) {
    case 1: SD_PRODUCT_LOOP(1) break;
    case 2: SD_PRODUCT_LOOP(2) break;
    case 3: SD_PRODUCT_LOOP(3) break;
    case 4: SD_PRODUCT_LOOP(4) break;
    default: SD_PRODUCT_LOOP(nd)
    }
}

/* the sizes of qhat's and vhat's terms, |q| + h |v| + |ca w| + |cq a| and
 * |v| + |cv1 w| + |cvq a| (newton.pxd's round-off level) */
static inline void sd_predictor_sizes(double h, double ca, double cq, double cv1, double cvq,
                                      const double *restrict q, const double *restrict v,
                                      const double *restrict w, const double *restrict a,
                                      double *restrict qs, double *restrict vs, int n)
{
    for (int k = 0; k < n; k++) {
        qs[k] = fabs(q[k]) + h * fabs(v[k]) + fabs(ca * w[k]) + fabs(cq * a[k]);
        vs[k] = fabs(v[k]) + fabs(cv1 * w[k]) + fabs(cvq * a[k]);
    }
}

/* q = qhat + s y, v = vhat + gh y: the Newmark corrector of the iterate y (newton.pxd), or,
 * with -s and -gh, of a tangent (tangent.pxd) */
static inline void sd_corrector(double s, double gh, const double *restrict y,
                                const double *restrict qh, const double *restrict vh,
                                double *restrict q, double *restrict v, int n)
{
    for (int k = 0; k < n; k++) {
        q[k] = qh[k] + s * y[k];
        v[k] = vh[k] + gh * y[k];
    }
}

/* the sizes of q's and v's terms, qs + s |y| and vs + gh |y| (newton.pxd) */
static inline void sd_corrector_sizes(double s, double gh, const double *restrict y,
                                      const double *restrict qs, const double *restrict vs,
                                      double *restrict q, double *restrict v, int n)
{
    for (int k = 0; k < n; k++) {
        q[k] = qs[k] + s * fabs(y[k]);
        v[k] = vs[k] + gh * fabs(y[k]);
    }
}

/* The adjoint of the corrector and the recursion (adjoint.pxd): the right-hand side
 * ab + ry wb + s qb + gh vb that a_{i+1}'s adjoint solves with */
static inline void sd_corrector_adjoint(double ry, double s, double gh,
                                        const double *restrict ab, const double *restrict wb,
                                        const double *restrict qb, const double *restrict vb,
                                        double *restrict r, int n)
{
    for (int k = 0; k < n; k++)
        r[k] = ab[k] + ry * wb[k] + s * qb[k] + gh * vb[k];
}

/* The tangent of x_{i+1} from the solution y of its step (tangent.pxd's tangent_step): dq =
 * dqhat + (-s) y, dv = dvhat + (-gh) y, da = -1 y, dw = ry da + rp da_i over the n entries, then
 * dlam = -1 y over the nl after them; in one pass (the three loops it replaces each cost
 * their own set-up and remainder on the engine mount's 16 entries) */
static inline void sd_tangent_corrector(double s, double gh, double ry, double rp,
                                        const double *restrict y, const double *restrict qh,
                                        const double *restrict vh, const double *restrict a0,
                                        double *restrict q, double *restrict v,
                                        double *restrict a, double *restrict w, int n, int nl)
{
    for (int k = 0; k < n; k++) {
        q[k] = qh[k] + (-s) * y[k];
        v[k] = vh[k] + (-gh) * y[k];
        a[k] = -1.0 * y[k];
        w[k] = ry * a[k] + rp * a0[k];
    }
    for (int k = n; k < n + nl; k++)
        a[k] = -1.0 * y[k];
}

/* The Newton residual from the residual kernel's terms res = [Ma, g, C] (newton.pxd):
 * R = (cM Ma + g - ap gprev, C / s), dy = -R; returns max |R_k|, NaN where an entry is
 * (a running max keeps no NaN: the count beside it, see the top of this file) */
#define SD_RESIDUAL_ROW(value) {                \
        const double rk = (value);              \
        const double wk = fabs(rk);             \
        R[k] = rk;                              \
        dy[k] = -rk;                            \
        norm = wk > norm ? wk : norm;           \
        nan += wk != wk ? 1.0 : 0.0;            \
    }
SD_LANES double sd_residual_rows_lanes(double cM, double ap, double s,
                                       const double *restrict res,
                                       const double *restrict gprev, double *restrict R,
                                       double *restrict dy, int n, int m)
{
    double norm = 0.0, nan = 0.0;
    #pragma omp simd reduction(max:norm) reduction(+:nan)
    for (int k = 0; k < n; k++)
        SD_RESIDUAL_ROW(cM * res[k] + res[n + k] - ap * gprev[k])
    #pragma omp simd reduction(max:norm) reduction(+:nan)
    for (int k = n; k < n + m; k++)
        SD_RESIDUAL_ROW(res[n + k] / s)
    return nan != 0.0 ? NAN : norm;
}

static inline double sd_residual_rows(double cM, double ap, double s,
                                      const double *restrict res,
                                      const double *restrict gprev, double *restrict R,
                                      double *restrict dy, int n, int m)
{
    double norm = 0.0, nan = 0.0;
    if (n + m >= SD_SIMD_MIN)
        return sd_residual_rows_lanes(cM, ap, s, res, gprev, R, dy, n, m);
    for (int k = 0; k < n; k++)
        SD_RESIDUAL_ROW(cM * res[k] + res[n + k] - ap * gprev[k])
    for (int k = n; k < n + m; k++)
        SD_RESIDUAL_ROW(res[n + k] / s)
    return nan != 0.0 ? NAN : norm;
}
#undef SD_RESIDUAL_ROW

/* sd_correction_norm in vector lanes; -1 where a quotient is NaN (a weight of 0 with dy_k = 0,
 * or a NaN): those take the one-by-one loop, which sets such cases apart */
SD_LANES double sd_correction_norm_lanes(double rtol, double ff, double tiny,
                                         const double *restrict y,
                                         const double *restrict fq,
                                         const double *restrict dy, int n, int m)
{
    double amax = 0.0, lmax = 0.0, norm = 0.0, nan = 0.0, wk;
    #pragma omp simd reduction(max:amax)
    for (int k = 0; k < n; k++) {
        wk = fabs(y[k]);
        amax = wk > amax ? wk : amax;
    }
    #pragma omp simd reduction(max:lmax)
    for (int k = n; k < n + m; k++) {
        wk = fabs(y[k]);
        lmax = wk > lmax ? wk : lmax;
    }
    amax *= tiny;
    lmax *= tiny;
    #pragma omp simd reduction(max:norm) reduction(+:nan)
    for (int k = 0; k < n; k++) {
        wk = fabs(dy[k]) / (rtol * fabs(y[k]) + ff * fq[k] + amax);
        norm = wk > norm ? wk : norm;
        nan += wk != wk ? 1.0 : 0.0;
    }
    #pragma omp simd reduction(max:norm) reduction(+:nan)
    for (int k = n; k < n + m; k++) {
        wk = fabs(dy[k]) / (rtol * fabs(y[k]) + lmax);
        norm = wk > norm ? wk : norm;
        nan += wk != wk ? 1.0 : 0.0;
    }
    return nan != 0.0 ? -1.0 : norm;
}

/* max_k |dy_k| / w_k, test (a)'s correction norm (newton.pxd), with w_k = rtol |y_k| +
 * ff fq_k + amax for the n accelerations and rtol |y_k| + lmax for the m multipliers, where
 * amax = tiny max_k<n |y_k| and lmax = tiny max_k>=n |y_k|; w_k = 0 (or NaN) counts as 0 where
 * dy_k = 0, else as infinite; NaN where a quotient is. (The maxima of |y| skip a NaN: y is
 * finite here, Newton's iterate after a finite residual.) */
static inline double sd_correction_norm(double rtol, double ff, double tiny,
                                        const double *restrict y,
                                        const double *restrict fq,
                                        const double *restrict dy, int n, int m)
{
    double amax = 0.0, lmax = 0.0, norm, wk;
    int nan = 0;
    if (n + m >= SD_SIMD_MIN) {
        norm = sd_correction_norm_lanes(rtol, ff, tiny, y, fq, dy, n, m);
        if (norm >= 0.0)
            return norm;
    }
    for (int k = 0; k < n; k++)
        amax = fabs(y[k]) > amax ? fabs(y[k]) : amax;
    for (int k = n; k < n + m; k++)
        lmax = fabs(y[k]) > lmax ? fabs(y[k]) : lmax;
    amax *= tiny;
    lmax *= tiny;
    norm = 0.0;
    /* one loop per block: a test of k < n in each entry costs more than the loop */
    for (int k = 0; k < n; k++) {
        wk = rtol * fabs(y[k]) + ff * fq[k] + amax;
        wk = wk > 0.0 ? fabs(dy[k]) / wk : (dy[k] == 0.0 ? 0.0 : INFINITY);
        norm = wk > norm ? wk : norm;
        nan |= wk != wk;
    }
    for (int k = n; k < n + m; k++) {
        wk = rtol * fabs(y[k]) + lmax;
        wk = wk > 0.0 ? fabs(dy[k]) / wk : (dy[k] == 0.0 ? 0.0 : INFINITY);
        norm = wk > norm ? wk : norm;
        nan |= wk != wk;
    }
    return nan ? NAN : norm;
}

/* whether |R_k| <= factor nu_k for every k (newton.pxd's test (b); a NaN fails): long ones
 * in vector lanes (a count of the rows that fail), short ones up to the first that fails */
SD_LANES int sd_within_lanes(const double *restrict R, const double *restrict nu,
                             double factor, int n)
{
    double out = 0.0;
    #pragma omp simd reduction(+:out)
    for (int k = 0; k < n; k++)
        out += fabs(R[k]) <= factor * nu[k] ? 0.0 : 1.0;
    return out == 0.0;
}

static inline int sd_within(const double *restrict R, const double *restrict nu,
                            double factor, int n)
{
    if (n >= SD_SIMD_MIN)
        return sd_within_lanes(R, nu, factor, n);
    for (int k = 0; k < n; k++)
        if (!(fabs(R[k]) <= factor * nu[k]))
            return 0;
    return 1;
}

/* The round-off levels nu of the residual rows from their terms' sizes mag = [Ma, g, C] and
 * the rounding fq of (a, lam) that q's rounding (sz / s) implies (newton.pxd's residual_noise,
 * before the constraint coupling it adds) */
static inline void sd_noise_rows(double cM, double g1, double s, const double *restrict mag,
                                 const double *restrict sz, const double *restrict lam,
                                 double *restrict nu, double *restrict fq, int n, int m)
{
    const double eps = DBL_EPSILON;
    for (int k = 0; k < n; k++) {
        nu[k] = eps * (cM * mag[k] + g1 * mag[n + k]);
        fq[k] = sz[k] * eps / s;
    }
    for (int k = 0; k < m; k++) {
        nu[n + k] = eps * mag[2 * n + k] / s;
        fq[n + k] = fabs(lam[k]) * eps;
    }
}

/* x_k <- lo where x_k is below it or NaN */
static inline void sd_floor(double lo, double *restrict x, int n)
{
    for (int k = 0; k < n; k++)
        if (!(x[k] >= lo))
            x[k] = lo;
}

/* The value at i+1 of the polynomial of the given order (0, 1, 2) through y at i, i-1, i-2,
 * into out and out2 (newton.pxd's start value) */
static inline void sd_extrapolate(int order, const double *restrict y0,
                                  const double *restrict y1, const double *restrict y2,
                                  double *restrict out, double *restrict out2, int n)
{
    double v;
    if (order >= 2) {
        for (int k = 0; k < n; k++) {
            v = 3.0 * y0[k] - 3.0 * y1[k] + y2[k];
            out[k] = v;
            out2[k] = v;
        }
    } else if (order == 1) {
        for (int k = 0; k < n; k++) {
            v = 2.0 * y0[k] - y1[k];
            out[k] = v;
            out2[k] = v;
        }
    } else {
        for (int k = 0; k < n; k++) {
            out[k] = y0[k];
            out2[k] = y0[k];
        }
    }
}

/* The adjoint of the predictor (adjoint.pxd): from the adjoints qh, vh of qhat, vhat, those
 * of q_i, v_i, a_i added to qb, vb, ab, and that of w_i, wb = ca qh + cv1 vh (the previous wb,
 * w_{i+1}'s adjoint, enters a_i's through the recursion w_{i+1} = ry a_{i+1} + rp a_i) */
static inline void sd_predictor_adjoint(double h, double ca, double cq, double cv1,
                                        double cvq, double rp, const double *restrict qh,
                                        const double *restrict vh, double *restrict qb,
                                        double *restrict vb, double *restrict ab,
                                        double *restrict wb, int n)
{
    for (int k = 0; k < n; k++) {
        qb[k] += qh[k];
        vb[k] += h * qh[k] + vh[k];
        ab[k] += cq * qh[k] + cvq * vh[k] + rp * wb[k];
        wb[k] = ca * qh[k] + cv1 * vh[k];
    }
}

#endif
