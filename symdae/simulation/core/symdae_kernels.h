/* The one interface between the compiled HHT core and a model's generated kernels.
 *
 * Every generated module exports a PyCapsule named "symdae.model" holding a pointer to a
 * static symdae_model: the model's sizes and one entry per kernel (function, output and weight
 * sizes). Every kernel has the same signature: it reads the state in `x` and optional
 * run-time weights `w`, and writes (or adds to) its entries of `out`. Which kernels there are,
 * their weights and their output blocks are defined in ONE place, symdae/model/kernels.py (the
 * kernel spec); this enum lists them in the spec's order (tests/model/test_kernel_spec.py checks it).
 * Kernels never write structural zeros: the caller zeroes each output buffer once.
 *
 * Every kernel reads x->tau, the hoisted (t, p, u)-only terms: before calling kernels at a new
 * (t, u) the caller runs SYMDAE_TIME_TERMS (the forward terms, tau[0 : n_forward]) or
 * SYMDAE_TIME_TERMS_SENSITIVITY (all n_tau of them, the forward ones bit for bit as
 * SYMDAE_TIME_TERMS computes them) into the tau buffer, as the `tau` field of the kernels it
 * calls says.
 *
 * x->st, the state terms: the costly functions of (t, q, v) (sin, cos, exp, ...) that the
 * residual evaluates. SYMDAE_STATE_TERMS computes them (n_st of them); every kernel that
 * contains one reads it from x->st when x->st is not NULL, so that a sweep evaluates them
 * once per state (a forward sweep: once per Newton iterate) and not once per kernel; with
 * x->st NULL a kernel evaluates them itself, with the same result bit for bit. A caller that sets x->st must have computed it
 * at x's (t, q, v, p, u, tau).
 */
#ifndef SYMDAE_KERNELS_H
#define SYMDAE_KERNELS_H

#define SYMDAE_ABI_VERSION 21

typedef struct {
    double t;
    const double *q, *v, *a, *lam, *p, *u, *tau;
    const double *st;     /* the state terms at (t, q, v), or NULL (see the top of this file) */
} symdae_args;

typedef void (*symdae_kernel)(const symdae_args *x, const double *w, double *out);

typedef enum {
    SYMDAE_RESIDUAL,
    SYMDAE_NEWTON,
    SYMDAE_OUTPUTS,
    SYMDAE_RESIDUAL_MAGNITUDE,
    SYMDAE_JACOBIANS,
    SYMDAE_PARAM_JACOBIANS,
    SYMDAE_OUTPUT_JACOBIANS,
    SYMDAE_STATE_JVP,
    SYMDAE_PARAM_JVP,
    SYMDAE_OUTPUT_JVP,
    SYMDAE_STATE_VJP,
    SYMDAE_PARAM_VJP,
    SYMDAE_OUTPUT_VJP,
    SYMDAE_INITIAL_STATE,
    SYMDAE_INITIAL_STATE_JACOBIAN,
    SYMDAE_CONSTRAINT_VELOCITY,
    SYMDAE_ACCELERATION_CONSTRAINT,
    SYMDAE_INPUT_VJP,
    SYMDAE_STATE_HVP,
    SYMDAE_MASSLESS_ROWS,
    SYMDAE_TIME_TERMS,
    SYMDAE_TIME_TERMS_SENSITIVITY,
    SYMDAE_STATE_TERMS,
    SYMDAE_N_KERNELS
} symdae_kernel_id;

typedef struct {
    symdae_kernel fn;
    int out_size;     /* entries of out it writes (its blocks, see the kernel spec) */
    int w_size;       /* entries of w it reads */
    int accumulate;   /* 1: adds to out, 0: assigns */
    int tau;          /* the time terms it reads: 1 the forward ones (SYMDAE_TIME_TERMS), 2 the
                         sensitivity ones (SYMDAE_TIME_TERMS_SENSITIVITY), 3 both, 0 none */
} symdae_kernel_entry;

/* The Newton matrix's LU written out for one pivot order (symdae/model/lu_plan.py): the
 * core's sparse refactor, solve and solve_t (sparse.pxd) for that order, operation for
 * operation on the same storage of the factors B (N x N, N = n + m: L below the diagonal, U
 * above it, the reciprocals of U's pivots on it). lu_factor(K, B, tol)
 * returns 0, -1 (an entry of K is not finite), SYMDAE_LU_UNSTABLE (a pivot below tol times
 * the largest entry of its column, or one whose reciprocal overflows) or k + 1 (pivot k is
 * zero, and so is its column). */
#define SYMDAE_LU_UNSTABLE (-2)
/* A small kernel or solve that a module's compiled adjoint step (compiled_steps.h) calls,
 * inlined there (symdae/model/emit.py's STEP_INLINE_KERNELS, lu_plan.py's
 * written_lu_solve_t): the calls and the weight buffers between them then cost the step
 * nothing, and the arithmetic stays the same (no contraction, no reassociation: the same
 * numbers bit for bit). The kernel table takes their address too, so the compiler keeps an
 * out-of-line copy for the core's generic step. */
#if defined(__GNUC__)
#define SYMDAE_STEP_INLINE __attribute__((always_inline)) inline
#else
#define SYMDAE_STEP_INLINE inline
#endif
typedef int (*symdae_lu_factor)(const double *K, double *B, double tol);
typedef void (*symdae_lu_solve)(const double *B, double *b);
/* lu_solve on one of nd right-hand sides stored by row: b[k nd] is its entry k */
typedef void (*symdae_lu_solve_rows)(const double *B, double *b, int nd);

/* The tangent sweep's products with the state Jacobian blocks written out for nd = 1 ..
 * SYMDAE_TANGENT_ND directions (symdae/model/tangent_products.py): tangent.pxd's NEW_STATE,
 * OLD_STATE and OUT_STATE products entry for entry, in the order its collect_products lists
 * them, with constant indices: y += P(vals) x, x and y by row (entry k of direction d at
 * k nd + d), coef = (c_M, 1 / s, -alpha_p). fn[nd][k] is product k for nd directions (NULL:
 * none, the core's lists then), nnz[k] its entries: the core takes it where its structure
 * pass counted as many. */
#define SYMDAE_TANGENT_ND 4
typedef void (*symdae_tangent_product)(const double *vals, const double *x, double *y,
                                       const double *coef);
typedef struct {
    int nnz[3];
    symdae_tangent_product fn[SYMDAE_TANGENT_ND + 1][3];
} symdae_tangent_products;

/* The run the compiled steps below work on: its time grid, the scheme's coefficients
 * (scheme.pxd), the parameters and the trajectory's rows (the forward steps write the states
 * they take; the adjoint steps only read) */
typedef struct {
    double t0, h;             /* state i is at t0 + (offset + i) h */
    long offset;
    double cM, ap, s, gh, ca, cv1, cq, cvq, ry, rp;
    double kw[3];
    const double *p, *u;
    double *q, *v, *a, *w, *lam;
} symdae_run;

/* The forward sweep's steps compiled into the kernel module for its sizes
 * (compiled_steps.h): the common path of newton.pxd's step and hht.pyx's loop, on state
 * arrays the C compiler keeps in registers. The core fills this record and calls
 * forward_steps(r, i, last) with state i of the trajectory settled (its outputs written,
 * gprev = g_i, nu and fq the round-off levels the sweep carries, which must be set); it
 * solves steps i -> i+1, ... up to state last and returns the state it reached. It stops
 * before a step that leaves the common path (Newton fails or refreshes its matrix, the
 * written LU refuses K at the start value or at the accepted state, a far root), which the
 * core's generic step then takes from the start: what it wrote is exactly what the generic
 * step would have. The rows of the run's q, v, a, w, lam and u, of s_out and of the stored
 * ones are states (n, n, n, n, m, n_u, n_s, ... per row). */
typedef struct {
    symdae_run run;
    double rtol, pivot_tol;
    int max_iter, refresh_horizon;
    double *s_out;
    const int *noise_row, *noise_idx;   /* the K entries of the round-off coupling (newton.pxd) */
    int noise_nn;
    double *nu, *fq, *gprev;      /* in and out: as the generic step reads and leaves them */
    double *K, *LU, *Ks;          /* scratch, N x N each: the Newton matrix at the start value,
                                     its LU, and the matrix at the accepted state; zero at K's
                                     structural zeros, which the kernels never write */
    /* what the sweep stores of each state for the derivative sweeps, or NULL: the factorised
     * Newton matrix (rows of N x N and N + 1 pivots, piv[N] = piv_sparse: the written LU's),
     * all time terms (n_tau) and the state terms (n_st) */
    double *lu_out, *tau_out, *st_out;
    int *piv_out;
    int piv_sparse;
    /* all time terms of every state, computed before the sweep (a row per state, n_tau each,
     * as SYMDAE_TIME_TERMS_SENSITIVITY writes them), or NULL: the steps read their rows
     * instead of evaluating the time terms (tau_out is then NULL) */
    const double *tau_in;
    long iterations, factorizations;    /* added to per step taken */
} symdae_steps;

typedef long (*symdae_forward_steps)(symdae_steps *r, long i, long last);

/* The adjoint sweep's steps compiled into the kernel module (compiled_steps.h): hht.pyx's
 * backward loop over the states a forward sweep stored. adjoint_steps(r, i, stop) takes the
 * adjoint of state i (xb, wb, rd_next, the parameter adjoint gacc, and the sweep's scratch
 * hat: as the core's AdjointWork holds them) back to state stop, one step at a time with the
 * output source of each state it reaches, and returns the state it reached: it stops at a
 * state whose stored factorisation is the dense LU's (piv[N] != piv_sparse), or, where the
 * sweep stored none (lu NULL), whose Newton matrix the written LU refuses (it factorises
 * each into LUw, K its scratch, with pivot_tol, as the tangent steps do), whose step the
 * core's generic one then takes. The stored rows: lu (N x N), piv (N + 1), tau (n_tau), st
 * (n_st), dphi (n_s: the cost's derivative with respect to the outputs). */
typedef struct {
    symdae_run run;
    const double *lu, *tau, *st, *dphi;
    const int *piv;
    int piv_sparse;
    double pivot_tol;
    double *K, *LUw;                            /* scratch, N x N each (lu NULL) */
    double *xb, *gacc, *wb, *rd_next, *hat;     /* in and out */
} symdae_adjoint_steps;

typedef long (*symdae_backward_steps)(symdae_adjoint_steps *r, long i, long stop);

/* The tangent sweep's steps compiled into the kernel module (compiled_steps.h): hht.pyx's
 * tangent loop with tangent.pxd's tangent_step and output_tangents, for nd = 1 ..
 * SYMDAE_TANGENT_ND directions. tangent_steps(r, i, last) takes the tangents of state i
 * (T[0], with the Jacobian blocks there in J[0] and P[0]) to state last, one step at a time,
 * writing each state's output sensitivities (and its tangents where the sweep keeps them),
 * and returns the state it reached with T[0], J[0] and P[0] holding that state's (T, J and P
 * are the core's pairs of pointers, which the steps swap as the core's step does). It stops before a step whose
 * factorisation is not the written LU's (a stored dense one, or one the written LU refuses
 * when it refactorises), which the core's generic step then takes from the start. Buffers
 * by row as tangent.pxd's: entry k of direction d at k nd + d. */
typedef struct {
    symdae_run run;
    int nd;
    const double *tau_in, *st_in;   /* the stored time and state terms of every state, or
                                       NULL: evaluated (tau_reads: the TAU_* bits, scheme.pxd) */
    int tau_reads;
    const double *lu;               /* the stored factorisations (and pivots), or NULL */
    const int *piv;
    int piv_sparse;
    double pivot_tol;
    double *K, *LUw;                /* scratch to refactorise: N x N each */
    double **T, **J, **P;           /* in and out: the core's pairs */
    double *S, *xnew, *rhs;         /* scratch: output blocks, (qhat, vhat), right-hand sides */
    const double *D;                /* the directions, n_p x nd */
    /* the written products with the state blocks (NEW_STATE, OLD_STATE, OUT_STATE) and the
     * core's lists for the parameter blocks (NEW_PARAMS, OLD_PARAMS, OUT_PARAMS) */
    symdae_tangent_product state_product[3];
    const double *coef;             /* c_M, 1 / s, -alpha_p */
    const int *prow[3], *pcol[3], *pat[3];
    const double *pcoef[3];
    int pnnz[3];
    /* the output sensitivities (row i at ds + i ds_stride) and the sweep's tangents
     * (row i % rows at dq + (i % rows) nd sn, ...; stored every state when rows > N, else
     * at state N only; dw == da: w is a) */
    double *ds;
    long ds_stride, rows, N;
    double *dq, *dv, *da, *dw, *dl;
    int sn, sm;
} symdae_tangent_steps;

typedef long (*symdae_forward_tangent_steps)(symdae_tangent_steps *r, long i, long last);

typedef struct {
    int abi_version;
    int n, m, n_p, n_u, n_s, n_tau;
    int n_st;         /* state terms (SYMDAE_STATE_TERMS) */
    int jumps;        /* 1: the residual has terms that jump (sign, Heaviside, Piecewise) */
    int refresh_horizon;  /* Newton refreshes its matrix when it predicts more than this many
                             further iterations (newton.pxd): what a refresh costs in
                             iterations, larger where forming K costs many residuals */
    symdae_kernel_entry kernel[SYMDAE_N_KERNELS];
    /* the written-out LU, or lu_factor NULL (a model too large for it): the order it is
     * written for (lu_order: N row then N column indices, the core's order array), and the
     * structural nonzeros of K it reads (lu_kpos: lu_nk flat indices of K, in the row-major
     * order of the permuted matrix) */
    const int *lu_order;
    const int *lu_kpos;
    int lu_nk;
    symdae_lu_factor lu_factor;
    symdae_lu_solve lu_solve;
    symdae_lu_solve lu_solve_t;
    symdae_lu_solve_rows lu_solve_rows;
    /* the forward sweep's compiled steps, or NULL (a module without the written-out LU, with
     * graph kernels, or whose residual jumps) */
    symdae_forward_steps forward_steps;
    symdae_backward_steps adjoint_steps;    /* compiled_steps.h, or NULL (as forward_steps) */
    symdae_forward_tangent_steps tangent_steps;  /* compiled_steps.h, or NULL (as forward_steps) */
    symdae_tangent_products tangent;        /* the tangent sweep's written-out products */
} symdae_model;

#endif
