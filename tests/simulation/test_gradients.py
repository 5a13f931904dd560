"""Exact gradients of discrete costs: discrete adjoint = tangent-linear = finite differences.

"Exact" (DESIGN.md) means the derivative of the *discrete* cost J(p) = Phi(S(p)), S the outputs
of the HHT trajectory that ``System.simulate`` computes. Three independent routes must agree:

* the discrete adjoint (``adjoint_gradient``: one backward sweep, all parameters);
* the tangent-linear sweep (``tangent``: all parameters as directions) contracted with
  dPhi/dS. Both are exact for the same scheme, so they agree to round-off: asserted to 1e-10;
* central finite differences of J(p) with relative steps delta and delta/2. Their error is
  truncation ~ delta^2 J'''/6 plus the round-off noise of J over delta (index-3 HHT resolves
  a only to ~ eps |q| / (beta h^2)). Every case's delta is chosen so truncation dominates: the
  FD error at delta/2 must be below FD_TOL (2e-6), and every parameter whose FD error at delta
  is above RICH_FLOOR (1e-7 of the gradient norm) must show it falling by a factor 3.2..5
  (4 for an O(delta^2) error) when the step is halved (Richardson check). Below that floor the
  quotient is at its noise or exact (J quadratic in the parameter: oscillator q_init, chain
  force amplitude A), and only its size is asserted.

Error measure. Parameters span many orders of magnitude (engine mount: cE2 = 2.5e9 N/m^3,
mH = 1.9e-3 kg), so gradients are compared in log-parameter scaling g_k |p_k| = dJ/d ln p_k:
err(g, ref) = max_k |g_k - ref_k| |p_k| / max_k |ref_k| |p_k|, a norm-wise (infinity-norm)
relative error of the scaled gradient vector. Against the tangent, every parameter with a
meaningful sensitivity (|ref_k p_k| >= 1e-2 of the max) must in addition agree to 1e-10
relative on its own.

1. Every bundled model, alpha = 0 and -0.3, all parameters (spring chain: all 43 against the
   tangent, 11 against FD): weighted least squares on outputs of positions, velocities,
   accelerations and multipliers against data from a perturbed-parameter run (residuals O(1));
   OutputIntegral of a multiplier output (pendulum lambda, slider-crank F_rod = 2 l lambda_rod,
   an output that contains a parameter). This covers parameters inside constraints (pendulum L,
   slider-crank r, l, e; engine-mount a, b), parameters that move the consistent a0 / lambda0
   (oscillator m, c with q0 = q_init != 0; pendulum m, g, L, d) and parameters of the
   initial-state expressions (q_init, theta0, omega0, phi0); the initial-state sensitivities
   themselves are checked against FD of (q0, v0, a0, lambda0).
2. The oscillator of the paper's section 4: its A, B and explicit alpha = 0 recursion follow
   from eq. (15) (checked here; the printed matrix has no typo), and symdae's gradient equals
   that recursion plus the initial-state term the paper drops (delta x0 = 0 there, but a0 =
   -(c q0 + d v0)/m depends on c, d, m, q_init), derived by hand; also for alpha = -0.3.
3. Options: store_factorizations=False (the sweeps refactorise K themselves) gives the same
   gradient; v0 given as numbers still differentiates q0 through the model's expressions.
4. project=True: the sweeps refuse (the projection's derivative is not generated).

alpha = 0 on index-3 models: the trapezoidal rule carries an undamped, linearly growing
period-2 mode in a and lambda that amplifies round-off, so those horizons are short and the
steps coarse. ``pytest tests/simulation/test_gradients.py -s`` prints the measured errors of each case.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytest

import symdae
from symdae.costs.time_domain import LeastSquares, OutputIntegral
from symdae.simulation.sensitivity import adjoint_gradient, tangent

ALPHAS = (0.0, -0.3)
TLM_TOL = 1e-10      # adjoint vs tangent-linear, norm-wise scaled and per sensitive parameter
SENSITIVE = 1e-2     # "meaningful sensitivity": |g_k p_k| >= SENSITIVE * max_j |g_j p_j|
FD_TOL = 2e-6        # FD (step delta/2) vs adjoint, norm-wise scaled
RICH_FLOOR = 1e-7    # FD error at delta above which the quadratic decrease is asserted
RATIO = (3.2, 5.0)   # err(delta) / err(delta/2) for an O(delta^2) error: 4


# ---------------------------------------------------------------------------- helpers
@functools.cache
def compiled(name: str):
    model, _ = symdae.load_model(name)
    return symdae.compile_model(model)


def scaled_error(g, ref, p) -> float:
    """max_k |g_k - ref_k| |p_k| / max_k |ref_k| |p_k| (norm-wise, log-parameter scaling)."""
    s = np.where(p != 0, np.abs(p), 1.0)
    return float(np.max(np.abs(g - ref) * s) / np.max(np.abs(ref) * s))


def per_parameter_error(g, ref, p):
    """Relative error of each parameter whose scaled sensitivity is meaningful."""
    s = np.where(p != 0, np.abs(p), 1.0)
    sens = np.abs(ref) * s
    keep = sens >= SENSITIVE * sens.max()
    return np.abs(g - ref)[keep] / np.abs(ref)[keep], keep


def perturbed(p0: np.ndarray, size: float = 0.05) -> np.ndarray:
    """Deterministic, different relative perturbation of every parameter."""
    return p0 * (1.0 + size * np.sin(np.arange(len(p0)) + 1.0))


@dataclass
class Case:
    """One model and alpha: horizon, step, fitted outputs, FD steps and FD parameters."""

    model: str
    alpha: float
    T: float
    h: float
    outputs: dict              # {output: extra weight}; base weight 1 / mean(reference^2)
    quadrature: str
    fd: float                  # relative FD step delta (and delta / 2)
    fd_params: tuple | None = None   # None: all parameters

    @property
    def id(self) -> str:
        return f"{self.model}-alpha{self.alpha:g}"

    def simulate(self, system, p, store=False):
        return system.simulate(t_end=self.T, h=self.h, alpha=self.alpha,
                               params=dict(zip(system.model.parameter_names, p)),
                               store_factorizations=store)


def least_squares(system, case: Case, p_ref: np.ndarray) -> LeastSquares:
    ref = case.simulate(system, p_ref)
    data = {k: ref.outputs[k] for k in case.outputs}
    weights = {k: w / float(np.mean(ref.outputs[k] ** 2)) for k, w in case.outputs.items()}
    return LeastSquares(data, weights=weights, quadrature=case.quadrature)


def central(fun, p0, k, rel):
    """Central difference of fun along parameter k, step rel |p_k| (rel if p_k = 0)."""
    d = rel * (abs(p0[k]) or 1.0)
    pp, pm = p0.copy(), p0.copy()
    pp[k] += d
    pm[k] -= d
    return (fun(pp) - fun(pm)) / (2 * d)


def fd_gradient(system, case: Case, cost, p0, rel, names):
    """Central differences of J(p) for the parameters ``names`` (NaN elsewhere)."""
    def J_of(p):
        return cost.evaluate(system, case.simulate(system, p))[0]

    g = np.full(len(p0), np.nan)
    for name in names:
        k = system.model.parameter_names.index(name)
        g[k] = central(J_of, p0, k, rel)
    return g


def check_gradient(system, case: Case, cost, label: str) -> dict:
    """Adjoint vs tangent (all parameters) vs central FD (case.fd_params); returns the errors."""
    names = system.model.parameter_names
    p0 = np.array(system.model.nominal_values, dtype=float)
    assert np.all(p0 != 0), "scaled errors need non-zero nominal values"
    traj = case.simulate(system, p0, store=True)
    J, dPhi = cost.evaluate(system, traj)
    g_adj = adjoint_gradient(system, traj, dPhi)
    tg = tangent(system, traj, names)
    g_tlm = np.einsum("is,isd->d", dPhi, tg.ds)
    assert np.all(np.isfinite(g_adj)) and np.all(np.isfinite(g_tlm))
    assert np.max(np.abs(g_tlm * p0)) > 0

    e_tlm = scaled_error(g_adj, g_tlm, p0)
    e_par, keep = per_parameter_error(g_adj, g_tlm, p0)

    fd_names = list(case.fd_params or names)
    sel = np.array([names.index(n) for n in fd_names])
    fd1 = fd_gradient(system, case, cost, p0, case.fd, fd_names)[sel]
    fd2 = fd_gradient(system, case, cost, p0, case.fd / 2, fd_names)[sel]
    s = np.abs(p0[sel])
    norm = np.max(np.abs(g_adj * p0))            # scale of the whole gradient
    e1 = np.abs(fd1 - g_adj[sel]) * s / norm     # per parameter, in units of the gradient
    e2 = np.abs(fd2 - g_adj[sel]) * s / norm
    res = dict(J=J, tlm=e_tlm, tlm_par=float(e_par.max()), fd1=float(e1.max()),
               fd2=float(e2.max()), n_sens=int(keep.sum()))
    big = e1 > RICH_FLOOR
    ratios = e1[big] / e2[big]
    res["ratios"] = (round(float(ratios.min()), 3), round(float(ratios.max()), 3), int(big.sum())) \
        if big.any() else None
    print(f"\n{label}: J = {J:.4g}  adjoint-vs-tangent {e_tlm:.1e} (worst of "
          f"{res['n_sens']} sensitive parameters {res['tlm_par']:.1e})  adjoint-vs-FD "
          f"{res['fd1']:.1e} (delta = {case.fd:g}) -> {res['fd2']:.1e} (delta/2), "
          f"ratios (min, max, count) {res['ratios']}")

    assert e_tlm <= TLM_TOL, (label, e_tlm)
    assert e_par.max() <= TLM_TOL, (label, dict(zip(np.array(names)[keep], e_par)))
    assert res["fd2"] <= FD_TOL, (label, dict(zip(fd_names, e2)))
    # truncation, not noise: the dominant FD error is above the floor and falls like delta^2
    assert big.any(), (label, "FD error at round-off for every parameter: increase delta")
    bad = {n: (a, b) for n, a, b, r in zip(np.array(fd_names)[big], e1[big], e2[big], ratios)
           if not RATIO[0] <= r <= RATIO[1]}
    assert not bad, (label, "FD error does not fall like delta^2", bad)
    return res


# ---------------------------------------------------------------------------- 1. all models
CASES = [
    # oscillator: every output, q0 = q_init = 1 (so c and m move a0), the paper's left rule
    Case("oscillator", 0.0, 3.0, 1e-2, {"a": 1.0, "q": 2.0, "v": 0.5}, "left", 5e-5),
    Case("oscillator", -0.3, 3.0, 1e-2, {"a": 1.0, "q": 2.0, "v": 0.5}, "left", 5e-5),
    # pendulum: L in the constraint and in the initial state; g, m move lambda0
    Case("pendulum", 0.0, 0.3, 1e-2, {"x": 1.0, "vy": 1.0, "ax": 0.5, "lambda": 2.0},
         "trapezoid", 2e-4),
    Case("pendulum", -0.3, 2.0, 1e-2, {"x": 1.0, "vy": 1.0, "ax": 0.5, "lambda": 2.0},
         "trapezoid", 1e-4),
    # engine mount: massless node, lever constraint with a, b; stiff hydro mode (mH, cH)
    Case("engine_mount", 0.0, 0.01, 1e-4, {"a1": 1.0, "x1": 1.0, "v4": 0.3, "lambda": 1.0},
         "sum", 1e-4),
    Case("engine_mount", -0.3, 0.1, 2e-4, {"a1": 1.0, "x1": 1.0, "v4": 0.3, "lambda": 1.0},
         "trapezoid", 2e-4),
    # slider-crank: r, l, e inside constraints, l also in the output F_rod
    Case("slider_crank", 0.0, 0.3, 5e-3,
         {"x_s": 1.0, "v_s": 1.0, "a_s": 0.5, "phi": 1.0, "omega": 1.0, "F_rod": 1.0,
          "N_guide": 0.5}, "trapezoid", 7e-5),
    Case("slider_crank", -0.3, 0.3, 1e-3,
         {"x_s": 1.0, "v_s": 1.0, "a_s": 0.5, "phi": 1.0, "omega": 1.0, "F_rod": 1.0,
          "N_guide": 0.5}, "left", 1e-4),
    # spring chain: all 43 parameters against the tangent, a subset against FD
    Case("spring_chain", 0.0, 0.8, 2e-3, {"a_end": 1.0, "x_end": 1.0}, "trapezoid", 1e-4,
         ("A", "w", "mass", "c1", "d1", "c8", "d8", "c15", "d15", "c20", "d20")),
    Case("spring_chain", -0.3, 0.8, 2e-3, {"a_end": 1.0, "x_end": 1.0}, "trapezoid", 1e-4,
         ("A", "w", "mass", "c1", "d1", "c8", "d8", "c15", "d15", "c20", "d20")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_least_squares_gradient(case):
    system = compiled(case.model)
    p0 = np.array(system.model.nominal_values, dtype=float)
    cost = least_squares(system, case, perturbed(p0))
    check_gradient(system, case, cost, f"LS {case.id}")


OI_CASES = [
    Case("pendulum", 0.0, 0.3, 1e-2, {}, "trapezoid", 1e-3),
    Case("pendulum", -0.3, 0.6, 1e-2, {}, "trapezoid", 1e-3),
    Case("slider_crank", 0.0, 0.3, 5e-3, {}, "trapezoid", 1e-4),
    Case("slider_crank", -0.3, 0.3, 1e-3, {}, "trapezoid", 1e-4),
]
OI_OUTPUT = {"pendulum": "lambda", "slider_crank": "F_rod"}


@pytest.mark.parametrize("case", OI_CASES, ids=[c.id for c in OI_CASES])
def test_output_integral_gradient(case):
    """J = integral of a multiplier output (slider-crank: F_rod = 2 l lambda_rod, whose
    expression depends on the parameter l itself)."""
    system = compiled(case.model)
    check_gradient(system, case, OutputIntegral(OI_OUTPUT[case.model]),
                   f"OutputIntegral({OI_OUTPUT[case.model]}) {case.id}")


@pytest.mark.parametrize("name", ["oscillator", "pendulum", "engine_mount", "slider_crank"])
def test_initial_state_sensitivities(name):
    """Row 0 of the tangent sweep, d(q0, v0, a0, lambda0)/dp, equals central differences of the
    consistent initial state: the parameters that move a0 and lambda0 (pendulum g, m, L;
    oscillator c, d, m) and the initial-state expressions (q_init, theta0, omega0, phi0, L, r,
    l, e) are all seen by the sweeps that the gradients above rest on."""
    system = compiled(name)
    names = system.model.parameter_names
    p0 = np.array(system.model.nominal_values, dtype=float)
    h = 1e-4

    def x0(p):
        tr = system.simulate(t_end=h, h=h, alpha=-0.3, params=dict(zip(names, p)))
        return np.concatenate([tr.q[0], tr.v[0], tr.a[0], tr.lam[0]])

    tr = system.simulate(t_end=h, h=h, alpha=-0.3, store_factorizations=True)
    tg = tangent(system, tr, names)
    dx0 = np.vstack([tg.dq[0], tg.dv[0], tg.da[0], tg.dlam[0]])      # (3n + m, n_p)
    n, m = system.model.n, system.model.m
    blocks = np.repeat([0, 1, 2, 3], [n, n, n, m])   # an error counts against its block's size
    size = np.abs(x0(p0)) + np.abs(dx0 * p0).max(axis=1)
    scale = np.array([size[blocks == b].max() for b in blocks]) + 1e-300
    for k, pname in enumerate(names):
        d = 1e-5 * abs(p0[k])
        pp, pm = p0.copy(), p0.copy()
        pp[k] += d
        pm[k] -= d
        fd = (x0(pp) - x0(pm)) / (2 * d)
        err = np.abs(fd - dx0[:, k]) * abs(p0[k]) / scale
        assert err.max() <= 1e-8, (name, pname, err)
    moved = {n for k, n in enumerate(names)
             if np.any(np.concatenate([tg.da[0][:, k], tg.dlam[0][:, k]]) != 0)}
    expected = {"oscillator": {"m", "c", "q_init"}, "pendulum": {"m", "g", "L", "d", "theta0",
                "omega0"}}.get(name, set())
    assert expected <= moved, (name, moved)


# ---------------------------------------------------------------------------- 2. paper, section 4
# Oscillator m a + c q + d v = 0, x_i = (q_i, v_i, a_i), output s(x_i) = a_i, cost
# J = 1/2 sum_{i=0}^{N-1} h (a_i - abar_i)^2 (eq. 4 with eta_i = h; symdae's "left" rule).
OSC = dict(m=1.3, c=40.0, d=0.4, q_init=0.8)      # q0 != 0: c (and d if v0 != 0) move a0
OSC_H, OSC_N = 0.01, 200


def newmark(alpha):
    return (1 - alpha) ** 2 / 4, (1 - 2 * alpha) / 2


def paper_step_residual(x1, x0, m, c, d, h, alpha):
    """f_{i+1}(x_{i+1}, x_i) of eq. (15) for the oscillator, in the form section 4 uses:
    f_1, f_2 are the Newmark formulas, and in f_3 the new q, v are the Newmark expressions
    q_{i+1}(q_i, v_i, a_i, a_{i+1}), v_{i+1}(v_i, a_i, a_{i+1}) (the paper's remark after
    eq. 15), so f_3 depends on x_{i+1} through a_{i+1} only."""
    beta, gamma = newmark(alpha)
    q0, v0, a0 = x0
    q1, v1, a1 = x1
    qn = q0 + h * v0 + h * h / 2 * ((1 - 2 * beta) * a0 + 2 * beta * a1)
    vn = v0 + h * ((1 - gamma) * a0 + gamma * a1)
    f1 = -q0 + q1 - h * v0 - h * h / 2 * ((1 - 2 * beta) * a0 + 2 * beta * a1)
    f2 = -v0 + v1 - h * ((1 - gamma) * a0 + gamma * a1)
    f3 = m * a1 / (1 + alpha) + (c * qn + d * vn) - alpha / (1 + alpha) * (c * q0 + d * v0)
    return np.array([f1, f2, f3])


def paper_A_B(m, c, d, h, alpha):
    """The matrices A = df_i/dx_i and B = df_{i+1}/dx_i as printed in section 4."""
    beta, gamma = newmark(alpha)
    A = np.array([[1.0, 0.0, -h * h * beta],
                  [0.0, 1.0, -h * gamma],
                  [0.0, 0.0, m / (1 + alpha) + c * beta * h * h + d * gamma * h]])
    B = np.array([[-1.0, -h, -h * h / 2 * (1 - 2 * beta)],
                  [0.0, -1.0, -h * (1 - gamma)],
                  [c / (1 + alpha), h * c + d / (1 + alpha),
                   c * h * h / 2 * (1 - 2 * beta) + d * h * (1 - gamma)]])
    return A, B


def paper_recursion_alpha0(m, c, d, h):
    """The explicit alpha = 0 iteration as printed: p_i = -(0, 0, h/m~ r_i) - R p_{i+1}."""
    mt = m + c * h * h / 4 + d * h / 2
    R = np.array([[-1.0, 0.0, c],
                  [-h, -1.0, d + c * h],
                  [-h * h / mt, -h / mt, h * (d + c * h) / mt]])
    return R, np.array([0.0, 0.0, h / mt])


@pytest.mark.parametrize("alpha", ALPHAS)
def test_paper_matrices_follow_from_eq15(alpha):
    """Section 4's A and B are the exact Jacobians of eq. (15) (they also equal eqs. 16-19
    specialised to J_M = J_C = 0, J_Q = -c, J_V = -d, no constraint), and at alpha = 0 the
    printed explicit recursion is eq. (9) solved for p_i: A^-T B^T = R (p_i = -A^-T (h r_i e_3)
    - R p_{i+1}) and A^-T e_3 h = (0, 0, h/m~). No typo: the printed recursion matrix is correct."""
    m, c, d, h = 1.3, 40.0, 0.4, 0.01
    rng = np.random.default_rng(1)
    x0, x1 = rng.normal(size=3), rng.normal(size=3)
    A, B = paper_A_B(m, c, d, h, alpha)
    f = paper_step_residual(x1, x0, m, c, d, h, alpha)
    for j in range(3):            # f is affine in (x_{i+1}, x_i): unit differences are exact
        e = np.eye(3)[j]
        dA = paper_step_residual(x1 + e, x0, m, c, d, h, alpha) - f
        dB = paper_step_residual(x1, x0 + e, m, c, d, h, alpha) - f
        np.testing.assert_allclose(dA, A[:, j], rtol=0, atol=1e-12)
        np.testing.assert_allclose(dB, B[:, j], rtol=0, atol=1e-12)
    # eqs. (16)-(18), scalar case: J_Q = -c, J_V = -d, J_M = J_C = 0
    beta, gamma = newmark(alpha)
    JQ, JV = -c, -d
    assert A[2, 2] == pytest.approx(m / (1 + alpha) - JQ * beta * h * h - JV * h * gamma)
    assert B[2, 0] == pytest.approx(-JQ + alpha / (1 + alpha) * JQ)
    assert B[2, 1] == pytest.approx(-h * JQ - JV + alpha / (1 + alpha) * JV)
    assert B[2, 2] == pytest.approx(h * h / 2 * (1 - 2 * beta) * (-JQ) - h * (1 - gamma) * JV)
    if alpha == 0.0:
        R, src = paper_recursion_alpha0(m, c, d, h)
        np.testing.assert_allclose(np.linalg.solve(A.T, B.T), R, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(np.linalg.solve(A.T, h * np.eye(3)[2]), src, rtol=1e-14)


def oscillator_run(alpha, v0):
    system = compiled("oscillator")
    # the paper's eqs. (9), (11) and (20) differentiate eq. (15)
    sim = {"scheme": "hht-paper"} if v0 is None else {"v0": [v0], "scheme": "hht-paper"}
    T = OSC_N * OSC_H
    traj = system.simulate(t_end=T, h=OSC_H, alpha=alpha, params=OSC, store_factorizations=True, **sim)
    # "measured" accelerations: a run with other c, d, q_init (residuals far from zero)
    abar = system.simulate(t_end=T, h=OSC_H, alpha=alpha, params=dict(OSC, c=44.0, d=0.25, q_init=0.9),
                           **sim).a[:, 0]
    cost = LeastSquares({"a": abar}, quadrature="left")
    return system, traj, abar, cost


def initial_state_term(lam_x0, v0):
    """dJ/dp through x_0 = (q_init, v0, a0), a0 = -(c q0 + d v0)/m, by hand; lam_x0 = dJ/dx_0
    with the parameters fixed = B^T p_1 + eta_0 (a_0 - abar_0) e_3 (eq. 8, first bracket).
    Order (m, c, d, q_init) = model.parameter_names. v0 is a number (0 by default), so it
    depends on no parameter."""
    m, c, d, q0 = OSC["m"], OSC["c"], OSC["d"], OSC["q_init"]
    v0 = 0.0 if v0 is None else v0
    dx0 = np.array([[0.0, 0.0, (c * q0 + d * v0) / m ** 2],    # d/dm
                    [0.0, 0.0, -q0 / m],                       # d/dc
                    [0.0, 0.0, -v0 / m],                       # d/dd
                    [1.0, 0.0, -c / m]])                       # d/dq_init
    return dx0 @ lam_x0


@pytest.mark.parametrize("v0", [None, 0.5], ids=["v0-model", "v0-numeric"])
def test_oscillator_adjoint_equals_paper_recursion(v0):
    """alpha = 0: symdae's adjoint gradient = the paper's explicit recursion (section 4) plus
    the initial-state term the paper drops (it assumes delta x_0 = 0, but a0 = -(c q0 +
    d v0)/m moves with c, d, m and q0 = q_init)."""
    system, traj, abar, cost = oscillator_run(0.0, v0)
    m, c, d, h, N = OSC["m"], OSC["c"], OSC["d"], OSC_H, OSC_N
    q, v, a = traj.q[:, 0], traj.v[:, 0], traj.a[:, 0]
    r = a - abar
    J, dPhi = cost.evaluate(system, traj)
    assert J == pytest.approx(0.5 * h * np.sum(r[:N] ** 2), rel=1e-14)

    # the paper's recursion, verbatim: p_N = 0, p_i = -(0, 0, h/m~ r_i) - R p_{i+1}
    R, src = paper_recursion_alpha0(m, c, d, h)
    p = np.zeros((N + 1, 3))
    for i in range(N - 1, 0, -1):
        p[i] = -src * r[i] - R @ p[i + 1]
    # grad (c, d) = sum_{i=1}^{N-1} (q_i, v_i) p_i[2]; m enters as m a_i, q_init only via x_0
    paper = np.array([np.dot(a[1:N], p[1:N, 2]), np.dot(q[1:N], p[1:N, 2]),
                      np.dot(v[1:N], p[1:N, 2]), 0.0])
    # the i = 0 term: x_0 enters J directly (eta_0 r_0 on a_0) and step 1 through B
    _, B = paper_A_B(m, c, d, h, 0.0)
    lam_x0 = B.T @ p[1] + h * r[0] * np.eye(3)[2]
    init = initial_state_term(lam_x0, v0)

    g = adjoint_gradient(system, traj, dPhi)
    assert system.model.parameter_names == ["m", "c", "d", "q_init"]
    scale = np.max(np.abs(g))
    # the paper's (c, d) gradient is symdae's minus the initial-state contribution
    np.testing.assert_allclose((g - init)[1:3], paper[1:3], rtol=1e-12, atol=1e-13 * scale)
    # and with m and q_init, the full hand-made gradient is symdae's
    np.testing.assert_allclose(g, paper + init, rtol=1e-12, atol=1e-13 * scale)
    # the dropped term matters: for c it is far above any round-off or FD error
    assert abs(init[1]) > 1e-3 * abs(g[1])
    if v0 is not None:
        assert abs(init[2]) > 1e-3 * abs(g[2])

    # the full gradient against central differences (two steps: truncation ~ delta^2)
    p0 = np.array(system.model.nominal_values, dtype=float)
    p0[:] = [OSC[n] for n in system.model.parameter_names]
    sim = {} if v0 is None else {"v0": [v0]}

    def J_of(pv):
        tr = system.simulate(t_end=N * h, h=h, alpha=0.0, params=dict(zip(system.model.parameter_names, pv)),
                             **sim)
        return cost.evaluate(system, tr)[0]

    fd1 = np.array([central(J_of, p0, k, 2e-4) for k in range(4)])
    fd2 = np.array([central(J_of, p0, k, 1e-4) for k in range(4)])
    e1 = np.abs(fd1 - g) * p0 / np.max(np.abs(g * p0))
    e2 = np.abs(fd2 - g) * p0 / np.max(np.abs(g * p0))
    print(f"\npaper oscillator v0={v0}: |symdae - (paper + initial term)| "
          f"{np.max(np.abs(g - paper - init)) / scale:.1e}, initial term / gradient "
          f"{np.abs(init / g).round(3)}, FD {e1.max():.1e} -> {e2.max():.1e}")
    assert e2.max() <= FD_TOL, e2
    big = e1 > RICH_FLOOR
    assert big.any() and np.all((e1[big] / e2[big] >= RATIO[0]) & (e1[big] / e2[big] <= RATIO[1]))
    # while the paper's gradient (delta x_0 = 0) is not the derivative of the discrete J
    paper_err = np.abs(paper - g) * p0 / np.max(np.abs(g * p0))
    assert paper_err[1] > 1e3 * e2[1]


@pytest.mark.parametrize("alpha", ALPHAS)
def test_oscillator_adjoint_equals_eq9_eq11_any_alpha(alpha):
    """The paper's general recursion (eq. 9 with section 4's A, B) and gradient (eq. 11 with
    eq. 20: df_3,i+1/dc = q_{i+1} - alpha/(1+alpha) q_i, .../dd likewise with v,
    .../dm = a_{i+1}/(1+alpha)), plus the initial-state term, for alpha = 0 and -0.3."""
    v0 = 0.5
    system, traj, abar, cost = oscillator_run(alpha, v0)
    m, c, d, h, N = OSC["m"], OSC["c"], OSC["d"], OSC_H, OSC_N
    q, v, a = traj.q[:, 0], traj.v[:, 0], traj.a[:, 0]
    r = a - abar
    A, B = paper_A_B(m, c, d, h, alpha)
    p = np.zeros((N + 1, 3))
    for i in range(N - 1, 0, -1):
        p[i] = np.linalg.solve(A.T, -h * r[i] * np.eye(3)[2] - B.T @ p[i + 1])
    k = alpha / (1 + alpha)
    grad = np.zeros(4)
    for i in range(N):             # eq. (11): sum_{i=0}^{N-1} (df_{i+1}/du)^T p_{i+1}
        grad += p[i + 1, 2] * np.array([a[i + 1] / (1 + alpha), q[i + 1] - k * q[i],
                                        v[i + 1] - k * v[i], 0.0])
    grad += initial_state_term(B.T @ p[1] + h * r[0] * np.eye(3)[2], v0)
    _, dPhi = cost.evaluate(system, traj)
    g = adjoint_gradient(system, traj, dPhi)
    np.testing.assert_allclose(g, grad, rtol=1e-12, atol=1e-13 * np.max(np.abs(g)))


# ---------------------------------------------------------------------------- 3. options
STORE_CASES = [("pendulum", 0.0, 0.3, 1e-2), ("slider_crank", -0.3, 0.3, 1e-3),
               ("slider_crank", 0.0, 0.3, 5e-3), ("engine_mount", 0.0, 0.01, 1e-4),
               ("spring_chain", -0.3, 0.2, 2e-3)]


@pytest.mark.parametrize("name, alpha, T, h", STORE_CASES,
                         ids=[f"{c[0]}-alpha{c[1]:g}" for c in STORE_CASES])
def test_gradient_independent_of_store_factorizations(name, alpha, T, h):
    """Without stored factorisations the adjoint and tangent sweeps refactorise K at every
    accepted state themselves; the gradient must not change beyond round-off (in fact the
    forward path is the same, so the matrices, and the results, are bitwise identical).
    With only the time terms kept (keep_time_terms, what cost_and_gradient does) the sweeps
    read them instead of evaluating them: bit for bit the same numbers again. (The runs
    without stored factorisations evaluate their time terms: no table of an earlier run,
    which the sweeps would read as kept ones, tests/simulation/test_time_tables.py.)"""
    system = compiled(name)

    def evaluating(**kw):
        system.backend.use_time_tables = False
        try:
            return system.simulate(t_end=T, h=h, alpha=alpha, **kw)
        finally:
            system.backend.use_time_tables = True

    names = system.model.parameter_names
    p0 = np.array(system.model.nominal_values, dtype=float)
    ref = system.simulate(t_end=T, h=h, alpha=alpha, params=dict(zip(names, perturbed(p0))))
    cost = LeastSquares({k: ref.outputs[k] for k in system.model.output_names},
                        weights={k: 1 / np.mean(ref.outputs[k] ** 2)
                                 for k in system.model.output_names}, quadrature="trapezoid")
    stored = system.simulate(t_end=T, h=h, alpha=alpha, store_factorizations=True)
    bare = evaluating(store_factorizations=False)
    assert bare.sweep.forward.saved is None and stored.sweep.forward.saved is not None
    for x in ("q", "v", "a", "lam"):                 # the forward path does not depend on it
        np.testing.assert_array_equal(getattr(bare, x), getattr(stored, x))
    J, dPhi = cost.evaluate(system, stored)
    g_s = adjoint_gradient(system, stored, dPhi)
    g_b = adjoint_gradient(system, bare, dPhi)
    assert scaled_error(g_b, g_s, p0) <= 1e-14
    ds_s = tangent(system, stored, names).ds
    ds_b = tangent(system, bare, names).ds
    assert np.max(np.abs(ds_b - ds_s)) <= 1e-14 * np.max(np.abs(ds_s))
    kept = evaluating(keep_time_terms=True)
    saved = kept.sweep.forward.saved
    if system.sizes.n_tau:
        assert saved[0] is None and saved[2].shape == (kept.t.size, system.sizes.n_tau)
    else:
        assert saved is None
    for x in ("q", "v", "a", "lam"):
        np.testing.assert_array_equal(getattr(kept, x), getattr(bare, x))
    np.testing.assert_array_equal(adjoint_gradient(system, kept, dPhi), g_b)
    np.testing.assert_array_equal(tangent(system, kept, names).ds, ds_b)


def test_numeric_v0_still_differentiates_model_q0_oscillator():
    """v0 given as a number, q0 = q_init from the model's expression: the gradient still
    carries dq0/dq_init = 1 (and da0/dq_init = -c/m); with q0 also given as a number it is 0."""
    system = compiled("oscillator")
    names = system.model.parameter_names
    p0 = np.array([OSC[n] for n in names])
    T, h, alpha = 1.0, 1e-2, -0.3
    abar = system.simulate(t_end=T, h=h, alpha=alpha, params=dict(OSC, c=44.0, q_init=0.6), v0=[0.2]).a[:, 0]
    cost = LeastSquares({"a": abar}, quadrature="trapezoid")
    k = names.index("q_init")

    def gradient(**sim):
        tr = system.simulate(t_end=T, h=h, alpha=alpha, params=OSC, store_factorizations=True, **sim)
        g = adjoint_gradient(system, tr, cost.evaluate(system, tr)[1])
        return g, tangent(system, tr, names), tr

    g, tg, tr = gradient(v0=[0.7])
    assert tr.q[0, 0] == OSC["q_init"] and tr.v[0, 0] == 0.7
    assert tg.dq[0][0, k] == 1.0 and tg.dv[0][0, k] == 0.0
    assert tg.da[0][0, k] == pytest.approx(-OSC["c"] / OSC["m"], rel=1e-14)

    def J_of(pv):
        t = system.simulate(t_end=T, h=h, alpha=alpha, params=dict(zip(names, pv)), v0=[0.7])
        return cost.evaluate(system, t)[0]

    fd = central(J_of, p0, k, 1e-4)       # J is quadratic in q_init: FD exact to round-off
    assert abs(g[k]) > 0 and g[k] == pytest.approx(fd, rel=1e-8)
    g_num, tg_num, _ = gradient(q0=[OSC["q_init"]], v0=[0.7])
    assert g_num[k] == 0.0 and np.all(tg_num.dq[0] == 0)


def test_numeric_v0_still_differentiates_model_q0_pendulum():
    """Pendulum at rest (omega0 = 0), v0 = (0, 0) passed as numbers, q0 = L (sin theta0,
    -cos theta0) from the model: the same trajectory as with the model's v0, the same
    gradient in L and theta0 (carried through q0 and through lambda0, a0), but dJ/domega0 = 0
    exactly since v0 no longer depends on omega0 (with the model's v0 it does not vanish).
    The numeric-v0 gradient matches central differences of J at fixed v0 = 0."""
    system = compiled("pendulum")
    names = system.model.parameter_names
    params = dict(zip(names, system.model.nominal_values), omega0=0.0)
    p0 = np.array([params[n] for n in names])
    T, h, alpha = 0.6, 1e-2, -0.3
    ref = system.simulate(t_end=T, h=h, alpha=alpha, params=dict(params, L=0.85, theta0=0.8, g=9.7))
    outs = ("x", "vy", "ax", "lambda")
    cost = LeastSquares({k: ref.outputs[k] for k in outs},
                        weights={k: 1 / np.mean(ref.outputs[k] ** 2) for k in outs})

    def run(**sim):
        tr = system.simulate(t_end=T, h=h, alpha=alpha, params=params, store_factorizations=True, **sim)
        return tr, adjoint_gradient(system, tr, cost.evaluate(system, tr)[1])

    tr_num, g_num = run(v0=[0.0, 0.0])
    tr_mod, g_mod = run()
    np.testing.assert_array_equal(tr_num.q, tr_mod.q)
    io, iL, it = names.index("omega0"), names.index("L"), names.index("theta0")
    assert g_num[io] == 0.0 and abs(g_mod[io]) > 1e-3 * np.max(np.abs(g_mod * (p0 + (p0 == 0))))
    keep = np.arange(len(names)) != io
    assert scaled_error(g_num[keep], g_mod[keep], p0[keep]) <= 1e-13
    tg = tangent(system, tr_num, names)
    L, th = params["L"], params["theta0"]
    np.testing.assert_allclose(tg.dq[0][:, iL], [np.sin(th), -np.cos(th)], rtol=1e-14)
    np.testing.assert_allclose(tg.dq[0][:, it], [L * np.cos(th), L * np.sin(th)], rtol=1e-14)
    assert np.all(tg.dv[0] == 0)
    assert abs(g_num[iL]) > 0 and abs(g_num[it]) > 0

    def J_of(pv):
        t = system.simulate(t_end=T, h=h, alpha=alpha, params=dict(zip(names, pv)), v0=[0.0, 0.0])
        return cost.evaluate(system, t)[0]

    norm = np.max(np.abs(g_num * np.where(p0 != 0, np.abs(p0), 1.0)))
    for k in range(len(names)):
        fd1, fd2 = central(J_of, p0, k, 2e-4), central(J_of, p0, k, 1e-4)
        s = abs(p0[k]) or 1.0
        e1, e2 = abs(fd1 - g_num[k]) * s / norm, abs(fd2 - g_num[k]) * s / norm
        assert e2 <= FD_TOL, (names[k], e1, e2)
        if e1 > RICH_FLOOR:
            assert RATIO[0] <= e1 / e2 <= RATIO[1], (names[k], e1, e2)
    assert central(J_of, p0, io, 1e-4) == 0.0


def test_tangent_along_direction_matrix_is_adjoint_projection():
    """tangent() with an (n_p, nd) direction matrix D: dPhi . ds = D^T (adjoint gradient)."""
    system = compiled("slider_crank")
    names = system.model.parameter_names
    p0 = np.array(system.model.nominal_values, dtype=float)
    case = CASES[7]
    assert case.model == "slider_crank" and case.alpha == -0.3
    cost = least_squares(system, case, perturbed(p0))
    traj = case.simulate(system, p0, store=True)
    _, dPhi = cost.evaluate(system, traj)
    D = np.random.default_rng(7).normal(size=(len(names), 3)) * np.abs(p0)[:, None]
    tg = tangent(system, traj, D)
    lhs = np.einsum("is,isd->d", dPhi, tg.ds)
    rhs = D.T @ adjoint_gradient(system, traj, dPhi)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10, atol=1e-12 * np.max(np.abs(rhs)))


# ---------------------------------------------------------------------------- known bug
@pytest.fixture(scope="module")
def projected_pendulum(tmp_path_factory):
    """A pendulum whose length is a number (so the constraint depends on no parameter) and whose
    initial state is given by parameters that do not satisfy the constraint: project=True
    moves it onto the circle."""
    import sympy as sp
    from sympy.physics.mechanics import dynamicsymbols

    t = dynamicsymbols._t
    x, y = dynamicsymbols("x y")
    m, g, d, x0, y0, vx0 = sp.symbols("m g d x0 y0 vx0")
    lam = sp.Symbol("lambda")
    model = symdae.Model(
        "gradient_test_projected_pendulum",
        coordinates=[x, y],
        mass_matrix=sp.diag(m, m),
        forces=[-d * x.diff(t), -m * g - d * y.diff(t)],
        constraints=[x**2 + y**2 - sp.Rational(16, 25)],
        multipliers=[lam],
        parameters={m: 1.0, g: 9.81, d: 0.1, x0: 0.5, y0: -0.7, vx0: 0.3},
        outputs={"x": x, "vy": y.diff(t), "ax": x.diff(t, 2), "lambda": lam},
        initial_state={x: x0, y: y0, x.diff(t): vx0},
    )
    return symdae.compile_model(model, cache_dir=tmp_path_factory.mktemp("symdae-cache"))


def test_projected_initial_state_refuses_sensitivities(projected_pendulum):
    """project=True makes (q0, v0) depend on p through the projection, whose derivative symdae
    does not generate: both sweeps must refuse instead of differentiating the raw
    initial-state expressions (which gave gradients off by 50-100 % in x0, y0, vx0)."""
    system = projected_pendulum
    T, h, alpha = 0.5, 1e-2, -0.3
    traj = system.simulate(t_end=T, h=h, alpha=alpha, project=True, store_factorizations=True)
    assert abs(np.hypot(*traj.q[0]) - 0.8) < 1e-12      # projected onto the circle
    dPhi = np.ones((len(traj.t), len(system.model.output_names)))
    with pytest.raises(symdae.SimulationError, match="project=True"):
        adjoint_gradient(system, traj, dPhi)
    with pytest.raises(symdae.SimulationError, match="project=True"):
        tangent(system, traj, system.model.parameter_names)
