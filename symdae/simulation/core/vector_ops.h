/* The core's vector loops over a state's entries (or entries times directions), with the
 * arrays declared restrict: written in Cython, GCC cannot tell that the outputs do not
 * overlap the inputs and keeps every loop scalar (versioning it for six pointers costs more
 * than the alias checks it would allow); restrict-qualified, the loops vectorise (the tangent
 * sweep runs them over n x directions entries). Callers never pass overlapping outputs. */
#ifndef SYMDAE_VECTOR_OPS_H
#define SYMDAE_VECTOR_OPS_H

#include <math.h>

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

/* y[d, row[e]] += coef[e] vals[at[e]] x[d, col[e]] over the entries e and the nd directions
 * (tangent.pxd's Product; x, y by row: entry k of direction d at k nd + d) */
static inline void sd_product(int nnz, const int *row, const int *col, const int *at,
                              const double *coef, const double *vals,
                              const double *restrict x, double *restrict y, int nd)
{
    for (int e = 0; e < nnz; e++) {
        const double c = coef[e] * vals[at[e]];
        const double *restrict xr = x + col[e] * nd;
        double *restrict yr = y + row[e] * nd;
        for (int d = 0; d < nd; d++)
            yr[d] += c * xr[d];
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

/* y = alpha x */
static inline void sd_scale(double alpha, const double *restrict x, double *restrict y, int n)
{
    for (int k = 0; k < n; k++)
        y[k] = alpha * x[k];
}

/* The Newton residual from the residual kernel's terms res = [Ma, g, C] (newton.pxd):
 * R = (cM Ma + g - ap gprev, C / s), dy = -R; returns max |R_k|, NaN where an entry is
 * (a running max keeps no NaN: the flag beside it, see the top of newton.pxd) */
static inline double sd_residual_rows(double cM, double ap, double s,
                                      const double *restrict res,
                                      const double *restrict gprev, double *restrict R,
                                      double *restrict dy, int n, int m)
{
    double norm = 0.0, rk, wk;
    int nan = 0;
    for (int k = 0; k < n; k++) {
        rk = cM * res[k] + res[n + k] - ap * gprev[k];
        R[k] = rk;
        dy[k] = -rk;
        wk = fabs(rk);
        norm = wk > norm ? wk : norm;
        nan |= wk != wk;
    }
    for (int k = n; k < n + m; k++) {
        rk = res[n + k] / s;
        R[k] = rk;
        dy[k] = -rk;
        wk = fabs(rk);
        norm = wk > norm ? wk : norm;
        nan |= wk != wk;
    }
    return nan ? NAN : norm;
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
