/* The one interface between the compiled HHT core and a model's generated kernels.
 *
 * Every generated module exports a PyCapsule named "symdae.model" holding a pointer to a
 * static symdae_model. Every kernel has the same signature: it reads the state in `x`,
 * optional run-time coefficients `w`, and writes its entries of `out` (row-major). Kernels
 * never write structural zeros: the caller zeroes each output buffer once and must not reuse
 * a buffer for anything else. Kernels marked (+=) accumulate instead of assigning.
 *
 * Sizes: n coordinates, m constraints, n_p parameters, n_u inputs, n_s outputs; nm = n + m.
 * Notation: Ma = M(q) a, g = C_q^T lam - Q, J_M = d(Ma)/dq, J_G = dg/dq, G_V = dg/dv,
 * P_M = d(Ma)/dp, P_G = dg/dp, P_C = dC/dp, cdot = C_q v + C_t,
 * gamma = d(cdot)/dq v + d(cdot)/dt, Rc = C_q a + gamma (the acceleration constraint).
 *
 *  residual                 out = [Ma (n), g (n), C (m)]
 *  newton                   w = (c_m, c_q, c_v); out = nm x nm
 *                           [[c_m M + c_q (c_m J_M + J_G) + c_v G_V, C_q^T], [C_q, 0]]
 *  jacobians                out = [J_M (n x n), J_G (n x n), G_V (n x n), C_q (m x n)]
 *  param_jacobians          out = [P_M (n x n_p), P_G (n x n_p), P_C (m x n_p)]
 *  param_vjp          (+=)  w = (wM (n), wG (n), wC (m)); out (n_p) += wM P_M + wG P_G + wC P_C
 *  state_vjp          (+=)  w = (wM (n), wG (n), wC (m), wL (n)); out = [qbar (n), vbar (n),
 *                           unused (n), lbar (m)]: qbar += wM J_M + wG J_G + wC C_q,
 *                           vbar += wG G_V, lbar += C_q wL
 *  outputs                  out = s (n_s)
 *  output_jacobians         out = [ds/d(q, v, a, lam) (n_s x (3n + m)), ds/dp (n_s x n_p)]
 *  output_vjp         (+=)  w = dPhi (n_s); out = [xbar (3n + m), pbar (n_p)] += w ds/d(x, p)
 *  initial_state            out = [q0(p) (n), v0(p) (n)]
 *  initial_state_jacobian   out = [dq0/dp (n x n_p), dv0/dp (n x n_p)]
 *  constraint_velocity      out = cdot (m)
 *  acceleration_constraint  out = [gamma (m), dRc/dq (m x n), dgamma/dv (m x n), dRc/dp (m x n_p)]
 *  time_terms               out = tau[0 .. n_tau_forward): costly subexpressions in (t, p, u) only
 *  time_terms_sensitivity   out = tau[n_tau_forward .. n_tau), those only derivative kernels use
 *
 * Every other kernel reads x->tau, so before calling kernels at a new (t, u) the caller runs
 * time_terms (and, for derivative kernels, time_terms_sensitivity) into the tau buffer.
 */
#ifndef SYMDAE_KERNELS_H
#define SYMDAE_KERNELS_H

#define SYMDAE_ABI_VERSION 3

typedef struct {
    double t;
    const double *q, *v, *a, *lam, *p, *u, *tau;
} symdae_args;

typedef void (*symdae_kernel)(const symdae_args *x, const double *w, double *out);

typedef struct {
    int abi_version;
    int n, m, n_p, n_u, n_s, n_tau;
    symdae_kernel residual;
    symdae_kernel newton;
    symdae_kernel jacobians;
    symdae_kernel param_jacobians;
    symdae_kernel param_vjp;
    symdae_kernel state_vjp;
    symdae_kernel outputs;
    symdae_kernel output_jacobians;
    symdae_kernel output_vjp;
    symdae_kernel initial_state;
    symdae_kernel initial_state_jacobian;
    symdae_kernel constraint_velocity;
    symdae_kernel acceleration_constraint;
    symdae_kernel time_terms;
    symdae_kernel time_terms_sensitivity;
} symdae_model;

#endif
