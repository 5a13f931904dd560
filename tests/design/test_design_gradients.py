"""Exactness of the input-design gradients (input-design spec 8.2).

dPsi/dU of the compiled reverse-over-tangent sweep against
* a complex step through an independent complex HHT forward + tangent sweep (tests/complex_step.py):
  the exact directional derivative of the discrete Psi, to <= 1e-9 relative;
* the NumPy oracle sweep (dense blocks, symdae/simulation/backends/numpy_design.py), to round-off;
* central finite differences, to their truncation error (<= 1e-6; falling fourfold per halving
  where Psi is not quadratic in U);
for every criterion with and without end penalty, alpha = 0 and -0.3, on the two-mass
oscillator, the cart pendulum in minimal and redundant coordinates and a model with Q nonlinear
in u and p (Q = p u sin q, a fully hoisted u sin(t) term, an output in u). Plus the first-order
input gradient of a least-squares cost, and the Euler homogeneity identity on the linear
two-mass model (spec 8.2.3).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
import symdae.design.gradients as gradients
from complex_step import ComplexSweeps, criterion_value
from symdae import LeastSquares
from symdae.analysis.quadrature import quadrature_weights
from symdae.design.criteria import CRITERIA
from symdae.design.gradients import input_gradient
from symdae.design.problem import DesignProblem
from symdae.simulation.sensitivity import tangent

EPS_CS = 1e-20


def nonlinear_u_model():
    t = dynamicsymbols._t
    x, th = dynamicsymbols("x th")
    m, J, k, c, d, kt, b, e, w = sp.symbols("m J k c d kt b e w")
    u = sp.Symbol("u")
    return symdae.Model(
        "design_nonlinear_u", coordinates=[x, th],
        mass_matrix=sp.Matrix([[m, 0.1 * m * sp.cos(th)], [0.1 * m * sp.cos(th), J]]),
        forces=[k * u * sp.sin(th) - c * x - d * x.diff(t) + w * u * sp.sin(3 * t),
                -kt * th - d * th.diff(t) + b * u * x + 0.5 * u**2 * sp.cos(th)],
        parameters={m: 1.0, J: 0.2, k: 2.0, c: 30.0, d: 0.4, kt: 20.0, b: 1.5, e: 0.3, w: 0.7},
        inputs=[u],
        outputs={"y": x + e * u * sp.sin(th), "z": th**2 + x * th, "vx": x.diff(t)},
        initial_state={th: 0.2})


# (model, free, outputs, end conditions, input name, start input, direction seed)
CASES = {
    "two_mass_oscillator": (["c2", "d1"], ["x2"], {"v1": 0.0, "v2": 0.0}, "F"),
    "cart_pendulum": (["sp", "dp"], ["phi"], {"phi": 0.0, "vc": 0.0, "phidot": 0.0}, "F"),
    "cart_pendulum_redundant": (["sp", "dp"], ["phi"], {"phi": 0.0, "vc": 0.0, "q:xp": 0.1},
                                "F"),
    "design_nonlinear_u": (["k", "b"], ["y", "z"], {"vx": 0.0, "v:th": 0.0}, "u"),
}


@pytest.fixture(scope="module")
def systems():
    out = {}
    for name in CASES:
        if name == "design_nonlinear_u":
            model = nonlinear_u_model()
        else:
            model = symdae.load_model(name)[0]
        out[name] = (model, symdae.compile_model(model), ComplexSweeps(model))
    return out


def scenario(alpha, n_steps=160, h=2e-3, scheme="hht-paper"):
    return symdae.Scenario(t_end=n_steps * h, h=h, alpha=alpha, rtol=1e-14, scheme=scheme)


def start_input(t, seed):
    rng = np.random.default_rng(seed)
    f = 0.6 + 0.3 * np.sin(2 * np.pi * t / t[-1] * 1.5) + 0.05 * rng.standard_normal(t.size)
    f[0] = 0.5
    return f


def problem(system, name, alpha, crit, with_end, scheme="hht-paper", **kw):
    free, outputs, end, inp = CASES[name]
    sc = scenario(alpha, scheme=scheme)
    return DesignProblem(system, sc, free, outputs, start_input={inp: start_input(sc.times, 3)},
                         criterion=crit, end=end if with_end else None,
                         noise=None if len(outputs) == 1 else {outputs[0]: 1.0,
                                                                outputs[1]: 0.5},
                         end_weight=10.0, **kw)


def complex_run(prob: DesignProblem, cs: ComplexSweeps, U, dU):
    """The complex sweeps at U + i eps dU: (outputs, states, sensitivities)."""
    traj = prob.simulate(U, store_factorizations=True)
    tg = tangent(prob.system, traj, prob.free)
    x0 = traj.sweep.x0
    dx0 = (tg.dq[0], tg.dv[0], tg.da[0], tg.dlam[0])
    return cs.run(prob.t, prob.scenario.alpha, prob.p, U + 1j * EPS_CS * dU,
                  (x0.q, x0.v, x0.a, x0.lam), dx0, tg.D, prob.scenario.scheme)


def complex_psi(prob: DesignProblem, run):
    """(Psi(U), dPsi/dU . dU) by the complex step, from a complex_run."""
    s, X, S = run
    Sm = S[:, prob._out_cols, :]
    F = np.einsum("ika,kl,ilb->ab", Sm * prob.eta[:, None, None], prob.Rinv, Sm)
    psi = prob.kappa * criterion_value(prob.criterion, F * np.outer(prob.scales, prob.scales))
    for c in prob.end:
        y = s[-1, c.index] if c.kind == "output" else X[-1, c.index]
        psi = psi + 0.5 * prob.end_weight * ((y - c.target) / c.scale) ** 2
    return psi.real, psi.imag / EPS_CS


def direction(N, seed):
    d = np.random.default_rng(seed).standard_normal((N + 1, 1))
    d[0] = 0.0
    return d


@pytest.mark.parametrize("alpha, scheme", [(0.0, "hht-paper"), (-0.3, "hht-paper"),
                                           (-0.3, "hht-ga")])
@pytest.mark.parametrize("name", list(CASES))
def test_design_gradient_against_complex_step_and_differences(systems, name, alpha, scheme):
    _, system, cs = systems[name]
    report = []
    run = None
    for crit in CRITERIA:
        for with_end in (False, True):
            prob = problem(system, name, alpha, crit, with_end, scheme)
            U = prob.U_start
            ev = prob.evaluate(U)
            assert np.all(ev.gradient[0] == 0.0)              # U_0 is not a design variable
            dU = direction(prob.N, 11)
            run = run or complex_run(prob, cs, U, dU)      # the same U, dU for every variant
            psi_cs, d_cs = complex_psi(prob, run)
            # the complex sweeps reproduce the forward + tangent sweeps
            assert psi_cs == pytest.approx(ev.value, rel=1e-10, abs=1e-12)
            d_adj = float(np.sum(ev.gradient * dU))
            scale = np.linalg.norm(ev.gradient) * np.linalg.norm(dU)
            err_cs = abs(d_adj - d_cs) / scale
            # central differences: small step within 1e-6, and a pair of larger steps
            # where the truncation error stands above the Newton/round-off noise
            errs = []
            for eps in (1e-3, 2e-2, 1e-2):
                fd = (prob.evaluate(U + eps * dU, gradient=False).value
                      - prob.evaluate(U - eps * dU, gradient=False).value) / (2 * eps)
                errs.append(abs(fd - d_cs) / scale)
            report.append((crit, with_end, err_cs, *errs))
            assert err_cs <= 1e-9, report[-1]
            assert errs[0] <= 1e-6, report[-1]
            if errs[1] > 1e-8:          # not quadratic in U: O(eps^2) truncation
                assert 3.0 < errs[1] / errs[2] < 5.0, report[-1]
    print("\n".join(f"{name} alpha={alpha} {c:5s} end={e!s:5s} cs {a:.1e} fd {b:.1e} "
                    f"{d:.1e} {f:.1e}" for c, e, a, b, d, f in report))


@pytest.mark.parametrize("scheme", ["hht-paper", "hht-ga"])
@pytest.mark.parametrize("name", list(CASES))
def test_compiled_sweep_equals_the_numpy_oracle(systems, name, scheme):
    model, system, _ = systems[name]
    numpy_system = symdae.compile_model(model, backend="numpy")
    prob = problem(system, name, -0.1, "D", True, scheme)
    U = prob.U_start.copy()
    U[1:] += 0.2 * direction(prob.N, 5)[1:]
    a = prob.evaluate(U).gradient
    prob_np = problem(numpy_system, name, -0.1, "D", True, scheme)
    b = prob_np.evaluate(U).gradient
    assert np.max(np.abs(a - b)) <= 1e-11 * np.max(np.abs(b))


def test_first_order_input_gradient_of_a_least_squares_cost(systems):
    """Spec 8.2.1: dJ/dU of an output cost against the complex step and FD (3 directions)."""
    for name in ("cart_pendulum_redundant", "design_nonlinear_u"):
        model, system, cs = systems[name]
        _, outputs, _, inp = CASES[name]
        sc = scenario(-0.1)
        U0 = start_input(sc.times, 1)
        data = {o: 0.5 * system.simulate(sc.replace(inputs={inp: U0})).outputs[o]
                for o in outputs}
        cost = LeastSquares(data, outputs, quadrature="trapezoid")
        U = U0 + 0.1 * np.sin(7 * sc.times)
        U[0] = U0[0]

        def J(Uv, grad=False, system=system, sc=sc, inp=inp, cost=cost):
            traj = system.simulate(sc.replace(inputs={inp: Uv}), store_factorizations=grad)
            j, dS = cost.evaluate(system, traj)
            return (j, input_gradient(system, traj, dS)[:, 0], traj) if grad else j

        j, g, traj = J(U, True)
        assert g[0] == 0.0
        # without stored factorisations the sweep refactorises: the same numbers
        plain = system.simulate(sc.replace(inputs={inp: U}))
        g2 = input_gradient(system, plain, cost.evaluate(system, plain)[1])[:, 0]
        assert np.max(np.abs(g2 - g)) <= 1e-14 * np.max(np.abs(g))
        x0 = traj.sweep.x0
        nd0 = np.zeros((system.sizes.n, 0))
        for seed in (1, 2, 3):
            d = direction(sc.n_steps, seed)[:, 0]
            s, _, _ = cs.run(sc.times, sc.alpha, system.parameter_vector(),
                             (U + 1j * EPS_CS * d)[:, None], (x0.q, x0.v, x0.a, x0.lam),
                             (nd0, nd0, nd0, np.zeros((system.sizes.m, 0))),
                             np.zeros((system.sizes.n_p, 0)))
            cols = [model.output_names.index(o) for o in outputs]
            eta = quadrature_weights(sc.times, "trapezoid")
            jc = sum(0.5 * np.sum(eta * (s[:, k] - data[o]) ** 2) for k, o in zip(cols, outputs))
            assert jc.real == pytest.approx(j, rel=1e-11)
            scale = np.linalg.norm(g) * np.linalg.norm(d)
            assert abs(g @ d - jc.imag / EPS_CS) <= 1e-10 * scale
            errs = [abs((J(U + e * d) - J(U - e * d)) / (2 * e) - jc.imag / EPS_CS) / scale
                    for e in (1e-3, 0.1, 0.05)]
            assert errs[0] <= 1e-6 and errs[1] > 1e-10, errs
            assert 3.0 < errs[1] / errs[2] < 5.0, errs


def test_euler_homogeneity_on_the_linear_two_mass_model(systems):
    """From rest with U_0 = 0, S is linear in U and Psi_trace (and the velocity end penalty)
    quadratic: sum_k U_k dPsi/dU_k = 2 Psi exactly (arbitrary eta, R, W)."""
    _, system, _ = systems["two_mass_oscillator"]
    sc = symdae.Scenario(t_end=1.0, h=1e-3, alpha=-0.1)
    rng = np.random.default_rng(7)
    U = rng.uniform(-1, 1, sc.n_steps + 1)
    U[0] = 0.0
    for quadrature, scaling in (("sum", "relative"), ("trapezoid", {"c2": 3.0, "d1": 0.5})):
        prob = DesignProblem(system, sc, ["c2", "d1"], ["x2", "x1"], start_input={"F": U},
                             criterion="trace", end={"v1": 0.0, "v2": 0.0},
                             noise={"x2": 1e-3, "x1": 2e-3}, quadrature=quadrature,
                             scaling=scaling, params={"c2": 1000.0})
        ev = prob.evaluate(U)
        lhs = float(np.sum(U[1:] * ev.gradient[1:, 0]))
        assert ev.penalties["end"] > 0.1 * abs(ev.information)
        assert lhs == pytest.approx(2 * ev.value, rel=1e-12)


@pytest.mark.parametrize("name", ["cart_pendulum", "design_nonlinear_u"])
def test_the_design_sweep_reads_the_state_terms_the_forward_sweep_kept(systems, name,
                                                                        monkeypatch):
    """The forward run of a design evaluation keeps its state terms (sin, cos of the angles)
    with its factorisations; the design sweep reads them instead of evaluating them again:
    the same gradient bit for bit as when they are dropped (recomputed), and perturbed after
    the tangent sweep, the gradient moves (they are what the design sweep reads)."""
    _, system, _ = systems[name]
    assert system.sizes.n_st > 0
    prob = problem(system, name, -0.1, "D", True)
    U = prob.U_start
    kept = prob.evaluate(U)
    sweep = gradients.design_adjoint

    def changing(scale):
        def run(backend, fwd, *args, **kw):
            assert fwd.saved is not None and fwd.saved[3] is not None
            if scale is None:
                fwd = dataclasses.replace(fwd, saved=(*fwd.saved[:3], None))
            else:
                fwd.saved[3][:] *= scale
            return sweep(backend, fwd, *args, **kw)
        return run

    monkeypatch.setattr(gradients, "design_adjoint", changing(None))
    dropped = prob.evaluate(U)
    assert dropped.value == kept.value
    np.testing.assert_array_equal(dropped.gradient, kept.gradient)
    monkeypatch.setattr(gradients, "design_adjoint", changing(1.001))
    assert not np.array_equal(prob.evaluate(U).gradient, kept.gradient)
