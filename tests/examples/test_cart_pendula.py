"""The cart with three pendula (frequency-domain paper, section 5.1; spec section 3.2) and the
reproduction of its identification.

The reference model is derived independently here with sympy.physics.mechanics'
LagrangesMethod (bodies, frames and torques, not symdae's Lagrangian route) and integrated with
scipy's DOP853 at rtol 1e-11; its linearisation gives the eigenfrequencies that the spec's
prototype reports (0.1693, 1.3709, 3.9143 Hz at the true values, bending mode 1.2748 Hz at the
start values).

Reproduction (the whole paper case runs in a few seconds): data from c_f = 10, d_f = 0.02,
d_c = 0.01; identification model with d_c = 0.1; start c_f = 8.5, d_f = 0.15; eq. (5) on the
band [1.25, 1.45] Hz of phi1; BFGS with the exact adjoint gradient. Paper: c_f = 9.98,
d_f = 0.019 within 10 iterations. Spec bands: c_f within 1 %, d_f within 15 %, <= 20 iterations.
``pytest tests/examples/test_cart_pendula.py -s`` prints the numbers, with the time-domain contrast.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp
from scipy import linalg
from scipy.integrate import solve_ivp
from sympy.physics.mechanics import (
    LagrangesMethod,
    Lagrangian,
    Particle,
    Point,
    ReferenceFrame,
    RigidBody,
    dynamicsymbols,
    inertia,
)

import symdae
from symdae import Experiment, FourierCost, LeastSquares, Measurement, Window, identify

TRUE = {"c_f": 10.0, "d_f": 0.02}


@functools.cache
def cart():
    model, ns = symdae.load_model("cart_pendula")
    return symdae.compile_model(model), ns


@functools.cache
def reference_equations():
    """M(q) u' = f(t, q, u) of the cart and three rods by LagrangesMethod, and its parameters."""
    x, p1, p2, p3 = qs = dynamicsymbols("x p1 p2 p3")
    syms = sp.symbols("m_c m l g c_f d_f d_c F0 t_c tau")
    mc, m, l, g, cf, df, dc, F0, tc, tau = syms
    N = ReferenceFrame("N")
    O = Point("O")
    O.set_vel(N, 0)
    C = O.locatenew("C", x * N.x)
    C.set_vel(N, x.diff() * N.x)
    bodies, frames, hinge = [Particle("cart", C, mc)], [], C
    for k, phi in enumerate(qs[1:]):
        A = N.orientnew(f"A{k}", "Axis", [phi, N.z])
        A.set_ang_vel(N, phi.diff() * N.z)
        G = hinge.locatenew(f"G{k}", -l / 2 * A.y)
        G.v2pt_theory(hinge, N, A)
        rod = RigidBody(f"rod{k}", G, A, m, (inertia(A, 0, 0, m * l**2 / 12), G))
        rod.potential_energy = m * g * G.pos_from(O).dot(N.y)
        bodies.append(rod)
        frames.append(A)
        tip = hinge.locatenew(f"T{k}", -l * A.y)
        tip.v2pt_theory(hinge, N, A)
        hinge = tip
    L = Lagrangian(N, *bodies) - cf / 2 * ((p2 - p1)**2 + (p3 - p2)**2)
    s = (dynamicsymbols._t - tc) / tau
    d12, d23 = df * (p2.diff() - p1.diff()), df * (p3.diff() - p2.diff())
    forces = [(C, (F0 * s * sp.exp(-s**2) - dc * x.diff()) * N.x), (frames[0], d12 * N.z),
              (frames[1], (d23 - d12) * N.z), (frames[2], -d23 * N.z)]
    lm = LagrangesMethod(L, qs, forcelist=forces, frame=N)
    lm.form_lagranges_equations()
    q, u = sp.symbols("q0:4"), sp.symbols("u0:4")
    sub = {**{a.diff(): b for a, b in zip(qs, u)}, **dict(zip(qs, q))}
    Mq, f = lm.mass_matrix.subs(sub), lm.forcing.subs(sub)
    return syms, q, u, Mq, f


def reference_parameters(**changes):
    system, _ = cart()
    values = dict(zip(system.model.parameter_names, system.model.nominal_values))
    values.update(changes)
    syms = reference_equations()[0]
    return {s: values[str(s)] for s in syms}


def linear_modes(**changes):
    """Frequencies [Hz] and damping ratios of the linearisation about rest (no excitation)."""
    syms, q, u, Mq, f = reference_equations()
    at_rest = {**{a: 0 for a in q + u}, dynamicsymbols._t: 0,
               **reference_parameters(F0=0.0, **changes)}
    M = np.array(Mq.subs(at_rest), dtype=float)
    K = -np.array(f.jacobian(q).subs(at_rest), dtype=float)
    D = -np.array(f.jacobian(u).subs(at_rest), dtype=float)
    n = M.shape[0]
    A = np.block([[np.zeros((n, n)), np.eye(n)],
                  [-linalg.solve(M, K), -linalg.solve(M, D)]])
    lam = linalg.eigvals(A)
    lam = lam[lam.imag > 1e-9]
    order = np.argsort(lam.imag)
    lam = lam[order]
    return np.abs(lam) / (2 * np.pi), -lam.real / np.abs(lam)


# ---------------------------------------------------------------------------- the model
def test_linear_modes_match_the_spec():
    f, zeta = linear_modes()
    np.testing.assert_allclose(f, [0.1693, 1.3709, 3.9143], rtol=1e-2)
    np.testing.assert_allclose(zeta, [0.00073, 0.00778, 0.02372], rtol=3e-2)
    f_start, _ = linear_modes(c_f=8.5, d_f=0.15)
    assert f_start[1] == pytest.approx(1.2748, rel=1e-2)
    # d_c = 0.1 damps the rigid mode tenfold, the bending mode by only about 2 %
    _, zeta_model = linear_modes(d_c=0.1)
    assert zeta_model[0] / zeta[0] > 8 and abs(zeta_model[1] / zeta[1] - 1) < 0.05


def test_simulation_matches_an_independent_minimal_coordinate_solution():
    """phi1 from LagrangesMethod + DOP853 against symdae's HHT at two steps: the error falls
    fourfold (second order) and is small."""
    system, _ = cart()
    syms, q, u, Mq, f = reference_equations()
    par = reference_parameters()
    M_of = sp.lambdify([q], Mq.subs(par), "numpy")
    f_of = sp.lambdify([dynamicsymbols._t, q, u], f.subs(par), "numpy")

    def rhs(t, y):
        acc = np.linalg.solve(np.array(M_of(y[:4]), float),
                              np.array(f_of(t, y[:4], y[4:]), float).ravel())
        return np.concatenate([y[4:], acc])

    sol = solve_ivp(rhs, (0.0, 10.0), np.zeros(8), method="DOP853", rtol=1e-11, atol=1e-13,
                    dense_output=True)
    errors = []
    for h in (0.005, 0.0025):
        tr = system.simulate(t_end=10.0, h=h, alpha=-0.05)
        errors.append(np.max(np.abs(tr.outputs["phi1"] - sol.sol(tr.t)[1])))
    scale = np.max(np.abs(sol.sol(np.linspace(0, 10, 2001))[1]))
    assert errors[0] < 1e-2 * scale
    assert 3.5 < errors[0] / errors[1] < 4.5, errors


def test_bending_peak_of_the_measured_spectrum_lies_in_the_band():
    system, ns = cart()
    sc = ns["SCENARIO"]
    phi1 = system.simulate(sc).outputs["phi1"]
    N = sc.n_steps
    amp = 2 * np.abs(np.fft.rfft(phi1[:N])) / N
    freq = np.fft.rfftfreq(N, sc.h)
    search = (freq > 0.8) & (freq < 2.5)
    peak = freq[search][np.argmax(amp[search])]
    assert ns["BAND"][0] <= peak <= ns["BAND"][1]
    # and the rigid mode carries the largest amplitude of the record (it is what d_c changes)
    assert 0.15 <= freq[np.argmax(amp[1:]) + 1] <= 0.2


# ---------------------------------------------------------------------------- reproduction
def experiment(domain: str, d_c: float):
    system, ns = cart()
    sc = ns["SCENARIO"]
    data = Measurement.from_trajectory(system.simulate(sc), ns["OUTPUTS"])
    if domain == "frequency":
        cost = FourierCost("phi1", Window.over_band(0.0, sc.t_end, *ns["BAND"]), data,
                           amplitude_scale="data")
    else:
        cost = LeastSquares(data, ns["OUTPUTS"])
    return Experiment(system, cost, sc, params={"d_c": d_c}, name=f"{domain}-dc{d_c:g}")


@functools.cache
def run(domain: str, d_c: float):
    _, ns = cart()
    return identify(experiment(domain, d_c), ns["FREE"], ns["START"], method="BFGS",
                    progress=False)


def test_band_has_the_specs_nine_lines():
    cost = experiment("frequency", 0.1).cost
    np.testing.assert_allclose(cost.measured.frequency, 1.25 + 0.025 * np.arange(9),
                               rtol=1e-14)


def test_paper_case_with_cart_friction_mismatch():
    res = run("frequency", 0.1)
    err = res.relative_error(TRUE)
    n_conv = res.settled_at()
    print(f"\nfrequency domain, model d_c = 0.1: c_f = {res.values['c_f']:.6f} "
          f"({err['c_f']:.2e}), d_f = {res.values['d_f']:.6f} ({err['d_f']:.2e}); "
          f"converged at iteration {n_conv} of {res.n_iterations}, "
          f"{res.n_simulations} evaluations, J {res.start_cost:.3e} -> {res.cost:.3e}")
    assert err["c_f"] <= 0.01 and err["d_f"] <= 0.15
    assert n_conv <= 20
    assert res.cost < 1e-4 * res.start_cost


def test_no_mismatch_recovers_the_truth():
    res = run("frequency", 0.01)
    err = res.relative_error(TRUE)
    print(f"\nfrequency domain, no mismatch: errors {err}, J {res.start_cost:.3e} -> "
          f"{res.cost:.3e}")
    assert max(err.values()) <= 1e-6
    assert res.cost <= 1e-10 * res.start_cost


def test_time_domain_contrast():
    """The time-domain least-squares fit on phi1(t) from the same start with the same mismatch.
    The paper argues it 'would lead to incorrect parameters'; with this model it does not do
    visibly worse (as the spec's prototype found): the numbers are reported, and its control
    without the mismatch recovers the truth."""
    td, fd = run("time", 0.1), run("frequency", 0.1)
    e_td, e_fd = td.relative_error(TRUE), fd.relative_error(TRUE)
    print(f"\ntime domain, model d_c = 0.1: c_f = {td.values['c_f']:.6f} ({e_td['c_f']:.2e}), "
          f"d_f = {td.values['d_f']:.6f} ({e_td['d_f']:.2e}), {td.n_iterations} iterations; "
          f"max error time/frequency domain = {max(e_td.values()) / max(e_fd.values()):.2f}")
    assert td.cost < td.start_cost and np.isfinite(list(e_td.values())).all()
    control = run("time", 0.01)
    assert max(control.relative_error(TRUE).values()) <= 1e-6
