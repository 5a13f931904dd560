"""The compiled HHT forward sweep against independent references.

References are computed here, never by symdae: closed-form recurrences of the linear
oscillator, its analytic solution, and a tight DOP853 solution of the pendulum's
minimal-coordinate ODE. The scheme is eq. (15) of the discrete-adjoint paper:

    q_{i+1} = q_i + h v_i + h^2 [(1/2 - beta) a_i + beta a_{i+1}]
    v_{i+1} = v_i + h [(1 - gamma) a_i + gamma a_{i+1}]
    M a_{i+1} / (1 + alpha) + (C_q^T lam - Q)_{i+1} - alpha / (1 + alpha) (C_q^T lam - Q)_i = 0
    C(q_{i+1}) = 0,       beta = (1 - alpha)^2 / 4,  gamma = (1 - 2 alpha) / 2.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

EPS = np.finfo(float).eps
ALPHAS = (0.0, -0.1, -0.3)


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def oscillator(bundled):
    return bundled("oscillator")[0]


@pytest.fixture(scope="module")
def pendulum(bundled):
    return bundled("pendulum")[0]


@pytest.fixture(scope="module")
def engine_mount(bundled):
    return bundled("engine_mount")[0]


def slope(hs, errors) -> float:
    """Least-squares slope of log(error) over log(h)."""
    return float(np.polyfit(np.log(hs), np.log(errors), 1)[0])


# ---------------------------------------------------------------------------- references
def trapezoidal_undamped(omega, q0, v0, h, N):
    """Closed form of the trapezoidal rule (Newmark 1/4, 1/2) on q'' = -omega^2 q.

    Its one-step map is the Cayley transform of [[0, 1], [-omega^2, 0]]: a rotation of
    (omega q, v) by theta = 2 atan(omega h / 2) per step, exactly.
    """
    theta = 2.0 * math.atan(omega * h / 2.0)
    i = np.arange(N + 1)
    q = q0 * np.cos(i * theta) + v0 / omega * np.sin(i * theta)
    v = -omega * q0 * np.sin(i * theta) + v0 * np.cos(i * theta)
    return q, v, -omega**2 * q


def hht_linear_sdof(m, c, d, q0, v0, h, N, alpha):
    """Eq. (15) for m a + c q + d v = 0, solved for a_{i+1} in closed form at each step."""
    beta, gamma = (1 - alpha) ** 2 / 4, (1 - 2 * alpha) / 2
    q, v, a = np.empty(N + 1), np.empty(N + 1), np.empty(N + 1)
    q[0], v[0], a[0] = q0, v0, -(c * q0 + d * v0) / m
    lead = m / (1 + alpha) + c * beta * h * h + d * gamma * h
    for i in range(N):
        qp = q[i] + h * v[i] + h * h * (0.5 - beta) * a[i]
        vp = v[i] + h * (1 - gamma) * a[i]
        a[i + 1] = (-(c * qp + d * vp) + alpha / (1 + alpha) * (c * q[i] + d * v[i])) / lead
        q[i + 1] = qp + beta * h * h * a[i + 1]
        v[i + 1] = vp + gamma * h * a[i + 1]
    return q, v, a


def damped_analytic(m, c, d, q0, v0, t):
    """Exact solution of m q'' + d q' + c q = 0 (underdamped)."""
    sigma = d / (2 * m)
    wd = math.sqrt(c / m - sigma**2)
    B = (v0 + sigma * q0) / wd
    e, co, si = np.exp(-sigma * t), np.cos(wd * t), np.sin(wd * t)
    q = e * (q0 * co + B * si)
    v = e * ((B * wd - sigma * q0) * co - (q0 * wd + sigma * B) * si)
    return q, v


PEND = dict(m=1.0, g=9.81, L=0.8, d=0.1, theta0=0.9, omega0=0.5)


def pendulum_reference(t, m=PEND["m"], g=PEND["g"], L=PEND["L"], d=PEND["d"],
                       theta0=PEND["theta0"], omega0=PEND["omega0"]):
    """theta'' = -(g/L) sin(theta) - (d/m) theta' by DOP853, mapped to x = L sin, y = -L cos."""
    sol = solve_ivp(lambda _, y: [y[1], -(g / L) * math.sin(y[0]) - (d / m) * y[1]],
                    (t[0], t[-1]), [theta0, omega0], method="DOP853", t_eval=t,
                    rtol=1e-12, atol=1e-12)
    assert sol.success
    th, om = sol.y
    q = np.column_stack([L * np.sin(th), -L * np.cos(th)])
    v = np.column_stack([L * om * np.cos(th), L * om * np.sin(th)])
    return q, v


# ---------------------------------------------------------------------------- exact scheme
def test_alpha_zero_is_the_trapezoidal_rule(oscillator):
    """alpha = 0, d = 0: Newmark beta = 1/4, gamma = 1/2, i.e. the trapezoidal rule."""
    m, c = 1.0, 40.0
    q0, v0, h, N = 0.7, 1.3, 0.05, 400            # omega h = 0.32: far from the exact flow
    tr = oscillator.simulate(t_end=N * h, h=h, alpha=0.0, params={"d": 0.0, "m": m, "c": c},
                             q0=[q0], v0=[v0])
    q, v, a = trapezoidal_undamped(math.sqrt(c / m), q0, v0, h, N)
    np.testing.assert_allclose(tr.t, h * np.arange(N + 1), rtol=0, atol=1e-12)
    amp_q, amp_v = math.hypot(q0, v0 / math.sqrt(c)), math.hypot(math.sqrt(c) * q0, v0)
    tol = 50 * N * EPS                            # accumulated round-off of N steps
    assert np.max(np.abs(tr.q[:, 0] - q)) <= tol * amp_q
    assert np.max(np.abs(tr.v[:, 0] - v)) <= tol * amp_v
    assert np.max(np.abs(tr.a[:, 0] - a)) <= tol * amp_q * c / m
    # and it is not the exact flow: the test can tell schemes apart
    exact = q0 * np.cos(math.sqrt(c) * tr.t) + v0 / math.sqrt(c) * np.sin(math.sqrt(c) * tr.t)
    assert np.max(np.abs(tr.q[:, 0] - exact)) > 1e3 * tol * amp_q


@pytest.mark.parametrize("alpha", ALPHAS)
def test_linear_oscillator_matches_eq15_recurrence(oscillator, alpha):
    """With damping, every alpha: (q, v, a) equal the scalar recurrence of eq. (15)."""
    m, c, d, q0, v0, h, N = 1.3, 40.0, 0.9, 0.4, -2.0, 0.02, 300
    tr = oscillator.simulate(t_end=N * h, h=h, alpha=alpha, params={"m": m, "c": c, "d": d},
                             q0=[q0], v0=[v0], scheme="hht-paper")
    q, v, a = hht_linear_sdof(m, c, d, q0, v0, h, N, alpha)
    tol = 50 * N * EPS
    scale = abs(q0) + abs(v0) / math.sqrt(c / m)
    assert np.max(np.abs(tr.q[:, 0] - q)) <= tol * scale
    assert np.max(np.abs(tr.v[:, 0] - v)) <= tol * scale * math.sqrt(c / m)
    assert np.max(np.abs(tr.a[:, 0] - a)) <= tol * scale * c / m
    assert np.array_equal(tr.outputs["a"], tr.a[:, 0])
    assert np.array_equal(tr.outputs["q"], tr.q[:, 0])


def test_oscillator_initial_state_from_parameter(oscillator):
    """q0 = q_init (a parameter), v0 = 0, a0 = -(c q0 + d v0) / m."""
    tr = oscillator.simulate(t_end=0.1, h=0.01, params={"q_init": 0.25, "c": 40.0, "d": 0.4, "m": 2.0})
    assert tr.q[0, 0] == 0.25 and tr.v[0, 0] == 0.0
    assert tr.a[0, 0] == pytest.approx(-40.0 * 0.25 / 2.0, rel=1e-15)


# ---------------------------------------------------------------------------- convergence
@pytest.mark.parametrize("alpha", ALPHAS)
def test_oscillator_second_order(oscillator, alpha):
    m, c, d, T = 1.0, 40.0, 0.4, 3.0
    hs = [0.02, 0.01, 0.005, 0.0025]
    eq, ev = [], []
    for h in hs:
        tr = oscillator.simulate(t_end=T, h=h, alpha=alpha, params={"m": m, "c": c, "d": d,
                                                            "q_init": 1.0})
        q, v = damped_analytic(m, c, d, 1.0, 0.0, tr.t)
        eq.append(np.max(np.abs(tr.q[:, 0] - q)))
        ev.append(np.max(np.abs(tr.v[:, 0] - v)))
    sq, sv = slope(hs, eq), slope(hs, ev)
    assert 1.8 <= sq <= 2.2, (sq, eq)
    assert 1.8 <= sv <= 2.2, (sv, ev)
    assert eq[-1] < 1e-3                            # the asymptotic regime, not noise


@pytest.mark.parametrize("alpha", ALPHAS)
def test_pendulum_second_order(pendulum, alpha):
    """Positions (and, for alpha < 0 and 0 alike, velocities) converge with order 2.

    With alpha = 0 the multipliers and accelerations carry an undamped period-2 mode (the
    trapezoidal rule's weak instability on index-3 DAEs), so a and lam are not compared.
    """
    T = 2.0
    hs = [0.01, 0.005, 0.0025, 0.00125]
    eq, ev = [], []
    for h in hs:
        tr = pendulum.simulate(t_end=T, h=h, alpha=alpha)
        q, v = pendulum_reference(tr.t)
        eq.append(np.max(np.abs(tr.q - q)))
        ev.append(np.max(np.abs(tr.v - v)))
    sq, sv = slope(hs, eq), slope(hs, ev)
    assert 1.8 <= sq <= 2.2, (sq, eq)
    assert 1.8 <= sv <= 2.2, (sv, ev)
    assert eq[-1] < 1e-4


def test_pendulum_runtime_parameters_reach_the_sweep(pendulum):
    """Other L (in the constraint), d, theta0, omega0 (in the initial state) given at run time."""
    par = dict(PEND, L=1.3, d=0.0, theta0=0.4, omega0=-1.0)
    T, errors = 1.5, []
    for h in (0.005, 0.0025):
        tr = pendulum.simulate(t_end=T, h=h, alpha=-0.1, params=par)
        q, _ = pendulum_reference(tr.t, **par)
        errors.append(np.max(np.abs(tr.q - q)))
    assert errors[1] < 1e-3 * par["L"]
    assert 3.4 <= errors[0] / errors[1] <= 4.6, errors


# ---------------------------------------------------------------------------- constraints
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("h", [0.01, 0.001])
def test_pendulum_constraint_at_roundoff(pendulum, alpha, h):
    L = PEND["L"]
    tr = pendulum.simulate(t_end=2.0, h=h, alpha=alpha)
    x, y = tr.q.T
    C = x * x + y * y - L * L
    scale = x * x + y * y + L * L                   # magnitude of the terms of C
    assert np.all(np.abs(C) <= 16 * EPS * scale), np.max(np.abs(C) / scale) / EPS
    assert len(tr.t) == round(2.0 / h) + 1


@pytest.mark.parametrize("alpha", ALPHAS)
def test_engine_mount_constraint_at_roundoff(engine_mount, alpha):
    nominal = dict(zip(engine_mount.model.parameter_names, engine_mount.model.nominal_values))
    a, b = nominal["a"], nominal["b"]
    tr = engine_mount.simulate(t_end=1.0, h=1e-4, alpha=alpha)
    x1, x2, x3, x4 = tr.q.T
    C = x2 * (a + b) - x3 * b - x4 * a
    scale = np.abs(x2) * (a + b) + np.abs(x3) * b + np.abs(x4) * a
    assert np.all(np.abs(C) <= 16 * EPS * scale), np.max(np.abs(C)[1:] / scale[1:]) / EPS
    # the run actually moves (the constraint is not trivially satisfied by q = 0)
    assert np.max(np.abs(x2)) > 1e-3 and np.max(np.abs(x4)) > 1e-3


# ---------------------------------------------------------------------------- Newton caps
def test_engine_mount_newton_iterations_capped(engine_mount):
    """Reference scenario: 1 s of the frequency sweep at h = 1e-4 (>= 40 steps per period)."""
    tr = engine_mount.simulate(t_end=1.0, h=1e-4)
    c = tr.counters
    assert c["steps"] == 10000
    mean = c["newton_iterations"] / c["steps"]
    # K at Newton's start value (newton.pxd): the first correction leaves one within the
    # tolerance, two residuals per step (2.9 with K at the last accepted state)
    assert mean <= 2.2, c
    assert c["jacobian_refreshes"] <= 10, c
    # one at each solve's start value (a step solved again, hht.pyx, takes one more: two
    # in the start-up transient, where the massless node's acceleration swings) and refreshes
    assert c["newton_restarts"] <= 5, c
    assert c["factorizations"] == c["steps"] + c["newton_restarts"] + c["jacobian_refreshes"], c
    # storing them for the derivative sweeps: K at every accepted state too, state 0's included
    stored = engine_mount.simulate(t_end=1.0, h=1e-4, store_factorizations=True)
    np.testing.assert_array_equal(stored.q, tr.q)
    assert stored.counters["factorizations"] == \
        2 * c["steps"] + 1 + c["newton_restarts"] + c["jacobian_refreshes"]
    # a hard per-step cap: every step converges within 5 residual evaluations
    capped = engine_mount.simulate(t_end=1.0, h=1e-4, max_iter=5)
    np.testing.assert_array_equal(capped.q, tr.q)


def test_linear_oscillator_one_newton_correction(oscillator):
    """Linear problem, exact Newton matrix: one correction, one check per step."""
    tr = oscillator.simulate(t_end=2.0, h=0.01, alpha=-0.1)
    c = tr.counters
    assert c["newton_iterations"] <= 2 * c["steps"], c
    assert c["jacobian_refreshes"] == 0, c
    oscillator.simulate(t_end=2.0, h=0.01, alpha=-0.1, max_iter=2)


def test_pendulum_default_newton_settings_converge(pendulum):
    tr = pendulum.simulate(t_end=2.0, h=0.02)
    assert tr.counters["steps"] == 100
    # with an accurate answer (about 3.4e-3 at this h once Newton is given enough iterations)
    q, _ = pendulum_reference(tr.t)
    assert np.max(np.abs(tr.q - q)) < 5e-3


def test_pendulum_newton_iterations_capped(pendulum):
    tr = pendulum.simulate(t_end=2.0, h=0.01, alpha=-0.1)
    c = tr.counters
    assert c["newton_iterations"] / c["steps"] <= 5.0, c
