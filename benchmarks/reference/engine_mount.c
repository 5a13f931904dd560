/* Hand-specialised HHT forward sweep and discrete adjoint of the hydraulic engine mount
 * (models/engine_mount.py), the speed-of-light proxy of benchmarks/bench_reference.py.
 *
 * Nothing here is generic: 4 coordinates (x1 engine, x2 massless node, x3 membrane, x4 fluid),
 * 1 linear constraint C = (a + b) x2 - b x3 - a x4, SI units, parameters in the model file's
 * order (P_* below). The discrete scheme is the one of symdae/simulation/core/hht.pyx and of the
 * discrete-adjoint paper, eq. (15), with s = beta h^2:
 *
 *   q_{i+1} = qhat + s a_{i+1},      qhat = q_i + h v_i + h^2 (1/2 - beta) a_i
 *   v_{i+1} = vhat + gamma h a_{i+1}, vhat = v_i + h (1 - gamma) a_i
 *   R_d = M a_{i+1} / (1 + alpha) + g_{i+1} - alpha / (1 + alpha) g_i,   g = C_q^T lam - Q
 *   R_c = C(q_{i+1}) / s
 *
 * Newton on y = (a_{i+1}, lam_{i+1}) exactly as the core does it (so that the two trajectories
 * agree to round-off): start from (a, lam) extrapolated linearly from the last two states, the
 * iteration matrix K of eq. (16) taken at that start value, refreshed at the current
 * iterate when the contraction estimate says it cannot reach the tolerance in three more
 * iterations; stop when the next correction is below rtol |y| plus the core's round-off floor,
 * or when every residual row is at its round-off level (same formulas as the core).
 *
 * What is specialised: K = [[D, B], [B^T, 0]] is symmetric, D = diag(2x2 block (x1, x2), d22,
 * d33) and B = C_q^T = (0, a + b, -b, -a); of its entries only d00 (through x1^2) and d33
 * (through v4^2) change from step to step. K y = r is solved by block elimination with the
 * Schur complement S = B^T D^-1 B > 0 (D is positive definite), about 25 flops, no pivoting;
 * K^T = K, so the adjoint uses the same solve. The adjoint recomputes the two varying entries
 * from the stored trajectory instead of storing factorisations. The cost (least squares on
 * a1 with the left rule, eta_i = h for i < N, 0 for i = N) is accumulated during the sweep.
 *
 * The gradient is dJ/d(cE1, cE2, dE, dH2) of the discrete cost: the paper's eqs. (9), (11),
 * (17)-(20) (with g_i's parameter dependence, eq. (20)'s alpha term) plus the term through the
 * consistent initial accelerations and multiplier (zero for q0 = v0 = 0, returned separately).
 *
 * Build: gcc -O2 -g0 -fPIC -shared engine_mount.c -o libem.so -lm (benchmarks compile it at
 * run time into a temporary folder).
 */
#include <float.h>
#include <math.h>
#include <stddef.h>

enum {
    P_CE1, P_CE2, P_DE, P_DH2, P_ML, P_MH, P_MM, P_CH, P_DH1, P_CM, P_DM, P_A, P_B, P_G, P_AMP,
    P_OMEGA0, P_C, EM_N_PARAMS
};

enum { EM_OK = 0, EM_NEWTON_FAILED = 1, EM_SINGULAR = 2, EM_NOT_FINITE = 3 };

#define FLOOR_FACTOR 10.0
#define NOISE_FACTOR 4.0

typedef struct {
    /* scheme */
    double h, cM, ap, s, gh, ca, cv1;
    /* model */
    double cE1, cE2, dE, dH2, mL, mH, mM, cH, dH1, cMem, dM, g, amp, om, lnC;
    double c1, c2, c3;            /* C_q = (0, c1, c2, c3) */
    /* constant parts of K */
    double k00c, k00x, k01, k11, k22, k33c, k33v, i22;
} em_ctx;

typedef struct {
    /* K^-1 by blocks: D^-1 = [[i00, i01], [i01, i11]] + diag(i22, i33), w = D^-1 B, 1/S */
    double d00, d33, i00, i01, i11, i22, i33, w0, w1, w2, w3, iS;
} em_fac;

static void em_setup(em_ctx *c, const double *p, double h, double alpha)
{
    double beta = 0.25 * (1.0 - alpha) * (1.0 - alpha), gam = 0.5 - alpha;
    c->h = h;
    c->cM = 1.0 / (1.0 + alpha);
    c->ap = alpha / (1.0 + alpha);
    c->s = beta * h * h;
    c->gh = gam * h;
    c->ca = h * h * (0.5 - beta);
    c->cv1 = h * (1.0 - gam);
    c->cE1 = p[P_CE1]; c->cE2 = p[P_CE2]; c->dE = p[P_DE]; c->dH2 = p[P_DH2];
    c->mL = p[P_ML]; c->mH = p[P_MH]; c->mM = p[P_MM]; c->cH = p[P_CH]; c->dH1 = p[P_DH1];
    c->cMem = p[P_CM]; c->dM = p[P_DM]; c->g = p[P_G]; c->amp = p[P_AMP];
    c->om = p[P_OMEGA0]; c->lnC = log(p[P_C]);
    c->c1 = p[P_A] + p[P_B];
    c->c2 = -p[P_B];
    c->c3 = -p[P_A];
    c->k00c = c->cM * c->mL + c->s * (c->cE1 + c->cH) + c->gh * c->dE;
    c->k00x = 3.0 * c->s * c->cE2;
    c->k01 = -c->s * c->cH;
    c->k11 = c->s * c->cH;
    c->k22 = c->cM * c->mM + c->s * c->cMem + c->gh * c->dM;
    c->k33c = c->cM * c->mH + c->gh * c->dH1;
    c->k33v = 3.0 * c->gh * c->dH2;
    c->i22 = 1.0 / c->k22;
}

/* -g mL - F(t), F = A sin(omega0 C^t t): the time-only part of g_0 */
static inline double em_tau(const em_ctx *c, double t)
{
    return -c->g * c->mL - c->amp * sin(c->om * exp(t * c->lnC) * t);
}

/* g = C_q^T lam - Q at (q, v, lam); returns C(q) */
static inline double em_g(const em_ctx *c, double tau, const double *q, const double *v,
                          double lam, double *g)
{
    double fH = c->cH * (q[0] - q[1]);
    double x1 = q[0], v4 = v[3];
    g[0] = fH + c->cE1 * x1 + c->cE2 * (x1 * x1 * x1) + c->dE * v[0] + tau;
    g[1] = -fH + c->c1 * lam;
    g[2] = c->c2 * lam + c->cMem * q[2] + c->dM * v[2];
    g[3] = c->c3 * lam + c->dH1 * v4 + c->dH2 * (v4 * v4 * v4);
    return c->c1 * q[1] + c->c2 * q[2] + c->c3 * q[3];
}

/* K's two entries that vary: d00 through x1^2, d33 through v4^2 */
static inline double em_d00(const em_ctx *c, double x1)
{
    return c->k00c + c->k00x * (x1 * x1);
}

static inline double em_d33(const em_ctx *c, double v4)
{
    return c->k33c + c->k33v * (v4 * v4);
}

/* K at (x1, v4), eliminated; 0, or EM_SINGULAR / EM_NOT_FINITE */
static inline int em_factor(const em_ctx *c, double x1, double v4, em_fac *f)
{
    double det, S;
    f->d00 = em_d00(c, x1);
    f->d33 = em_d33(c, v4);
    det = f->d00 * c->k11 - c->k01 * c->k01;
    if (!isfinite(det) || !isfinite(f->d33))
        return EM_NOT_FINITE;
    if (!(det > 0.0) || !(f->d33 > 0.0))
        return EM_SINGULAR;
    det = 1.0 / det;
    f->i00 = c->k11 * det;
    f->i01 = -c->k01 * det;
    f->i11 = f->d00 * det;
    f->i22 = c->i22;
    f->i33 = 1.0 / f->d33;
    f->w0 = f->i01 * c->c1;
    f->w1 = f->i11 * c->c1;
    f->w2 = f->i22 * c->c2;
    f->w3 = f->i33 * c->c3;
    S = c->c1 * f->w1 + c->c2 * f->w2 + c->c3 * f->w3;
    if (!(S > 0.0))
        return EM_SINGULAR;
    f->iS = 1.0 / S;
    return EM_OK;
}

/* y = K^-1 r (K symmetric, so also K^-T r); y may alias r */
static inline void em_solve(const em_ctx *c, const em_fac *f, const double *r, double *y)
{
    double z0 = f->i00 * r[0] + f->i01 * r[1];
    double z1 = f->i01 * r[0] + f->i11 * r[1];
    double z2 = f->i22 * r[2];
    double z3 = f->i33 * r[3];
    double y4 = (c->c1 * z1 + c->c2 * z2 + c->c3 * z3 - r[4]) * f->iS;
    y[0] = z0 - f->w0 * y4;
    y[1] = z1 - f->w1 * y4;
    y[2] = z2 - f->w2 * y4;
    y[3] = z3 - f->w3 * y4;
    y[4] = y4;
}

/* Round-off level of each residual row near the accepted state (the core's residual_noise,
 * written out for the 12 nonzeros of K, K there): sum_c |K_rc| fq_c
 * + eps (|cM Ma_r| + (1 + |ap|) |g_r|) with fq = eps (|q| + h |v| + h^2 |a|) / s for
 * accelerations and eps |lam| for lam. */
static inline void em_noise(const em_ctx *c, const double *q, const double *v,
                            const double *a, double lam, const double *g, double *nu)
{
    const double eps = DBL_EPSILON, h = c->h, e1 = eps * (1.0 + fabs(c->ap));
    const double d00 = em_d00(c, q[0]), d33 = em_d33(c, v[3]);
    double fq[5];
    int k;
    for (k = 0; k < 4; k++)
        fq[k] = (fabs(q[k]) + h * fabs(v[k]) + h * h * fabs(a[k])) * (eps / c->s);
    fq[4] = fabs(lam) * eps;
    nu[0] = fabs(d00) * fq[0] + fabs(c->k01) * fq[1]
            + eps * fabs(c->cM * c->mL * a[0]) + e1 * fabs(g[0]);
    nu[1] = fabs(c->k01) * fq[0] + fabs(c->k11) * fq[1] + fabs(c->c1) * fq[4] + e1 * fabs(g[1]);
    nu[2] = fabs(c->k22) * fq[2] + fabs(c->c2) * fq[4]
            + eps * fabs(c->cM * c->mM * a[2]) + e1 * fabs(g[2]);
    nu[3] = fabs(d33) * fq[3] + fabs(c->c3) * fq[4]
            + eps * fabs(c->cM * c->mH * a[3]) + e1 * fabs(g[3]);
    nu[4] = fabs(c->c1) * fq[1] + fabs(c->c2) * fq[2] + fabs(c->c3) * fq[3];
}

/* Consistent a0, lam0 at (t0, q0, v0): [[M, C_q^T], [C_q, 0]] (a0, lam0) = (Q, 0) (the
 * constraint is linear and time-free, so gamma = 0), solved in closed form. */
static void em_initial(const em_ctx *c, double t0, const double *q, const double *v,
                       double *a, double *lam)
{
    double g[4], Q[4], l;
    int k;
    em_g(c, em_tau(c, t0), q, v, 0.0, g);
    for (k = 0; k < 4; k++)
        Q[k] = -g[k];
    l = Q[1] / c->c1;                          /* row x2: massless, only lam and cH act */
    a[0] = Q[0] / c->mL;
    a[2] = (Q[2] - c->c2 * l) / c->mM;
    a[3] = (Q[3] - c->c3 * l) / c->mH;
    a[1] = -(c->c2 * a[2] + c->c3 * a[3]) / c->c1;
    *lam = l;
}

/* Forward sweep. p: the 17 parameters in model order; q0, v0: a consistent initial state;
 * data (N+1) the measured a1 (NULL: J = 0). Q, V, A (N+1, 4) and L (N+1) receive the
 * trajectory; pass Q = NULL to store nothing (cost only). out <- (J, Newton iterations,
 * Jacobian refreshes, steps stopped by the round-off test, failure time). Returns EM_OK or an
 * error code. */
int em_forward(const double *p, double t0, double h, long N, double alpha, const double *q0,
               const double *v0, double rtol, int max_iter, const double *data, double *Q,
               double *V, double *A, double *L, double *out)
{
    em_ctx c;
    em_fac fac, fr;
    const em_fac *cur;
    const double eps = DBL_EPSILON;
    double q[4], v[4], a[4], aprev[4], lam, lprev, qh[4], vh[4], qc[4], vc[4];
    double y[5], R[5], dy[5], g[4], gprev[4], nu[5];
    double tau, t1, C, rnorm, norm, norm_prev, wk, amax, lmax, fa, J = 0.0, r;
    long i, iters = 0, refreshes = 0, noise_stops = 0;
    int j, k, status = EM_OK, ok;
    const int store = Q != NULL;

    em_setup(&c, p, h, alpha);
    fa = FLOOR_FACTOR * eps / c.s;
    for (k = 0; k < 4; k++) {
        q[k] = q0[k];
        v[k] = v0[k];
    }
    em_initial(&c, t0, q, v, a, &lam);
    for (k = 0; k < 4; k++)
        aprev[k] = a[k];
    lprev = lam;
    if (store) {
        for (k = 0; k < 4; k++) {
            Q[k] = q[k];
            V[k] = v[k];
            A[k] = a[k];
        }
        L[0] = lam;
    }
    if (data != NULL && N > 0) {
        r = a[0] - data[0];
        J += r * r;
    }
    em_g(&c, em_tau(&c, t0), q, v, lam, gprev);
    em_noise(&c, q, v, a, lam, gprev, nu);

    for (i = 0; i < N; i++) {
        t1 = t0 + (i + 1) * h;
        for (k = 0; k < 4; k++) {
            qh[k] = q[k] + h * v[k] + c.ca * a[k];
            vh[k] = v[k] + c.cv1 * a[k];
            y[k] = 2.0 * a[k] - aprev[k];
        }
        y[4] = 2.0 * lam - lprev;
        tau = em_tau(&c, t1);
        cur = &fac;
        norm_prev = INFINITY;
        ok = 0;
        for (j = 0; j < max_iter; j++) {
            int at_noise = 1;
            for (k = 0; k < 4; k++) {
                qc[k] = qh[k] + c.s * y[k];
                vc[k] = vh[k] + c.gh * y[k];
            }
            C = em_g(&c, tau, qc, vc, y[4], g);
            iters++;
            R[0] = c.cM * (c.mL * y[0]) + g[0] - c.ap * gprev[0];
            R[1] = g[1] - c.ap * gprev[1];
            R[2] = c.cM * (c.mM * y[2]) + g[2] - c.ap * gprev[2];
            R[3] = c.cM * (c.mH * y[3]) + g[3] - c.ap * gprev[3];
            R[4] = C / c.s;
            rnorm = 0.0;
            for (k = 0; k < 5; k++) {
                wk = fabs(R[k]);
                if (!(wk <= rnorm))
                    rnorm = wk;
                if (!(wk <= NOISE_FACTOR * nu[k]))
                    at_noise = 0;
                R[k] = -R[k];
            }
            if (!isfinite(rnorm)) {
                status = EM_NOT_FINITE;
                break;
            }
            if (j == 0) {                      /* the iteration matrix at the start value */
                status = em_factor(&c, qc[0], vc[3], &fac);
                if (status != EM_OK)
                    break;
            }
            if (at_noise) {
                ok = 1;
                noise_stops++;
                break;
            }
            em_solve(&c, cur, R, dy);
            amax = 0.0;
            for (k = 0; k < 4; k++) {
                wk = fabs(y[k]);
                amax = wk > amax ? wk : amax;     /* not fmax: a libm call without -ffast-math */
            }
            amax *= FLOOR_FACTOR * eps;
            lmax = FLOOR_FACTOR * eps * fabs(y[4]);
            norm = 0.0;
            for (k = 0; k < 4; k++) {
                wk = rtol * fabs(y[k]) + fa * fabs(qc[k]) + amax;
                wk = wk > 0.0 ? fabs(dy[k]) / wk : (dy[k] == 0.0 ? 0.0 : INFINITY);
                if (!(wk <= norm))
                    norm = wk;
            }
            wk = rtol * fabs(y[4]) + lmax;
            wk = wk > 0.0 ? fabs(dy[4]) / wk : (dy[4] == 0.0 ? 0.0 : INFINITY);
            if (!(wk <= norm))
                norm = wk;
            if (norm <= 1.0) {
                ok = 1;
                break;
            }
            if (j > 0 && (norm >= norm_prev || norm * (norm / norm_prev)
                                                    * (norm / norm_prev) * (norm / norm_prev) > 1.0)) {
                if (em_factor(&c, qc[0], vc[3], &fr) != EM_OK)
                    break;                     /* K singular at an iterate: divergence */
                cur = &fr;
                refreshes++;
                em_solve(&c, cur, R, dy);
            }
            for (k = 0; k < 5; k++)
                y[k] += dy[k];
            norm_prev = norm;
        }
        if (!ok) {
            if (status == EM_OK)
                status = EM_NEWTON_FAILED;
            out[4] = t1;
            break;
        }
        /* accept x_{i+1} */
        for (k = 0; k < 4; k++) {
            aprev[k] = a[k];
            a[k] = y[k];
            q[k] = qc[k];
            v[k] = vc[k];
            gprev[k] = g[k];
        }
        lprev = lam;
        lam = y[4];
        if (store) {
            double *Qi = Q + 4 * (i + 1), *Vi = V + 4 * (i + 1), *Ai = A + 4 * (i + 1);
            for (k = 0; k < 4; k++) {
                Qi[k] = q[k];
                Vi[k] = v[k];
                Ai[k] = a[k];
            }
            L[i + 1] = lam;
        }
        if (data != NULL && i + 1 < N) {
            r = a[0] - data[i + 1];
            J += r * r;
        }
        em_noise(&c, q, v, a, lam, g, nu);
    }
    out[0] = 0.5 * h * J;
    out[1] = (double)iters;
    out[2] = (double)refreshes;
    out[3] = (double)noise_stops;
    return status;
}

/* dg_k/dp for the four identified parameters: g_0 = ... + cE1 x1 + cE2 x1^3 + dE v1,
 * g_3 = ... + dH2 v4^3; grad += P(x)^T (w0, ., ., w3) */
static inline void em_param_vjp(double x1, double v1, double v4, double w0, double w3,
                                double *grad)
{
    grad[0] += x1 * w0;
    grad[1] += (x1 * x1 * x1) * w0;
    grad[2] += v1 * w0;
    grad[3] += (v4 * v4 * v4) * w3;
}

/* Discrete adjoint (paper eqs. 9, 11) of J = h/2 sum_{i<N} (a1_i - data_i)^2 over the
 * trajectory em_forward stored. grad (4) <- dJ/d(cE1, cE2, dE, dH2); init (4, may be NULL) <-
 * the part of it that flows through the consistent (a0, lam0). Returns EM_OK or EM_SINGULAR. */
int em_adjoint(const double *p, double t0, double h, long N, double alpha, const double *Q,
               const double *V, const double *A, const double *L, const double *data,
               double *grad, double *init)
{
    em_ctx c;
    em_fac f;
    double qb[4], vb[4], ab[4], lb, mu[5], rn[4], qt[4], vt[4], kq, kv, z[5];
    const double *q, *v;
    long i;
    int k, st;
    (void)t0;
    (void)L;                  /* K and the Jacobians do not depend on lam */

    em_setup(&c, p, h, alpha);
    for (k = 0; k < 4; k++) {
        grad[k] = 0.0;
        qb[k] = vb[k] = ab[k] = rn[k] = 0.0;
    }
    lb = 0.0;
    /* output source of state N: eta_N = 0 (left rule) */
    for (i = N - 1; i >= 0; i--) {
        /* xbar holds the adjoint of x_{i+1}; step i -> i+1 */
        q = Q + 4 * (i + 1);
        v = V + 4 * (i + 1);
        for (k = 0; k < 4; k++)
            mu[k] = ab[k] + c.s * qb[k] + c.gh * vb[k];
        mu[4] = lb;
        st = em_factor(&c, q[0], v[3], &f);
        if (st != EM_OK)
            return EM_SINGULAR;
        em_solve(&c, &f, mu, mu);
        for (k = 0; k < 5; k++)
            mu[k] = -mu[k];                        /* r = -K^-T ybar */
        /* qhat, vhat adjoints: (dg/dq)_{i+1}^T r_d + C_q^T r_c / s, (dg/dv)_{i+1}^T r_d */
        kq = c.cE1 + 3.0 * c.cE2 * (q[0] * q[0]) + c.cH;
        kv = c.dH1 + 3.0 * c.dH2 * (v[3] * v[3]);
        qt[0] = qb[0] + kq * mu[0] - c.cH * mu[1];
        qt[1] = qb[1] - c.cH * mu[0] + c.cH * mu[1] + c.c1 * mu[4] / c.s;
        qt[2] = qb[2] + c.cMem * mu[2] + c.c2 * mu[4] / c.s;
        qt[3] = qb[3] + c.c3 * mu[4] / c.s;
        vt[0] = vb[0] + c.dE * mu[0];
        vt[1] = vb[1];
        vt[2] = vb[2] + c.dM * mu[2];
        vt[3] = vb[3] + kv * mu[3];
        /* parameters at state i+1: in step i -> i+1 (g_{i+1}), in step i+1 -> i+2 (-ap g_{i+1}) */
        em_param_vjp(q[0], v[0], v[3], mu[0] - c.ap * rn[0], mu[3] - c.ap * rn[3], grad);
        for (k = 0; k < 4; k++)
            rn[k] = mu[k];
        /* state i: predictor adjoints, its -ap g_i term, the output source */
        q = Q + 4 * i;
        v = V + 4 * i;
        kq = c.cE1 + 3.0 * c.cE2 * (q[0] * q[0]) + c.cH;
        kv = c.dH1 + 3.0 * c.dH2 * (v[3] * v[3]);
        qb[0] = qt[0] - c.ap * (kq * mu[0] - c.cH * mu[1]);
        qb[1] = qt[1] - c.ap * (c.cH * mu[1] - c.cH * mu[0]);
        qb[2] = qt[2] - c.ap * (c.cMem * mu[2]);
        qb[3] = qt[3];
        vb[0] = h * qt[0] + vt[0] - c.ap * (c.dE * mu[0]);
        vb[1] = h * qt[1] + vt[1];
        vb[2] = h * qt[2] + vt[2] - c.ap * (c.dM * mu[2]);
        vb[3] = h * qt[3] + vt[3] - c.ap * (kv * mu[3]);
        for (k = 0; k < 4; k++)
            ab[k] = c.ca * qt[k] + c.cv1 * vt[k];
        ab[0] += h * (A[4 * i] - data[i]);
        lb = -c.ap * (c.c1 * mu[1] + c.c2 * mu[2] + c.c3 * mu[3]);
    }
    /* g_0 enters step 0 -> 1 through -ap g_0 */
    if (N > 0)
        em_param_vjp(Q[0], V[0], V[3], -c.ap * rn[0], -c.ap * rn[3], grad);
    /* consistent (a0, lam0): K0 y0 = (Q(x0, p), 0), K0 = [[M, C_q^T], [C_q, 0]] symmetric;
     * r = -K0^-1 (ab, lb), grad += P(x0)^T r_d (q0, v0 are given numbers) */
    z[4] = ab[1] / c.c1;
    z[0] = ab[0] / c.mL;
    z[2] = (ab[2] - c.c2 * z[4]) / c.mM;
    z[3] = (ab[3] - c.c3 * z[4]) / c.mH;
    {
        double g0[4] = {0.0, 0.0, 0.0, 0.0};
        em_param_vjp(Q[0], V[0], V[3], -z[0], -z[3], g0);
        for (k = 0; k < 4; k++) {
            grad[k] += g0[k];
            if (init != NULL)
                init[k] = g0[k];
        }
    }
    return EM_OK;
}
