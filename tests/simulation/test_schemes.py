"""The two schemes of the HHT family (symdae/simulation/core/scheme.pxd).

1. hht-ga is second order in q, v, a and lambda on models whose mass matrix depends on q: a
   double pendulum in absolute angles, a four-bar in relative joint angles closed by
   constraints, and Andrews' seven-body squeezer; each against an independent reference
   (SymPy's own Lagrange equations, or the index-1 form of the same equations, integrated by
   scipy's DOP853 at rtol 1e-13). hht-paper (eq. 15) is first order there, which is what a
   test on the old scheme would have seen.
2. On models with a constant mass matrix both schemes give the same numbers to round-off.
3. hht-ga's derivative sweeps are exact for it: adjoint = tangent to round-off, central
   finite differences to their truncation error, on both backends; the NumPy backend
   reproduces the compiled sweeps.
4. An unknown scheme is refused with an error that names the option and the choices. (The
   input-design sweep on either scheme: tests/design/test_design_gradients.py.)

``pytest tests/simulation/test_schemes.py -s`` prints the measured errors and orders.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp
from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols

import symdae
from symdae import LeastSquares, Scenario, adjoint_gradient, tangent
from symdae.errors import InputError

ALPHAS = (-0.05, -0.1, -0.3)


def _solve(rhs, y0, t_end):
    r = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-13, atol=1e-13)
    assert r.success
    return r.y[:, -1]


def lagrange_reference(ns, lagrangian, params: dict, q0, v0, t_end):
    """(q, v, q'', lambda) at t_end from SymPy's LagrangesMethod (constraints as hol_coneqs,
    which it differentiates twice) integrated by DOP853."""
    model = ns["model"]
    subs = {s: params[str(s)] for s in model.parameters}
    qs = list(model.coordinates)
    n, m = len(qs), len(model.constraints)
    lm = LagrangesMethod(lagrangian.subs(subs), qs,
                         hol_coneqs=[c.subs(subs) for c in model.constraints] or None)
    lm.form_lagranges_equations()
    x = qs + [q.diff(dynamicsymbols._t) for q in qs]
    Mf = sp.lambdify([x], lm.mass_matrix_full.subs(subs))
    Ff = sp.lambdify([x], lm.forcing_full.subs(subs))

    def full(y):
        return np.linalg.solve(np.array(Mf(y), float), np.array(Ff(y), float).ravel())

    y = _solve(lambda _, y: full(y)[:2 * n], np.concatenate([q0, v0]), t_end)
    sol = full(y)
    # LagrangesMethod's multipliers enter as -C_q^T lam: symdae's sign is the other one
    return y[:n], y[n:], sol[n:2 * n], -sol[2 * n:2 * n + m]


def index1_reference(ns, params: dict, q0, v0, t_end):
    """(q, v, q'', lambda) at t_end from M q'' + C_q^T lam = Q, C_q q'' = -(C_q v)_q v, the
    model file's own M, Q and C differentiated here, integrated by DOP853."""
    model = ns["model"]
    subs = {s: params[str(s)] for s in model.parameters}
    t = dynamicsymbols._t
    qs = list(model.coordinates)
    n, m = len(qs), len(model.constraints)
    us = sp.symbols(f"u0:{n}")
    speed = {q.diff(t): u for q, u in zip(qs, us)}
    M = sp.Matrix(ns["M"]).subs(subs)
    F = sp.Matrix(ns["forces"]).subs(speed).subs(subs)
    G = sp.Matrix(ns["constraints"]).subs(subs).jacobian(qs)
    gamma = (G * sp.Matrix(us)).jacobian(qs) * sp.Matrix(us)
    f = sp.lambdify([qs, us], [M, F, G, gamma])

    def full(y):
        Mv, Fv, Gv, gv = (np.array(a, float) for a in f(y[:n], y[n:]))
        K = np.block([[Mv, Gv.T], [Gv, np.zeros((m, m))]])
        return np.linalg.solve(K, np.concatenate([Fv.ravel(), -gv.ravel()]))

    y = _solve(lambda _, y: np.concatenate([y[n:], full(y)[:n]]), np.concatenate([q0, v0]),
               t_end)
    sol = full(y)
    return y[:n], y[n:], sol[:n], sol[n:]


def _double_pendulum_reference(ns, params, q0, v0, t_end):
    return lagrange_reference(ns, ns["model"].lagrangian, params, q0, v0, t_end)


def _fourbar_reference(ns, params, q0, v0, t_end):
    # the drive torque and the rocker's spring as potentials (the damper is set to 0)
    L = ns["T"] - ns["V"] + ns["T0"] * ns["th1"] - ns["k"] / 2 * (ns["a3"] - ns["a30"]) ** 2
    return lagrange_reference(ns, L, params, q0, v0, t_end)


# model, parameter changes (no dissipation the reference lacks), t_end, the three steps
CASES = {
    "double_pendulum": ({"d1": 0.0, "d2": 0.0}, 2.0, (4e-3, 2e-3, 1e-3),
                        _double_pendulum_reference),
    "fourbar": ({"d": 0.0}, 1.0, (4e-3, 2e-3, 1e-3), _fourbar_reference),
    "andrews_squeezer": ({}, 0.03, (4e-5, 2e-5, 1e-5), index1_reference),
}


@pytest.fixture(scope="module")
def convergence_setups():
    """Per model: the System, its parameters and the reference at t_end (computed once)."""
    out = {}
    for name, (changes, t_end, steps, reference) in CASES.items():
        model, ns = symdae.load_model(name)
        system = symdae.compile_model(model)
        params = dict(zip(model.parameter_names, system.parameter_vector(changes)))
        x0 = system.simulate(t_end=steps[-1], h=steps[-1], params=changes)
        ref = reference(ns, params, x0.q[0], x0.v[0], t_end)
        out[name] = (system, changes, t_end, steps, ref)
    return out


def observed_orders(system, changes, t_end, steps, ref, alpha, scheme):
    """Errors of (q, v, a, lam) at t_end for each step and the orders between them."""
    errors = []
    for h in steps:
        tr = system.simulate(t_end=t_end, h=h, alpha=alpha, scheme=scheme, params=changes)
        errors.append([np.max(np.abs(x[-1] - r), initial=0.0)
                       for x, r in zip((tr.q, tr.v, tr.a, tr.lam), ref)])
    E = np.array(errors)
    with np.errstate(divide="ignore", invalid="ignore"):
        return E, np.log2(E[:-1] / E[1:])


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("name", list(CASES))
def test_hht_ga_is_second_order_when_the_mass_matrix_depends_on_q(convergence_setups, name,
                                                                 alpha):
    """Measured (alpha = -0.3): double pendulum q 1.90e-4, 4.75e-5, 1.19e-5 (order 2.00),
    four-bar and the squeezer 2.0-2.1; hht-paper order 0.96-1.04 at alpha = -0.3."""
    system, changes, t_end, steps, ref = convergence_setups[name]
    E, order = observed_orders(system, changes, t_end, steps, ref, alpha, "hht-ga")
    print(f"\n{name} alpha={alpha} hht-ga errors (q, v, a, lam):\n{E}\norders\n{order}")
    assert np.all(order[-1, :2] >= 1.9), (name, alpha, order)       # q and v
    assert order[-1, 2] >= 1.8, (name, alpha, order)                 # a (starting values a0)
    if system.sizes.m:
        assert order[-1, 3] >= 1.8, (name, alpha, order)             # lambda
    if alpha == -0.3:
        Ep, order_p = observed_orders(system, changes, t_end, steps, ref, alpha, "hht-paper")
        print(f"{name} hht-paper errors:\n{Ep}\norders\n{order_p}")
        assert np.all(order_p[-1, :2] < 1.3), (name, order_p)        # first order
        assert np.all(E[-1, :2] < Ep[-1, :2])


@pytest.mark.parametrize("name", ["oscillator", "engine_mount", "pendulum", "slider_crank",
                                  "two_mass_oscillator"])
def test_the_schemes_agree_when_the_mass_matrix_is_constant(name):
    """Then eq. (15) and the generalized-alpha form are the same equations (specs/
    second-order-scheme.md section 3): the same q, v, lam, and hht-paper's a is hht-ga's
    algorithmic acceleration w, up to the Newton tolerance. hht-ga's a is the physical
    acceleration at t_i, which eq. (15) does not compute."""
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    base = Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3})
    sc = base.replace(t_end=base.t0 + 400 * base.h, alpha=-0.25)
    if model.input_names:
        sc = sc.replace(inputs={k: (lambda t: np.sin(5 * t)) for k in model.input_names})
    runs = [system.simulate(sc.replace(scheme=s)) for s in ("hht-paper", "hht-ga")]
    paper, ga = runs
    assert paper.w is paper.a and ga.w is not ga.a
    for kind, tol in (("q", 1e-10), ("v", 1e-9), ("w", 1e-7), ("lam", 1e-7)):
        X, Y = getattr(paper, kind), getattr(ga, kind)
        scale = np.max(np.abs(X), initial=0.0) + 1e-300
        assert np.max(np.abs(X - Y), initial=0.0) <= tol * scale, (name, kind)


def gradient_case(name, backend, steps, scheme="hht-ga"):
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model, backend=backend)
    base = Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3})
    sc = base.replace(t_end=base.t0 + steps * base.h, scheme=scheme)
    data = system.simulate(sc).outputs
    cost = LeastSquares({k: data[k] for k in model.output_names},
                        weights={k: 1 / max(np.mean(data[k] ** 2), 1e-300)
                                 for k in model.output_names})
    moved = {k: v * 1.04 for k, v in zip(model.parameter_names, system.parameter_vector())
             if v}
    return system, sc, cost, moved


@pytest.mark.parametrize("name, backend, steps", [
    ("double_pendulum", "compiled", 600), ("fourbar", "compiled", 400),
    ("pendulum", "compiled", 300), ("andrews_squeezer", "compiled", 300),
    ("fourbar", "numpy", 60), ("pendulum", "numpy", 60)])
def test_hht_ga_gradients_are_exact(name, backend, steps):
    """Adjoint = tangent to round-off; central FD to its truncation error (parameters inside
    the constraints and the initial state included: fourbar's lengths, pendulum's L).
    Round-off: the compiled sweeps solve with one LU and its transpose (1e-10; measured
    <= 6e-12); the NumPy oracle factorises K and K^T separately with dense LAPACK at every
    step, so its two sweeps round differently (1e-9; measured 1.3e-10 on the four-bar)."""
    system, sc, cost, moved = gradient_case(name, backend, steps)
    tr = system.simulate(sc, params=moved, store_factorizations=True)
    J, dS = cost.evaluate(system, tr)
    grad = adjoint_gradient(system, tr, dS)
    ds = tangent(system, tr, np.eye(system.sizes.n_p)).ds
    want = np.einsum("is,isk->k", dS, ds)
    scale = np.max(np.abs(want))
    tol = 1e-10 if backend == "compiled" else 1e-9
    assert scale > 0 and np.max(np.abs(grad - want)) <= tol * scale, (grad, want)
    names = system.model.parameter_names
    p = dict(zip(names, system.parameter_vector(moved)))
    for k, name_k in enumerate(names[:4]):
        # relative step 1e-5: below it the Newton tolerance's noise in J dominates (both
        # schemes alike), above it the truncation error
        step = 1e-5 * max(abs(p[name_k]), 1e-3)
        Jp, Jm = (cost.evaluate(system, system.simulate(sc, params={**p, name_k: p[name_k] + s}))[0]
                  for s in (step, -step))
        fd = (Jp - Jm) / (2 * step)
        assert abs(fd - grad[k]) <= 2e-6 * scale + 1e-5 * abs(grad[k]), (name_k, fd, grad[k])


def test_numpy_backend_reproduces_the_compiled_hht_ga_sweeps():
    """The same discrete scheme in two independent implementations (dense NumPy blocks
    against the generated sparse kernels): states to round-off, gradients to 1e-8."""
    runs = {}
    for backend in ("compiled", "numpy"):
        system, sc, cost, moved = gradient_case("fourbar", backend, 80)
        tr = system.simulate(sc, params=moved, store_factorizations=True)
        J, dS = cost.evaluate(system, tr)
        runs[backend] = (tr, J, adjoint_gradient(system, tr, dS))
    (tc, Jc, gc), (tn, Jn, gn) = runs["compiled"], runs["numpy"]
    np.testing.assert_allclose(tn.q, tc.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(tn.a, tc.a, rtol=0, atol=1e-6 * np.max(np.abs(tc.a)))
    assert Jn == pytest.approx(Jc, rel=1e-9)
    assert np.max(np.abs(gc - gn)) <= 1e-8 * np.max(np.abs(gc))


def test_an_unknown_scheme_is_named():
    with pytest.raises(InputError, match=r"scheme must be one of \['hht-ga', 'hht-paper'\], "
                                         r"got 'newmark'"):
        Scenario(t_end=1.0, h=0.01, scheme="newmark")
