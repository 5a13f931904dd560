"""Newton's stopping test on mechanisms that defeat a round-off model scaled by |q|: each of
these stalled (NewtonError at a residual stuck at its rounding level) before the test took the
rounding of each residual row from the size of its own terms (symdae/model/roundoff.py, newton.pxd).

- a Cartesian pendulum whose bob passes (0, 0) (pivot at (0, 1), released horizontally);
- the same far from the origin (pivot (0, 1000), L = 1000) at h = 1e-6, any rtol;
- a crank-slider whose crank-pin circle passes through the origin (9 of 54 configurations
  failed, none of the same mechanism shifted 0.98 m away);
- a fast, stiff four-bar (inertias ~1e-6 kg m^2, ~1e3 rad/s, a 4530 N/m spring) whose long
  rocker's tip passes the origin (every configuration failed);
- and a crank angle of 1e4 rad (an engine run-up) must lose nothing.
Every accepted trajectory is checked against physics it must obey (constraints at round-off,
the same motion wherever the mechanism sits, a minimal-coordinate reference).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.errors import NewtonError

t = dynamicsymbols._t
EPS = np.finfo(float).eps


# ---------------------------------------------------------------------------- models
def offset_pendulum():
    """Point mass on a rod of length L about the pivot (0, y0); start at angle theta0 from the
    downward vertical with angular velocity omega0."""
    x, y = dynamicsymbols("x y")
    m, g, L, y0, th0, w0 = sp.symbols("m g L y0 theta0 omega0")
    lam = sp.Symbol("lambda")
    return symdae.Model(
        "newton_offset_pendulum", [x, y], mass_matrix=sp.diag(m, m), forces=[0, -m * g],
        constraints=[x**2 + (y - y0)**2 - L**2], multipliers=[lam],
        parameters={m: 1.0, g: 9.81, L: 1.0, y0: 1.0, th0: np.pi / 2, w0: 0.0},
        initial_state={x: L * sp.sin(th0), y: y0 - L * sp.cos(th0),
                       x.diff(t): L * w0 * sp.cos(th0), y.diff(t): L * w0 * sp.sin(th0)},
        outputs={"theta": sp.atan2(x, y0 - y)})


def crank_slider():
    """Crank about (ox, 0), radius r: with ox = r the crank pin passes through the origin.
    Rod l to a slider on the x axis; flywheel, motor torque, spring-damper on the slider."""
    phi, x1, y1, x2 = dynamicsymbols("phi x1 y1 x2")
    r, l, ox, m2, m3, J, k, d, T0, Om, phi0, w0 = sp.symbols(
        "r l ox m2 m3 J k d T0 Omega phi0 omega0")
    dphi, dx1, dy1, dx2 = (c.diff(t) for c in (phi, x1, y1, x2))
    T = (J * dphi**2 + m2 / 3 * (dx1**2 + dx1 * dx2 + dx2**2 + dy1**2) + m3 * dx2**2) / 2
    X1, Y1 = ox + r * sp.cos(phi0), r * sp.sin(phi0)
    root = sp.sqrt(l**2 - Y1**2)
    dX1, dY1 = -r * w0 * sp.sin(phi0), r * w0 * sp.cos(phi0)
    return symdae.Model(
        "newton_crank_slider", [phi, x1, y1, x2], lagrangian=T,
        forces=[T0 * (1 - dphi / Om), 0, 0, -k * (x2 - ox - l) - d * dx2],
        constraints=[x1 - ox - r * sp.cos(phi), y1 - r * sp.sin(phi),
                     (x2 - x1)**2 + y1**2 - l**2],
        parameters={r: 0.1, l: 0.3, ox: 0.1, m2: 0.8, m3: 1.0, J: 0.0133, k: 500.0, d: 2.0,
                    T0: 5.0, Om: 60.0, phi0: 0.3, w0: 30.0},
        initial_state={phi: phi0, x1: X1, y1: Y1, x2: X1 + root, dphi: w0, dx1: dX1,
                       dy1: dY1, dx2: dX1 - Y1 * dY1 / root},
        outputs={"phi": phi, "slider": x2 - ox})


def long_rocker_fourbar():
    """Crank A B (A = (ax, 0), 7 mm) driven near 1e3 rad/s, coupler B C (28 mm), rocker D C with
    D = (l3, 0), l3 = 0.5 m: C moves within a millimetre of the origin while the rocker
    constraint's terms are l3^2. Inertias ~1e-6 kg m^2, a 4530 N/m spring pulls C."""
    phi, xb, yb, xc, yc = dynamicsymbols("phi xb yb xc yc")
    l1, l2, l3, ax, mb, mc, J, c0, T0, Om = sp.symbols("l1 l2 l3 ax mb mc J c0 T0 Omega")
    vs = [c.diff(t) for c in (phi, xb, yb, xc, yc)]
    T = (J * vs[0]**2 + mb * (vs[1]**2 + vs[2]**2) + mc * (vs[3]**2 + vs[4]**2)) / 2
    V = c0 / 2 * (xc**2 + (yc - 0.01)**2)
    return symdae.Model(
        "newton_long_rocker", [phi, xb, yb, xc, yc], lagrangian=T - V,
        forces=[T0 * (1 - vs[0] / Om), 0, 0, 0, 0],
        constraints=[xb - ax - l1 * sp.cos(phi), yb - l1 * sp.sin(phi),
                     (xc - xb)**2 + (yc - yb)**2 - l2**2, (xc - l3)**2 + yc**2 - l3**2],
        parameters={l1: 0.007, l2: 0.028, l3: 0.5, ax: -0.018, mb: 0.004, mc: 0.003,
                    J: 2e-6, c0: 4530.0, T0: 0.033, Om: 1400.0},
        outputs={"phi": phi, "xc": xc, "yc": yc})


def long_rocker_start(phi0, w0=900.0, l1=0.007, l2=0.028, l3=0.5, ax=-0.018):
    """Consistent (q0, v0): position analysis (C on the upper branch), velocity analysis."""
    B = np.array([ax + l1 * np.cos(phi0), l1 * np.sin(phi0)])
    D = np.array([l3, 0.0])
    e = D - B
    dist = np.hypot(*e)
    a = (l2**2 - l3**2 + dist**2) / (2 * dist)
    C = B + a * e / dist + np.sqrt(l2**2 - a**2) * np.array([-e[1], e[0]]) / dist
    Bd = np.array([-l1 * w0 * np.sin(phi0), l1 * w0 * np.cos(phi0)])
    Cd = np.linalg.solve(np.array([C - B, C - D]), np.array([(C - B) @ Bd, 0.0]))
    return np.array([phi0, *B, *C]), np.array([w0, *Bd, *Cd])


@pytest.fixture(scope="module")
def pendulum():
    return symdae.compile_model(offset_pendulum())


def constraint_at_roundoff(system, tr, factor=64.0, samples=400):
    """max over the run (``samples`` states) of |C| / (eps * size of C's terms)
    (symdae.model.roundoff.magnitude)."""
    from symdae.model.kernels import split
    worst = 0.0
    p = system.parameter_vector(tr.params)
    u = np.zeros(system.sizes.n_u)
    for i in range(0, len(tr.t), max(1, len(tr.t) // samples)):
        args = (tr.t[i], tr.q[i], tr.v[i], tr.a[i], tr.lam[i])
        C = split("residual", system.backend.evaluate("residual", *args, p, u),
                  system.sizes)["C"]
        qv = np.concatenate([np.abs(tr.q[i]), np.abs(tr.v[i]), [0.0]])   # weights qs, vs, switch
        mag = split("residual_magnitude", system.backend.evaluate(
            "residual_magnitude", *args, p, u, qv), system.sizes)["C"]
        worst = max(worst, float(np.max(np.abs(C) / (EPS * mag))))
    assert worst <= factor, f"constraint residual reached {worst:.1f} eps times its terms"
    return worst


# ---------------------------------------------------------------------------- pendulums
def pendulum_angle(t_eval, theta0, omega0, g=9.81, L=1.0):
    """theta'' = -(g/L) sin(theta), a tight scipy solution (minimal coordinates)."""
    sol = solve_ivp(lambda _, y: [y[1], -g / L * np.sin(y[0])], (0, t_eval[-1]),
                    [theta0, omega0], t_eval=t_eval, rtol=1e-12, atol=1e-12, method="DOP853")
    return sol.y[0]


@pytest.mark.parametrize("alpha", [0.0, -0.1, -0.3])
@pytest.mark.parametrize("h", [1e-3, 1e-4])
def test_pendulum_whose_bob_passes_y_zero(pendulum, h, alpha):
    tr = pendulum.simulate(t_end=1.0, h=h, alpha=alpha)      # at y = 0 near t = 0.547 s
    assert abs(tr.q[:, 1].min()) < 1e-5 and abs(tr.q[:, 0]).min() < 2e-3
    constraint_at_roundoff(pendulum, tr)
    ref = pendulum_angle(tr.t, np.pi / 2, 0.0)
    err = np.max(np.abs(tr.outputs["theta"] - ref))
    # second order: 10-15 h^2 here for every alpha (1e-5 at h = 1e-3, 1e-7 at h = 1e-4)
    assert err < 25 * h**2, f"angle error {err:.2e} at h = {h}"
    assert tr.counters["newton_iterations"] <= 5 * tr.counters["steps"]


def test_pendulum_whose_bob_passes_y_zero_fine_steps(pendulum):
    tr = pendulum.simulate(t_end=0.6, h=1e-5, alpha=-0.1)
    constraint_at_roundoff(pendulum, tr)
    assert np.max(np.abs(tr.outputs["theta"] - pendulum_angle(tr.t, np.pi / 2, 0.0))) < 1e-8


@pytest.mark.parametrize("rtol", [1e-12, 1e-6, 0.5])
@pytest.mark.parametrize("alpha", [0.0, -0.1])
def test_pendulum_far_from_the_origin(pendulum, rtol, alpha):
    """L = 1000 m about (0, 1000), from the bottom (0, 0) at 0.01 rad/s, h = 1e-6: C / (beta
    h^2) cannot fall below ~eps L^2 / (beta h^2) ~ 1e3, whatever rtol."""
    params = {"L": 1000.0, "y0": 1000.0, "theta0": 0.0, "omega0": 0.01}
    tr = pendulum.simulate(t_end=2e-3, h=1e-6, alpha=alpha, rtol=rtol, params=params)
    constraint_at_roundoff(pendulum, tr)
    ref = pendulum_angle(tr.t, 0.0, 0.01, L=1000.0)
    assert np.max(np.abs(tr.outputs["theta"] - ref)) < 1e-12


# ---------------------------------------------------------------------------- crank-slider
@pytest.fixture(scope="module")
def slider():
    return symdae.compile_model(crank_slider())


CONFIGS = list(itertools.product((1e-3, 1e-4), (-0.05, -0.1, -0.3), (10.0, 30.0, 60.0),
                                 (0.3, 2.0, 4.0)))


def crank_runs(slider, ox):
    """The 54 configurations (h, alpha, speed, angle) with the crank about (ox, 0); every
    accepted trajectory keeps its constraints at round-off."""
    runs = {}
    for h, alpha, w0, phi0 in CONFIGS:
        tr = slider.simulate(t_end=0.5, h=h, alpha=alpha,
                             params={"ox": ox, "omega0": w0, "phi0": phi0})
        constraint_at_roundoff(slider, tr, samples=25)
        runs[h, alpha, w0, phi0] = tr
    return runs


@pytest.fixture(scope="module")
def through_the_origin(slider):
    return crank_runs(slider, 0.1)


def test_crank_slider_with_the_pin_circle_through_the_origin(through_the_origin):
    """With the crank about (0.1, 0) its pin circle passes through the origin: all 54
    configurations integrate (each stalled with a round-off model scaled by |q|)."""
    assert len(through_the_origin) == len(CONFIGS)


def test_crank_slider_moves_the_same_wherever_it_sits(slider, through_the_origin):
    """Shifted 0.98 m away, the motion is the same as through the origin."""
    for key, tr in crank_runs(slider, 1.08).items():
        ref = through_the_origin[key]
        for out in ("phi", "slider"):
            scale = np.max(np.abs(ref.outputs[out]))
            assert np.max(np.abs(tr.outputs[out] - ref.outputs[out])) < 1e-9 * scale, \
                (key, out)


# ---------------------------------------------------------------------------- four-bar
@pytest.mark.parametrize("alpha", [0.0, -0.1, -0.3])
def test_fast_stiff_fourbar_whose_rocker_tip_passes_the_origin(alpha):
    system = symdae.compile_model(long_rocker_fourbar())
    ends = {}
    for h, phi0 in itertools.product((1e-5, 5e-6, 2.5e-6), (0.2, 2.5)):
        q0, v0 = long_rocker_start(phi0)
        tr = system.simulate(t_end=0.002, h=h, alpha=alpha, q0=q0, v0=v0)
        assert np.max(np.abs(tr.q[:, 3])) < 1e-3          # C stays near the origin
        assert tr.v[:, 0].max() > 900.0
        constraint_at_roundoff(system, tr)
        ends[h, phi0] = tr.q[-1, 0]
    # the crank angle at t = 2 ms converges with order 2 as the step halves
    for phi0 in (0.2, 2.5):
        d1 = ends[1e-5, phi0] - ends[5e-6, phi0]
        d2 = ends[5e-6, phi0] - ends[2.5e-6, phi0]
        assert 3.0 < d1 / d2 < 5.0, (phi0, d1, d2)


# ---------------------------------------------------------------------------- run-up
def test_crank_angle_of_ten_thousand_radians_loses_nothing():
    """The bundled slider-crank started at phi0 = 1e4 rad moves as the one started at the same
    angle modulo 2 pi (the only difference: the rounding of phi, eps 1e4 ~ 2e-12 rad)."""
    model, _ = symdae.load_model("slider_crank")
    system = symdae.compile_model(model)
    big = 1e4
    small = big % (2 * np.pi)
    runs = [system.simulate(t_end=1.0, h=1e-4, alpha=-0.1, params={"phi0": p0})
            for p0 in (big, small)]
    for tr in runs:
        constraint_at_roundoff(system, tr)
    a, b = runs
    # phi = 1e4 carries rounding of eps 1e4, which makes a noisy at eps 1e4 / (beta h^2):
    # a few more iterations per step, never a failure
    assert a.counters["newton_iterations"] <= 4 * a.counters["steps"]
    for out in ("x_s", "v_s"):
        scale = np.max(np.abs(b.outputs[out]))
        assert np.max(np.abs(a.outputs[out] - b.outputs[out])) < 1e-8 * scale, out
    # accelerations and multipliers are resolved only to eps phi / (beta h^2) ~ 7e-4 rad/s^2
    # at phi = 1e4 (against ~1e2 here): the rod force agrees to that
    floor = EPS * big / (0.25 * 1.1**2 * 1e-8)
    scale = np.max(np.abs(b.outputs["F_rod"]))
    assert np.max(np.abs(a.outputs["F_rod"] - b.outputs["F_rod"])) < 10 * floor / 1e2 * scale
    np.testing.assert_allclose(a.outputs["phi"] - big, b.outputs["phi"] - small, atol=1e-8)


# ---------------------------------------------------------------------------- failures
def test_real_divergence_is_still_reported_with_advice(pendulum):
    with pytest.raises(NewtonError, match="reduce h") as exc:
        pendulum.simulate(t_end=40.0, h=4.0, alpha=-0.1, max_iter=8)
    assert exc.value.step == 1


# ------------------------------------------------------------------ a damped model at rest
# A damped model decays into subnormal states, where eps times the size of a row's terms
# underflows to 0: without the floor of the round-off level (DBL_MIN, newton.pxd) every residual
# was "inf times its round-off level" and the run failed (the oscillator at t = 114.32 here, the
# double pendulum at t = 1663).
@pytest.mark.parametrize("name, params, t_end, h, backend", [
    ("oscillator", {"d": 12.6}, 200.0, 2e-2, "compiled"),        # critically damped
    ("oscillator", {"d": 12.6}, 200.0, 2e-2, "numpy"),
    ("double_pendulum", {"d1": 5.0, "d2": 5.0}, 2000.0, 1e-2, "compiled"),
    ("pendulum", {"d": 5.0}, 2000.0, 2e-2, "compiled"),
    ("pendulum_chain", {"d": 5.0}, 400.0, 1e-2, "compiled"),
])
def test_a_damped_model_decays_into_subnormal_states_and_reaches_the_end(name, params, t_end, h,
                                                                         backend):
    model, _ = symdae.load_model(name)
    system = symdae.compile_model(model, backend=backend)
    traj = system.simulate(symdae.Scenario(t_end=t_end, h=h), params=params)
    assert traj.t[-1] == pytest.approx(t_end)
    assert np.all(np.isfinite(traj.q)) and np.all(np.isfinite(traj.v))
    if name == "oscillator":      # it did reach the subnormal range
        assert 0.0 < np.min(np.abs(traj.q[-1])) < np.finfo(float).tiny


# ------------------------------------------------------------------ a multiplier that stays 0
# Test (a) weighs a multiplier's correction by rtol |lam_k| + 10 eps max|lam|: where every
# multiplier is exactly 0 (a constraint that carries no force) a weight is 0 and the
# correction 0 too, a quotient 0 / 0 that counts as 0. Long systems take the quotients in
# vector lanes and must set those apart (vector_ops.h); short ones take them one by one.
@pytest.mark.parametrize("n_free", [2, 16])
def test_a_constraint_that_carries_no_force_leaves_the_free_motion_alone(tmp_path, n_free):
    xs = list(dynamicsymbols(f"x0:{n_free}"))
    w = dynamicsymbols("w")
    k = sp.symbols("k")
    stiff = {c: (i + 1.0) ** 2 for i, c in enumerate(xs)}
    forces = [-k * stiff[c] * c for c in xs]
    start = {c: 0.1 * (i + 1) for i, c in enumerate(xs)}
    # the reference: the same oscillators without the held coordinate
    free = symdae.Model(f"newton_free_{n_free}", xs, mass_matrix=sp.eye(n_free), forces=forces,
                        parameters={k: 4.0}, initial_state=start, outputs={"x0": xs[0]})
    held = symdae.Model(f"newton_held_{n_free}", xs + [w], mass_matrix=sp.eye(n_free + 1),
                        forces=forces + [0], constraints=[w], parameters={k: 4.0},
                        initial_state=start | {w: 0.0}, outputs={"x0": xs[0]})
    # a loose rtol: test (a) accepts most steps at their first iterate, which a 0 / 0 taken
    # for NaN would refuse (one iteration more per step)
    sc = symdae.Scenario(t_end=2.0, h=1e-3, alpha=-0.1, rtol=1e-2)
    a = symdae.compile_model(free, cache_dir=tmp_path).simulate(sc)
    b = symdae.compile_model(held, cache_dir=tmp_path).simulate(sc)
    assert np.all(b.lam == 0.0) and np.all(b.q[:, n_free] == 0.0)
    assert b.counters["newton_iterations"] == a.counters["newton_iterations"] < 1.5 * sc.n_steps
    np.testing.assert_allclose(b.q[:, :n_free], a.q, rtol=0, atol=1e-13)
