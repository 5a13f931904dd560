"""Massless nodes (a zero-mass row no constraint reaches) in the consistent initialisation.

Such a row holds at velocity level, g_r(q, v, t, p) = 0, so the initial acceleration of the node
comes from its time derivative J_G[r] v + G_V[r] a + dg_r/dt = 0 (``symdae.simulation.initial``). Checked
on the two small models of ``maxwell_models.py``:

* the initial accelerations against the hand-derived derivative of the node's equation, on the
  compiled and the NumPy backend;
* init_tangent (the exact derivative of (q0, v0, a0, lam0) with respect to every parameter,
  through the initial-state expressions and the differentiated row) against central finite
  differences of the initialisation with halved steps (O(delta^2) error);
* the gradient of a least-squares cost: adjoint = tangent to 1e-10, and central FD with the
  truncation error falling fourfold when the step is halved (Richardson-extrapolated FD within
  1e-7);
* the forward run against a tight scipy solution of the equivalent ODE (x, x', z), with the
  second-order convergence of the scheme;
* the checks: an inconsistent node velocity is named (and project=True solves for it), a mass
  that is a parameter set to 0 is detected at run time, a node without a damper and a node
  row that depends on an input are refused with errors that say why.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp
from sympy.physics.mechanics import dynamicsymbols

import maxwell_models
import symdae
from symdae.costs.time_domain import LeastSquares
from symdae.errors import (
    InconsistentInitialStateError,
    ModelError,
    SimulationError,
    SingularMatrixError,
)
from symdae.simulation.initial import init_tangent, initial_state
from symdae.simulation.sensitivity import adjoint_gradient, tangent

t = dynamicsymbols._t


@functools.cache
def system(name: str, backend: str = "compiled"):
    factory = {"oscillator": maxwell_models.oscillator, "link": maxwell_models.link,
               "oscillator_mz": lambda: maxwell_models.oscillator(True, "maxwell_oscillator_mz")}
    return symdae.compile_model(factory[name](), backend=backend)


def params_of(s) -> dict:
    return dict(zip(s.model.parameter_names, s.model.nominal_values))


def hand_accelerations(name: str, p: dict) -> np.ndarray:
    """a0 from the model equations by hand (node: the derivative of its velocity equation)."""
    if name == "oscillator":
        vz = p["c"] * (p["X0"] - p["Z0"]) / p["d"]
        ax = (-p["k"] * p["X0"] - p["c"] * (p["X0"] - p["Z0"])) / p["m"]      # sin(0) = 0
        return np.array([ax, p["c"] * (p["V0"] - vz) / p["d"]])
    u = p["X0"] - p["Z0"]
    bw = p["B"] * p["W"]
    dmp = p["d"] * (1 + p["e"] * p["Z0"] ** 2)
    vz = bw + (p["c"] * u + p["c3"] * u**3) / dmp
    # (c + 3 c3 u^2)(x2' - z') - 2 d e z z' (z' - B W) - d (1 + e z^2)(z'' + B W^2 sin 0) = 0
    az = ((p["c"] + 3 * p["c3"] * u**2) * (p["V0"] - vz)
          - 2 * p["d"] * p["e"] * p["Z0"] * vz * (vz - bw)) / dmp
    # the link: x1'' = x2'' = a, (m1 + m2) a = -0.5 V0 - k X0 - (c u + c3 u^3)
    a = (-0.5 * p["V0"] - p["k"] * p["X0"] - (p["c"] * u + p["c3"] * u**3)) / (p["m1"] + p["m2"])
    return np.array([a, a, az])


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
@pytest.mark.parametrize("name", ["oscillator", "link"])
def test_initial_accelerations_of_massless_nodes_by_hand(name, backend):
    s = system(name, backend)
    p = s.parameter_vector()
    x0 = initial_state(s.backend, s.model, p, 0.0, np.zeros(0))
    assert x0.massless == (s.model.n - 1,)
    ref = hand_accelerations(name, params_of(s))
    assert np.max(np.abs(x0.a - ref)) <= 1e-12 * np.max(np.abs(ref))
    if name == "link":     # the multiplier: m1 a = -0.5 V0 - lambda
        pv = params_of(s)
        assert x0.lam[0] == pytest.approx(-0.5 * pv["V0"] - pv["m1"] * ref[0], rel=1e-12)


def _init_flat(s, p) -> np.ndarray:
    x0 = initial_state(s.backend, s.model, p, 0.0, np.zeros(0))
    return np.concatenate([x0.q, x0.v, x0.a, x0.lam])


@pytest.mark.parametrize("name", ["oscillator", "link"])
def test_init_tangent_is_the_derivative_of_the_initialisation(name):
    s = system(name)
    p = s.parameter_vector()
    x0 = initial_state(s.backend, s.model, p, 0.0, np.zeros(0))
    D = np.eye(len(p))
    exact = np.hstack([x.T for x in init_tangent(s.backend, x0, p, 0.0, np.zeros(0), D)])
    ref = np.abs(exact).max()
    for k in range(len(p)):
        errs = []
        for rel in (1e-3, 5e-4):
            dp = rel * abs(p[k])
            e = np.zeros_like(p)
            e[k] = dp
            fd = (_init_flat(s, p + e) - _init_flat(s, p - e)) / (2 * dp)
            errs.append(np.max(np.abs(fd - exact[k])) * abs(p[k]) / ref)
        name_k = s.model.parameter_names[k]
        assert errs[1] <= 1e-7, (name_k, errs)
        if errs[0] > 1e-11:       # truncation-dominated: falls fourfold per halving
            assert 3.2 <= errs[0] / errs[1] <= 5.0, (name_k, errs)


def _cost(s, sc, outputs):
    shifted = {k: v * (1.1 if k in ("c", "d", "k") else 1.0) for k, v in params_of(s).items()}
    data = s.simulate(sc, params=shifted)
    return LeastSquares({o: data.outputs[o] for o in outputs})


def _J(s, sc, cost, p):
    names = s.model.parameter_names
    return cost.evaluate(s, s.simulate(sc, params=dict(zip(names, p))))[0]


@pytest.mark.parametrize("alpha", [0.0, -0.3])
@pytest.mark.parametrize("name,outputs", [("oscillator", ["x", "z", "vz", "az", "ax"]),
                                          ("link", ["x2", "z", "vz", "az", "lambda"])])
def test_gradient_through_massless_nodes(name, outputs, alpha):
    s = system(name)
    if name == "link" and alpha == 0.0:
        alpha = -0.05     # index 3: no trapezoidal rule (its parasitic mode grows)
    sc = symdae.Scenario(t_end=0.2, h=1e-3, alpha=alpha)
    cost = _cost(s, sc, outputs)
    p = s.parameter_vector()
    traj = s.simulate(sc, store_factorizations=True)
    J, dS = cost.evaluate(s, traj)
    g = adjoint_gradient(s, traj, dS)
    tl = tangent(s, traj, s.model.parameter_names)
    g_tl = np.einsum("ijk,ij->k", tl.ds, dS)
    scale = np.abs(p)
    ref = np.max(np.abs(g_tl) * scale)
    assert np.max(np.abs(g - g_tl) * scale) <= 1e-10 * ref
    for k in range(len(p)):
        fds = []
        for rel in (1e-3, 5e-4):
            e = np.zeros_like(p)
            e[k] = rel * abs(p[k])
            fds.append((_J(s, sc, cost, p + e) - _J(s, sc, cost, p - e)) / (2 * e[k]))
        errs = [abs(fd - g[k]) * abs(p[k]) / ref for fd in fds]
        richardson = (4 * fds[1] - fds[0]) / 3          # the O(delta^2) term removed
        what = (s.model.parameter_names[k], errs)
        assert abs(richardson - g[k]) * abs(p[k]) / ref <= 1e-7, what
        if errs[0] > 1e-7:
            assert 3.2 <= errs[0] / errs[1] <= 5.0, what


def test_numpy_backend_gives_the_same_gradient():
    sc = symdae.Scenario(t_end=0.05, h=1e-3, alpha=-0.1)
    grads = []
    for backend in ("compiled", "numpy"):
        s = system("link", backend)
        cost = _cost(s, sc, ["z", "az", "lambda"])
        traj = s.simulate(sc, store_factorizations=True)
        grads.append(adjoint_gradient(s, traj, cost.evaluate(s, traj)[1]))
    p = system("link").parameter_vector()
    assert np.max(np.abs(grads[0] - grads[1]) * np.abs(p)) <= \
        1e-9 * np.max(np.abs(grads[1]) * np.abs(p))


def test_forward_run_matches_the_ode_and_converges_with_order_two():
    """The oscillator is the ODE m x'' = F - k x - c (x - z), d z' = c (x - z)."""
    s = system("oscillator")
    p = params_of(s)

    def rhs(tt, y):
        x, v, z = y
        return [v, (p["F0"] * np.sin(p["w"] * tt) - p["k"] * x - p["c"] * (x - z)) / p["m"],
                p["c"] * (x - z) / p["d"]]

    T = 0.5
    ref = solve_ivp(rhs, (0, T), [p["X0"], p["V0"], p["Z0"]], method="DOP853", rtol=1e-13,
                    atol=1e-15, dense_output=True)
    errs = []
    for h in (1e-3, 5e-4):
        tr = s.simulate(t_end=T, h=h, alpha=-0.1)
        y = ref.sol(tr.t)
        errs.append(max(np.max(np.abs(tr.q[:, 0] - y[0])), np.max(np.abs(tr.q[:, 1] - y[2]))))
        # the node's velocity is on its equation at every step, as the ODE's
        assert np.max(np.abs(tr.v[:, 1] - p["c"] * (tr.q[:, 0] - tr.q[:, 1]) / p["d"])) \
            <= 1e-12 * np.max(np.abs(tr.v[:, 1]))
    assert errs[1] <= 2e-4 * np.max(np.abs(ref.y[0]))
    assert 3.5 <= errs[0] / errs[1] <= 4.5


def test_inconsistent_node_velocity_is_named_and_projected():
    s = system("oscillator")
    p = params_of(s)
    q0 = [p["X0"], p["Z0"]]
    vz = p["c"] * (p["X0"] - p["Z0"]) / p["d"]
    with pytest.raises(InconsistentInitialStateError, match="massless coordinate z"):
        s.simulate(t_end=0.01, h=1e-3, q0=q0, v0=[p["V0"], vz + 1e-3])
    s.simulate(t_end=0.01, h=1e-3, q0=q0, v0=[p["V0"], vz * (1 + 1e-12)])   # within tol
    tr = s.simulate(t_end=0.01, h=1e-3, q0=q0, v0=[p["V0"], 0.0], project=True)
    assert tr.v[0, 1] == pytest.approx(vz, rel=1e-12)
    assert tr.v[0, 0] == p["V0"]            # the node's own velocity moves, nothing else
    assert tr.a[0, 1] == pytest.approx(p["c"] * (p["V0"] - vz) / p["d"], rel=1e-12)
    with pytest.raises(SimulationError, match="projected"):
        tr = s.simulate(t_end=0.01, h=1e-3, q0=q0, v0=[p["V0"], 0.0], project=True,
                        store_factorizations=True)
        tangent(s, tr, ["c"])


def test_nonlinear_node_velocity_is_projected():
    s = system("link")
    p = params_of(s)
    x0 = initial_state(s.backend, s.model, s.parameter_vector(), 0.0, np.zeros(0))
    v_bad = x0.v.copy()
    v_bad[2] += 0.5
    with pytest.raises(InconsistentInitialStateError, match="massless coordinate z"):
        s.simulate(t_end=0.01, h=1e-3, q0=x0.q, v0=v_bad)
    tr = s.simulate(t_end=0.01, h=1e-3, q0=x0.q, v0=v_bad, project=True)
    assert tr.v[0] == pytest.approx(x0.v, rel=1e-12)
    assert p["V0"] == tr.v[0, 0]


def test_a_mass_set_to_zero_at_run_time_is_a_massless_node():
    s = system("oscillator_mz", "numpy")        # the same initialisation code, no compiler
    p = s.parameter_vector()
    x0 = initial_state(s.backend, s.model, p, 0.0, np.zeros(0))
    assert x0.massless == (1,)
    assert x0.a == pytest.approx(hand_accelerations("oscillator", params_of(s)), rel=1e-12)
    p[s.model.parameter_names.index("mz")] = 1e-3
    x1 = initial_state(s.backend, s.model, p, 0.0, np.zeros(0))
    assert x1.massless == ()
    assert abs(x1.a[1]) <= 1e-9     # with a mass, g_z = 0 means no force on the node yet


def test_node_without_damper_or_with_an_input_is_refused():
    x, z = dynamicsymbols("x z")
    m, k, c = sp.symbols("m k c")
    springs = symdae.Model("maxwell_no_damper", coordinates=[x, z], mass_matrix=sp.diag(m, 0),
                           forces=[-k * x - c * (x - z), c * (x - z) - k * z],
                           parameters={m: 1.0, k: 10.0, c: 20.0})
    with pytest.raises(SingularMatrixError, match="massless coordinates"):
        symdae.compile_model(springs, backend="numpy").simulate(t_end=0.01, h=1e-3)
    u = dynamicsymbols("u")
    driven = symdae.Model("maxwell_input", coordinates=[x, z], mass_matrix=sp.diag(m, 0),
                          forces=[-k * x - c * (x - z), c * (x - z) - k * (z.diff(t) - u)],
                          inputs=[u], parameters={m: 1.0, k: 10.0, c: 20.0})
    with pytest.raises(ModelError, match="massless coordinate z depends on the input 'u'"):
        symdae.compile_model(driven, backend="numpy").simulate(t_end=0.01, h=1e-3, inputs={"u": 0.0})
