/* The forward and adjoint sweeps' steps, compiled into a model's kernel module for its sizes:
 * the module defines SD_N, SD_M, SD_N_P, SD_N_TAU, SD_N_ST, SD_N_S and SD_N_U and includes this
 * file after its kernels and its written-out LU (symdae/model/emit.py), which gives it
 * sd_forward_steps and sd_adjoint_steps, the model's forward_steps and adjoint_steps
 * (symdae_kernels.h states their contracts).
 *
 * sd_forward_steps is the common path of the core's step (newton.pxd's newton_step, hht.pyx's
 * forward loop and settle) operation for operation: the same vector_ops.h functions on the
 * same numbers in the same order, the kernels called directly. With the sizes constants and
 * the work arrays local, GCC unrolls the loops over n and n + m and keeps the step's state in
 * registers, which the generic step, whose arrays live behind pointers and whose loops run to
 * sizes read from the kernel table, cannot. A step off that path returns to the core before
 * it changes anything, and the generic step takes it from the start: Newton failing or
 * refreshing its matrix (the contraction test), a pivot the written LU refuses at the start
 * value or at the accepted state (the dense LU's case), a root far from the start value (the
 * second solve, hht.pyx).
 *
 * sd_adjoint_steps is hht.pyx's backward loop over the states a forward sweep stored (their
 * factorised Newton matrices, or the matrices factorised again at each state with the
 * written LU, time terms and state terms) with adjoint.pxd's adjoint_step and the output
 * source, likewise; a state whose factorisation is the dense LU's goes back to the core,
 * which takes that step with its dense solve.
 *
 * sd_tangent_steps is hht.pyx's tangent loop likewise, for the directions the module's
 * written-out products cover (tangent_products.py), but for the solve, which the module
 * defines before it includes this file (lu_plan.py's written_lu_solve_block); a step whose
 * factorisation is not the written LU's goes back to the core.
 *
 * Each sweep's steps form K's entries that depend on the parameters and the weights alone,
 * and the written LU's operations on them alone, once per call (sd_fixed_factor), and at each
 * state the rest (sd_rest_factor): the module's _k_newton_fixed and _k_newton_rest, its
 * written_lu_factor_fixed and written_lu_factor_rest (lu_plan.py's split_factor_lines),
 * which give written_lu_factor's numbers and status. The K and LU they keep between their
 * states are the core's scratch, which nothing else writes during a call; the values passed
 * between the parts (lu_c, SD_LU_NC) are at most one per statement of the factorisation,
 * which lu_plan.MAX_UPDATES bounds (tens of kB on the stack at most).
 *
 * tests/simulation/test_compiled_steps.py compares all three with the generic steps bit for
 * bit (the tangent steps up to the sign of a zero).
 * optimize("O3"): the module builds at -O2, which leaves the loops of vector_ops.h rolled. */
#ifndef SYMDAE_COMPILED_STEPS_H
#define SYMDAE_COMPILED_STEPS_H

#include <float.h>
#include <math.h>
#include <string.h>
#include "symdae_kernels.h"
#include "vector_ops.h"

#define SD_NM (SD_N + SD_M)
#define SD_NX (3 * SD_N + SD_M)
/* zero-size arrays are not C: one spare entry */
#define SD_SPARE(k) ((k) + 1)
#if defined(__GNUC__) && !defined(__clang__)
#define SD_O3 __attribute__((optimize("O3")))
#else
#define SD_O3
#endif

/* whether the core's list of the round-off coupling is the one the module wrote out */
static int sd_noise_matches(const int *idx, int nn)
{
    if (nn != SD_NOISE_NN)
        return 0;
    for (int k = 0; k < nn; k++)
        if (idx[k] != sd_noise_idx[k])
            return 0;
    return 1;
}

/* the factorisation's part that stays the same through a call: K's fixed entries into K and
 * their elimination into LU, with the values the rest reads in c; nonzero where it fails
 * (every factorisation of the call would: each of its steps goes to the core) */
static int sd_fixed_factor(const symdae_args *x, const double *kw, double *K, double *LU,
                           double *c, double tol)
{
    _k_newton_fixed(x, kw, K);
    return written_lu_factor_fixed(K, LU, c, tol);
}

/* K at the state x with the written LU (written_lu_factor's status), after sd_fixed_factor
 * returned 0 on the same K, LU and c */
static int sd_rest_factor(const symdae_args *x, const double *kw, double *K, double *LU,
                          const double *c, double tol)
{
    _k_newton_rest(x, kw, K);
    return written_lu_factor_rest(K, c, LU, tol);
}

SD_O3
static long sd_forward_steps(symdae_steps *r, long i, long last)
{
    const int n = SD_N, m = SD_M, nm = SD_NM;
    const symdae_run *run = &r->run;
    symdae_args x;
    double tau[SD_SPARE(SD_N_TAU)], st[SD_SPARE(SD_N_ST)], res[2 * SD_N + SD_M];
    double mag[2 * SD_N + SD_M], qsb[SD_N], vsb[SD_N], sz[2 * SD_N + 1], gprev[SD_N];
    double qc[SD_N], vc[SD_N], qh[SD_N], vh[SD_N], R[SD_NM], dy[SD_NM], y[SD_NM], y0[SD_NM];
    double nu[SD_NM], fq[SD_NM], nu1[SD_NM], fq1[SD_NM], lu_c[SD_SPARE(SD_LU_NC)];
    /* the N x N ones are the core's (as large as K, too large for a thread's stack) */
    double *K = r->K, *LU = r->LU, *Ks = r->Ks;
    int fixed;
    /* a sweep that stores all time terms evaluates them all (one kernel: newton.pxd) */
    const int all_terms = r->tau_out != NULL;
    /* the module's written-out round-off coupling where the core's list is the one it was
     * written for (the structure the newton kernel writes: always, barring a kernel output
     * equal to the core's sentinel) */
    const int noise_written = sd_noise_matches(r->noise_idx, r->noise_nn);
    /* the kernels never write their structural zeros (symdae_kernels.h) */
    memset(res, 0, sizeof res);
    memset(mag, 0, sizeof mag);
    memcpy(nu, r->nu, sizeof nu);
    memcpy(fq, r->fq, sizeof fq);
    memcpy(gprev, r->gprev, sizeof gprev);
    x.p = run->p;
    x.st = SD_N_ST > 0 ? st : NULL;
    x.tau = tau;
    fixed = sd_fixed_factor(&x, run->kw, K, LU, lu_c, r->pivot_tol);
    for (; i < last; i++) {
        const long i1 = i > 0 ? i - 1 : 0, i2 = i > 1 ? i - 2 : 0;
        const int order = run->offset + i < 2 ? (int)(run->offset + i) : 2;
        const double *qi = run->q + i * n, *vi = run->v + i * n, *wi = run->w + i * n;
        const double *ai = run->a + i * n, *li = run->lam + i * m;
        double rnorm, norm, norm_prev = INFINITY, rate, power;
        int j, k, ok = 0, iterations = 0;
        /* the round-off levels this step may set, kept apart until it is accepted */
        memcpy(nu1, nu, sizeof nu);
        memcpy(fq1, fq, sizeof fq);
        sd_predictor(run->h, run->ca, run->cq, run->cv1, run->cvq, qi, vi, wi, ai, qh, vh, n);
        sd_predictor_sizes(run->h, run->ca, run->cq, run->cv1, run->cvq, qi, vi, wi, ai, qsb, vsb,
                           n);
        sd_extrapolate(order, ai, run->a + i1 * n, run->a + i2 * n, y0, y, n);
        sd_extrapolate(order, li, run->lam + i1 * m, run->lam + i2 * m, y0 + n, y + n, m);
        x.t = run->t0 + (run->offset + i + 1) * run->h;
        x.q = qc;
        x.v = vc;
        x.a = y;
        x.lam = y + n;
        x.u = run->u + (i + 1) * SD_N_U;
        if (SD_N_TAU > 0 && r->tau_in != NULL)
            x.tau = r->tau_in + (i + 1) * SD_N_TAU;
        else if (all_terms)
            _k_time_terms_sensitivity(&x, NULL, tau);
        else
            _k_time_terms(&x, NULL, tau);
        for (j = 0; j < r->max_iter; j++) {
            sd_corrector(run->s, run->gh, y, qh, vh, qc, vc, n);
            if (SD_N_ST > 0)
                _k_state_terms(&x, NULL, st);
            _k_residual(&x, NULL, res);
            iterations++;
            rnorm = sd_residual_rows(run->cM, run->ap, run->s, res, gprev, R, dy, n, m);
            if (!isfinite(rnorm))
                break;
            if (j == 0 && (fixed != 0 || sd_rest_factor(&x, run->kw, K, LU, lu_c,
                                                        r->pivot_tol) != 0))
                break;
            if (j == 1) {
                /* newton.pxd's residual_noise (the core calls these steps with the levels
                 * set, which the generic step's first iteration then reuses too) */
                sd_corrector_sizes(run->s, run->gh, y, qsb, vsb, sz, sz + n, n);
                sz[2 * n] = 0.0;
                _k_residual_magnitude(&x, sz, mag);
                sd_noise_rows(run->cM, 1.0 + fabs(run->ap), run->s, mag, sz, y + n, nu1, fq1, n,
                              m);
                if (noise_written)
                    sd_noise_coupling(K, fq1, nu1);
                else
                    for (k = 0; k < r->noise_nn; k++) {
                        const int idx = r->noise_idx[k], row = r->noise_row[k];
                        nu1[row] += fabs(K[idx]) * fq1[idx - row * nm];
                    }
                sd_floor(DBL_MIN, nu1, nm);
            }
            if (sd_within(R, nu1, 4.0, nm)) {          /* newton.pxd's test (b) */
                ok = 1;
                break;
            }
            written_lu_solve(LU, dy);
            norm = sd_correction_norm(r->rtol, 10.0, 10.0 * DBL_EPSILON, y, fq1, dy, n, m);
            if (norm <= 1.0) {                         /* test (a) */
                ok = 1;
                break;
            }
            if (j > 0) {
                power = 0.0;
                if (norm < norm_prev) {
                    rate = norm / norm_prev;
                    power = rate;
                    for (k = 0; k < r->refresh_horizon - 1; k++)
                        power *= rate;
                }
                if (norm >= norm_prev || norm * power > 1.0)
                    break;                             /* a refresh: the generic step's */
            }
            for (k = 0; k < nm; k++)
                y[k] += dy[k];
            norm_prev = norm;
        }
        if (!ok)
            break;
        if (iterations > 2 && order > 0) {
            /* newton.pxd's far_root: the generic step solves this one again from a_i */
            double miss = 0.0, moved = 0.0, d;
            for (k = 0; k < n; k++) {
                d = fabs(y[k] - y0[k]);
                miss = d > miss ? d : miss;
                d = fabs(y0[k] - ai[k]);
                moved = d > moved ? d : moved;
            }
            if (!(miss <= 10.0 * moved))
                break;
        }
        if (r->lu_out != NULL) {
            /* K at the accepted state for the derivative sweeps (hht.pyx's settle): one the
             * written LU refuses goes to the generic step, whose dense LU takes it */
            _k_newton(&x, run->kw, Ks);
            if (written_lu_factor(Ks, r->lu_out + (i + 1) * nm * nm, r->pivot_tol) != 0)
                break;
            r->piv_out[(i + 1) * (nm + 1) + nm] = r->piv_sparse;
        }
        /* accepted: state i+1 (hht.pyx's forward loop and settle) */
        r->iterations += iterations;
        r->factorizations += r->lu_out != NULL ? 2 : 1;
        memcpy(nu, nu1, sizeof nu);
        memcpy(fq, fq1, sizeof fq);
        memcpy(run->q + (i + 1) * n, qc, n * sizeof(double));
        memcpy(run->v + (i + 1) * n, vc, n * sizeof(double));
        memcpy(run->a + (i + 1) * n, y, n * sizeof(double));
        memcpy(run->lam + (i + 1) * m, y + n, m * sizeof(double));
        /* scheme.pxd's recursion */
        if (!(run->w == run->a && run->ry == 1.0 && run->rp == 0.0))
            for (k = 0; k < n; k++)
                run->w[(i + 1) * n + k] = run->ry * run->a[(i + 1) * n + k] + run->rp * ai[k];
        memcpy(gprev, res + n, sizeof gprev);
        _k_outputs(&x, NULL, r->s_out + (i + 1) * SD_N_S);
        if (all_terms)
            memcpy(r->tau_out + (i + 1) * SD_N_TAU, tau, SD_N_TAU * sizeof(double));
        if (r->st_out != NULL)
            memcpy(r->st_out + (i + 1) * SD_N_ST, st, SD_N_ST * sizeof(double));
    }
    memcpy(r->nu, nu, sizeof nu);
    memcpy(r->fq, fq, sizeof fq);
    memcpy(r->gprev, gprev, sizeof gprev);
    return i;
}

SD_O3
static long sd_adjoint_steps(symdae_adjoint_steps *r, long i, long stop)
{
    const int n = SD_N, m = SD_M, nm = SD_NM;
    const symdae_run *run = &r->run;
    symdae_args x0, x1;
    /* [xbar, pbar] in one array: output_vjp adds to both in one call */
    double xg[SD_NX + SD_SPARE(SD_N_P)], wb[SD_N], rd_next[SD_N], mu[SD_NM], hat[SD_NX];
    double wv[SD_NX], wo[SD_NX], lu_c[SD_SPARE(SD_LU_NC)];
    double *xb = xg, *gacc = xg + SD_NX;
    double *qb = xb, *vb = xb + SD_N, *ab = xb + 2 * SD_N, *lb = xb + 3 * SD_N;
    double *qh = hat, *vh = hat + SD_N;
    int k, fixed = 0;
    memcpy(xb, r->xb, SD_NX * sizeof(double));
    memcpy(gacc, r->gacc, SD_N_P * sizeof(double));
    memcpy(wb, r->wb, sizeof wb);
    memcpy(rd_next, r->rd_next, sizeof rd_next);
    memcpy(hat, r->hat, sizeof hat);
    /* adjoint.pxd's buffers: the zero blocks of wv's last n and wo's first and third stay 0 */
    memset(wv, 0, sizeof wv);
    memset(wo, 0, sizeof wo);
    x0.p = x1.p = run->p;
    x0.st = x1.st = NULL;
    if (r->lu == NULL)
        fixed = sd_fixed_factor(&x1, run->kw, r->K, r->LUw, lu_c, r->pivot_tol);
    for (; i > stop; i--) {
        /* hht.pyx's set_state, tau_at and st_at for rows i (x1) and i - 1 (x0) */
        const double *LU;
        if (r->lu != NULL) {
            LU = r->lu + i * nm * nm;
            if (r->piv[i * (nm + 1) + nm] != r->piv_sparse)
                break;                  /* the dense LU's factors: the core's step */
        }
        x1.t = run->t0 + (run->offset + i) * run->h;
        x1.q = run->q + i * n;
        x1.v = run->v + i * n;
        x1.a = run->a + i * n;
        x1.lam = run->lam + i * m;
        x1.u = run->u + i * SD_N_U;
        x1.tau = r->tau + i * SD_N_TAU;
        if (SD_N_ST > 0)
            x1.st = r->st + i * SD_N_ST;
        x0.t = run->t0 + (run->offset + i - 1) * run->h;
        x0.q = run->q + (i - 1) * n;
        x0.v = run->v + (i - 1) * n;
        x0.a = run->a + (i - 1) * n;
        x0.lam = run->lam + (i - 1) * m;
        x0.u = run->u + (i - 1) * SD_N_U;
        x0.tau = r->tau + (i - 1) * SD_N_TAU;
        if (SD_N_ST > 0)
            x0.st = r->st + (i - 1) * SD_N_ST;
        if (r->lu == NULL) {
            /* hht.pyx's factors_at without stored factors: K at state i, the written LU's;
             * one it refuses goes to the core's step (its dense LU's) */
            if (fixed != 0 || sd_rest_factor(&x1, run->kw, r->K, r->LUw, lu_c,
                                             r->pivot_tol) != 0)
                break;
            LU = r->LUw;
        }
        /* adjoint.pxd's state_step: mu becomes r = (r_d, r_c) */
        sd_corrector_adjoint(run->ry, run->s, run->gh, ab, wb, qb, vb, mu, n);
        for (k = 0; k < m; k++)
            mu[n + k] = lb[k];
        written_lu_solve_t(LU, mu);
        for (k = 0; k < n; k++) {
            mu[k] = -mu[k];
            qh[k] = qb[k];
            vh[k] = vb[k];
            wv[k] = run->cM * mu[k];
            wv[n + k] = mu[k];
        }
        for (k = 0; k < m; k++) {
            mu[n + k] = -mu[n + k];
            wv[2 * n + k] = mu[n + k] / run->s;
        }
        _k_state_vjp(&x1, wv, hat);
        memset(xb, 0, SD_NX * sizeof(double));
        if (run->ap != 0.0) {
            for (k = 0; k < n; k++) {
                wo[n + k] = -run->ap * mu[k];
                wo[2 * n + m + k] = -run->ap * mu[k];
            }
            _k_state_vjp(&x0, wo, xb);
        }
        sd_predictor_adjoint(run->h, run->ca, run->cq, run->cv1, run->cvq, run->rp, qh, vh, qb, vb,
                             ab, wb, n);
        /* adjoint_step's parameter product and r_d for the step before */
        if (SD_N_P > 0) {
            if (run->ap != 0.0)
                for (k = 0; k < n; k++)
                    wv[n + k] = mu[k] - run->ap * rd_next[k];
            _k_param_vjp(&x1, wv, gacc);
        }
        memcpy(rd_next, mu, sizeof rd_next);
        /* hht.pyx's output_source at row i - 1 */
        {
            const double *dphi = r->dphi + (i - 1) * SD_N_S;
            for (k = 0; k < SD_N_S; k++)
                if (dphi[k] != 0.0) {
                    _k_output_vjp(&x0, dphi, xg);
                    break;
                }
        }
    }
    memcpy(r->xb, xb, SD_NX * sizeof(double));
    memcpy(r->gacc, gacc, SD_N_P * sizeof(double));
    memcpy(r->wb, wb, sizeof wb);
    memcpy(r->rd_next, rd_next, sizeof rd_next);
    memcpy(r->hat, hat, sizeof hat);
    return i;
}

/* hht.pyx's tangent loop for nd directions (a constant once inlined into the wrappers below,
 * so that GCC unrolls the loops over n nd entries, which the core's loops run to sizes read
 * at run time): set_state, tau_at, st_at, factors_at, state_blocks, tangent.pxd's
 * tangent_step and output_tangents, and store_tangents where the sweep keeps the states,
 * operation for operation, but for the solve: the written LU's for all nd directions at once
 * (without the zero tests, which leave a zero's sign the only difference: 292 of the engine
 * mount's four directions' 1 413 instructions per step, 79 at once) */
#if defined(__GNUC__)
#define SD_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define SD_ALWAYS_INLINE inline
#endif
/* the zeroing loops stay stores: as memset, GCC made them "rep stos", whose start-up costs
 * the engine mount's step about 36 instructions' worth each time */
#if defined(__GNUC__) && !defined(__clang__)
#define SD_O3_STORES __attribute__((optimize("O3", "no-tree-loop-distribute-patterns")))
#else
#define SD_O3_STORES
#endif

SD_O3_STORES
static SD_ALWAYS_INLINE long sd_tangent_steps_nd(symdae_tangent_steps *r, long i, long last,
                                                 const int nd)
{
    const int n = SD_N, m = SD_M, nm = SD_NM, nn = SD_N * nd;
    const int q = 0, v = nn, a = 2 * nn, wa = (3 * SD_N + SD_M) * nd;
    const symdae_run *run = &r->run;
    symdae_args x;
    double tau[SD_SPARE(SD_N_TAU)], st[SD_SPARE(SD_N_ST)];
    double *T0 = r->T[0], *T1 = r->T[1], *J0 = r->J[0], *J1 = r->J[1];
    double *P0 = r->P[0], *P1 = r->P[1], *tmp;
    double *b = r->rhs, *xnew = r->xnew, lu_c[SD_SPARE(SD_LU_NC)];
    int k, d, fixed = 0;
    x.p = run->p;
    x.st = NULL;
    x.tau = tau;
    if (r->lu == NULL)
        fixed = sd_fixed_factor(&x, run->kw, r->K, r->LUw, lu_c, r->pivot_tol);
    for (; i < last; i++) {
        const double *LU;
        double *ds = r->ds + (i + 1) * r->ds_stride;
        /* set_state, tau_at and st_at at state i + 1 */
        x.t = run->t0 + (run->offset + i + 1) * run->h;
        x.q = run->q + (i + 1) * n;
        x.v = run->v + (i + 1) * n;
        x.a = run->a + (i + 1) * n;
        x.lam = run->lam + (i + 1) * m;
        x.u = run->u + (i + 1) * SD_N_U;
        if (r->tau_in != NULL) {
            x.tau = r->tau_in + (i + 1) * SD_N_TAU;
        } else {
            x.tau = tau;        /* the kernel entries' tau bits: 2 all, 1 the forward ones */
            if (r->tau_reads & 2)
                _k_time_terms_sensitivity(&x, NULL, tau);
            else if (r->tau_reads & 1)
                _k_time_terms(&x, NULL, tau);
        }
        if (SD_N_ST > 0) {
            if (r->st_in != NULL) {
                x.st = r->st_in + (i + 1) * SD_N_ST;
            } else {
                _k_state_terms(&x, NULL, st);
                x.st = st;
            }
        }
        /* factors_at: the stored factorisation, or the written LU of K at the state */
        if (r->lu != NULL) {
            if (r->piv[(i + 1) * (nm + 1) + nm] != r->piv_sparse)
                break;
            LU = r->lu + (i + 1) * nm * nm;
        } else {
            if (fixed != 0 || sd_rest_factor(&x, run->kw, r->K, r->LUw, lu_c,
                                             r->pivot_tol) != 0)
                break;
            LU = r->LUw;
        }
        /* state_blocks, then tangent_step */
        _k_jacobians(&x, NULL, J1);
        _k_param_jacobians(&x, NULL, P1);
        _k_output_jacobians(&x, NULL, r->S);
        sd_predictor(run->h, run->ca, run->cq, run->cv1, run->cvq, T0 + q, T0 + v, T0 + wa,
                     T0 + a, xnew, xnew + nn, nn);
        for (k = 0; k < (n + m) * nd; k++)
            b[k] = 0.0;
        r->state_product[0](J1, xnew, b, r->coef);
        sd_product(r->pnnz[0], r->prow[0], r->pcol[0], r->pat[0], r->pcoef[0], P1, r->D, b, nd);
        if (run->ap != 0.0) {
            r->state_product[1](J0, T0, b, r->coef);
            sd_product(r->pnnz[1], r->prow[1], r->pcol[1], r->pat[1], r->pcoef[1], P0, r->D, b,
                       nd);
        }
        written_lu_solve_block(LU, b, nd);
        sd_tangent_corrector(run->s, run->gh, run->ry, run->rp, b, xnew, xnew + nn, T0 + a,
                             T1 + q, T1 + v, T1 + a, T1 + wa, nn, m * nd);
        if (r->rows > r->N || i + 1 == r->N) {
            /* store_tangents into row (i + 1) % rows */
            const long row = (i + 1) % r->rows;
            double *dq = r->dq + row * nd * r->sn, *dv = r->dv + row * nd * r->sn;
            double *da = r->da + row * nd * r->sn, *dl = r->dl + row * nd * r->sm;
            double *dw = r->dw + row * nd * r->sn;
            for (d = 0; d < nd; d++)
                for (k = 0; k < n; k++) {
                    dq[d * r->sn + k] = T1[q + k * nd + d];
                    dv[d * r->sn + k] = T1[v + k * nd + d];
                    da[d * r->sn + k] = T1[a + k * nd + d];
                }
            for (d = 0; d < nd; d++)
                for (k = 0; k < m; k++)
                    dl[d * r->sm + k] = T1[3 * nn + k * nd + d];
            if (r->dw != r->da)
                for (d = 0; d < nd; d++)
                    for (k = 0; k < n; k++)
                        dw[d * r->sn + k] = T1[wa + k * nd + d];
        }
        /* output_tangents */
        for (k = 0; k < SD_N_S * nd; k++)
            ds[k] = 0.0;
        r->state_product[2](r->S, T1, ds, r->coef);
        sd_product(r->pnnz[2], r->prow[2], r->pcol[2], r->pat[2], r->pcoef[2], r->S, r->D, ds,
                   nd);
        tmp = T0;
        T0 = T1;
        T1 = tmp;
        tmp = J0;
        J0 = J1;
        J1 = tmp;
        tmp = P0;
        P0 = P1;
        P1 = tmp;
    }
    r->T[0] = T0;
    r->T[1] = T1;
    r->J[0] = J0;
    r->J[1] = J1;
    r->P[0] = P0;
    r->P[1] = P1;
    return i;
}

#if SYMDAE_TANGENT_ND != 4
#error "sd_tangent_steps dispatches nd = 1 .. 4: follow SYMDAE_TANGENT_ND"
#endif
SD_O3_STORES
static long sd_tangent_steps(symdae_tangent_steps *r, long i, long last)
{
    switch (r->nd) {
    case 1: return sd_tangent_steps_nd(r, i, last, 1);
    case 2: return sd_tangent_steps_nd(r, i, last, 2);
    case 3: return sd_tangent_steps_nd(r, i, last, 3);
    case 4: return sd_tangent_steps_nd(r, i, last, 4);
    default: return i;      /* more directions than the written products: the core's step */
    }
}

#undef SD_ALWAYS_INLINE
#undef SD_O3_STORES
#undef SD_O3
#undef SD_SPARE
#undef SD_NX
#undef SD_NM
#endif
