"""The kernel module's written-out LU of the Newton matrix (symdae/model/lu_plan.py) against
the core's sparse LU loops (sparse.pxd): with the same orders the two must give the same
factors and solutions bit for bit (the module's code is the loops' operations with constant
indices); both must solve K x = b and K^T x = b; a run whose first matrix fails the pivot
check with the module's order falls back to the core's own analysis; and a run is the same
motion with either code (its orders may differ: round-off)."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.simulation.backends.numpy import Scheme

# closed loops in joint angles (q-dependent M, nonlinear constraints), redundant coordinates,
# a saddle point of 5 (the paper's), a dense M in joint angles, the 42 x 42 TVD engine
MODELS = ["engine_mount", "four_bar_joints", "slider_crank", "cart_pendulum",
          "four_cylinder_tvd"]
EPS = np.finfo(float).eps


def hht_weights(alpha: float, h: float) -> np.ndarray:
    """(c_m, c_q, c_v) of a step of the paper's scheme."""
    return Scheme(h, alpha, "hht-paper").kw


def run(system, scenario):
    """A run with every input at zero."""
    return system.simulate(scenario, inputs={u: 0.0 for u in system.model.input_names})


def states(system, scenario, count=3):
    """(t, q, v, a, lam, p, u) at a few states of a short run."""
    tr = run(system, scenario)
    p = system.parameter_vector()
    u = np.zeros(max(system.sizes.n_u, 1))
    pad = lambda x: x if x.size else np.zeros(1)     # noqa: E731 (zero-width arrays)
    idx = np.linspace(0, len(tr.t) - 1, count).astype(int)
    return [(float(tr.t[i]), tr.q[i].copy(), tr.v[i].copy(), tr.a[i].copy(),
             pad(tr.lam[i].copy()), p, u) for i in idx]


def short(ns, steps=200):
    """``steps`` steps of the model's scenario (or of h = 1e-3, alpha = -0.1)."""
    sc = ns.get("SCENARIO") or symdae.Scenario(t_end=1.0, h=1e-3, alpha=-0.1)
    return symdae.Scenario(t_end=steps * sc.h, h=sc.h, alpha=sc.alpha)


@pytest.fixture(scope="module", params=MODELS)
def case(request):
    model, ns = symdae.load_model(request.param)
    system = symdae.compile_model(model)
    yield request.param, system, ns
    system.backend.kernels.model_lu = True


def test_written_lu_equals_the_core_loops_bit_for_bit_and_solves(case):
    name, system, ns = case
    k = system.backend.kernels
    N = k.n + k.m
    sc = short(ns)
    rng = np.random.default_rng(7)
    order = k.lu_order()
    assert order is not None, f"{name}: no written-out LU"
    for st in states(system, sc):
        b, bt = rng.standard_normal(N), rng.standard_normal(N)
        kw = hht_weights(sc.alpha, sc.h)
        k.model_lu = True
        x1, xt1 = b.copy(), bt.copy()
        K, B1, piv1, ord1, status, used = k.newton_lu(*st, kw, x1, xt1)
        assert status == 0 and used, f"{name}: the module's LU was not taken ({status})"
        assert list(ord1[:N]) == order and list(ord1[N:]) == order
        k.model_lu = False
        x2, xt2 = b.copy(), bt.copy()
        K2, B2, piv2, ord2, status2, used2 = k.newton_lu(*st, kw, x2, xt2, order=ord1)
        k.model_lu = True
        assert status2 == 0 and not used2
        assert np.array_equal(K, K2)
        assert np.array_equal(B1, B2) and np.array_equal(piv1, piv2), name
        assert np.array_equal(x1, x2) and np.array_equal(xt1, xt2), name
        # a backward-stable solve: residual within a few eps of |K| |x|
        for M, x, rhs in ((K, x1, b), (K.T, xt1, bt)):
            scale = np.abs(M) @ np.abs(x) + np.abs(rhs)
            assert np.all(np.abs(M @ x - rhs) <= 1e3 * N * EPS * scale), name


def test_a_run_is_the_same_motion_with_either_lu(case):
    name, system, ns = case
    k = system.backend.kernels
    sc = short(ns, 400)
    k.model_lu = True
    a = run(system, sc)
    k.model_lu = False
    b = run(system, sc)
    k.model_lu = True
    scale = np.maximum(np.abs(b.q).max(axis=0), 1e-300)
    # the orders differ (the core picks its own from the values): round-off, propagated
    assert np.all(np.abs(a.q - b.q).max(axis=0) <= 1e-9 * scale), name
    assert a.counters["newton_iterations"] == pytest.approx(b.counters["newton_iterations"],
                                                         rel=0.05)


def test_the_tangent_sweep_is_the_same_with_either_lu(case):
    """The tangent sweep solves all its directions with the module's written-out solve one at
    a time (apply()'s operations) or with the core's loops over all at once (a
    multiplication by the pivot's reciprocal where the other divides): round-off apart, the
    same sensitivities of every output along four parameters."""
    from symdae.simulation.sensitivity import tangent

    name, system, ns = case
    k = system.backend.kernels
    # a constant input of 1 (the cart pendulum rests without one)
    tr = system.simulate(short(ns, 100), inputs={u: 1.0 for u in system.model.input_names})
    names = system.model.parameter_names[:4]
    try:
        k.model_lu = True
        a = tangent(system, tr, names, states=False).ds
        k.model_lu = False
        b = tangent(system, tr, names, states=False).ds
    finally:
        k.model_lu = True
    scale = np.abs(b).max(axis=(0, 1))
    moved = scale > 0
    assert np.any(moved), name
    err = np.abs(a - b).max(axis=(0, 1))[moved] / scale[moved]
    assert np.all(err <= 1e-9), (name, err)


def light_constrained_pair():
    """Two particles of 1 mg tied by x1 - x2 = 0: the diagonal pivot c_m m against the
    constraint's 1 fails the pivot check (1e-6 < 1e-3), so the module's order is refused."""
    x1, x2 = dynamicsymbols("x1 x2")
    m, k = sp.symbols("m k")
    lam = sp.Symbol("lambda")
    return symdae.Model("light_pair", [x1, x2], mass_matrix=sp.diag(m, m),
                        forces=[-k * x1, -k * x2], constraints=[x1 - x2], multipliers=[lam],
                        parameters={m: 1e-6, k: 1e-3},
                        initial_state={x1: 0.1, x2: 0.1}, outputs={"x1": x1})


def test_an_order_that_fails_the_pivot_check_falls_back_to_the_core_analysis():
    system = symdae.compile_model(light_constrained_pair())
    k = system.backend.kernels
    assert k.lu_order() is not None
    sc = symdae.Scenario(t_end=0.05, h=1e-3, alpha=-0.1)
    st = states(system, sc, 1)[0]
    b, bt = np.array([1.0, 2.0, 3.0]), np.array([-1.0, 0.5, 2.0])
    x, xt = b.copy(), bt.copy()
    K, B, piv, order, status, used = k.newton_lu(*st, hht_weights(-0.1, 1e-3), x, xt)
    assert status == 0 and not used
    assert np.allclose(K @ x, b, rtol=1e-12, atol=0) and np.allclose(K.T @ xt, bt, rtol=1e-12)
    # the run takes the core's orders either way: the same numbers
    a = system.simulate(sc)
    k.model_lu = False
    c = system.simulate(sc)
    assert np.array_equal(a.q, c.q) and np.array_equal(a.lam, c.lam)
    # exact motion: x = 0.1 cos(w t), w^2 = k / m
    w = np.sqrt(1e-3 / 1e-6)
    assert np.abs(a.q[:, 0] - 0.1 * np.cos(w * a.t)).max() < 2e-3 * 0.1


def subnormal_oscillator():
    """m x'' = -k x with m = k = 1e-310: a 1 x 1 Newton matrix of about 1e-310, subnormal,
    whose reciprocal overflows to infinity."""
    x = dynamicsymbols("x")
    m, k = sp.symbols("m k")
    return symdae.Model("subnormal_oscillator", [x], mass_matrix=sp.Matrix([[m]]),
                        forces=[-k * x], parameters={m: 1e-310, k: 1e-310},
                        initial_state={x: 1.0}, outputs={"x": x})


def test_a_pivot_whose_reciprocal_overflows_is_left_to_the_dense_lu():
    """The factors hold the pivots' reciprocals; a subnormal pivot's is infinite, and a solve
    multiplying by it would give inf or NaN where dividing by the pivot gives the solution. Both
    the written-out code and the core's loops refuse such a pivot, and the dense LU (which
    divides) solves."""
    system = symdae.compile_model(subnormal_oscillator())
    k = system.backend.kernels
    assert k.lu_order() is not None
    st = (0.1, np.array([0.5]), np.array([-0.2]), np.array([0.3]), np.zeros(1),
          system.parameter_vector(), np.zeros(1))
    kw = hht_weights(-0.1, 1e-2)
    try:
        for written in (True, False):
            k.model_lu = written
            x, xt = np.array([3e-310]), np.array([-2e-310])
            K, B, piv, order, status, used = k.newton_lu(*st, kw, x, xt)
            assert status == 0 and not used
            # subnormal, and below 1 / DBL_MAX: its reciprocal overflows
            assert 0.0 < abs(K[0, 0]) < 1.0 / np.finfo(float).max, K
            assert np.all(np.isfinite(x)) and np.all(np.isfinite(xt)), (written, x, xt)
            assert x[0] == pytest.approx(3e-310 / K[0, 0], rel=1e-12)
            assert xt[0] == pytest.approx(-2e-310 / K[0, 0], rel=1e-12)
    finally:
        k.model_lu = True


def test_newton_lu_names_an_array_of_the_wrong_size_and_a_bad_order():
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    k = system.backend.kernels
    N = k.n + k.m
    st = list(states(system, short(ns, 10), 1)[0])
    kw = hht_weights(-0.1, 1e-4)
    bad = list(st)
    bad[1] = np.zeros(k.n + 1)
    with pytest.raises(ValueError, match="q has 5 entries, the model 4"):
        k.newton_lu(*bad, kw, np.ones(N), np.ones(N))
    with pytest.raises(ValueError, match="order must be two permutations"):
        k.newton_lu(*st, kw, np.ones(N), np.ones(N), order=[0, 0, 1, 2, 3] * 2)
