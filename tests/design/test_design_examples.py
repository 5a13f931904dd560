"""The input-design paper's two examples (spec sections 6, 7 and the bands of 8.3, 8.4): the
design, its gain over the paper's start and comparison inputs, the end conditions, the bounds,
and a Monte Carlo check that the designed input gives the smaller spread (threads, few runs;
benchmarks/bench_design.py runs the full table with 200 runs per input).
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import symdae
from symdae import identify
from symdae.design.problem import DesignProblem
from symdae.design.study import (
    compare_monte_carlo,
    input_experiments,
    model_design,
    rms_error_scan,
    study_inputs,
)


@pytest.fixture(scope="module")
def two_mass():
    model, ns = symdae.load_model("two_mass_oscillator")
    system = symdae.compile_model(model)
    return system, ns, model_design(model, ns, system=system, progress=False)


@pytest.fixture(scope="module")
def cart():
    model, ns = symdae.load_model("cart_pendulum")
    system = symdae.compile_model(model)
    return system, ns, model_design(model, ns, system=system, progress=False)


def test_two_mass_design_meets_the_spec_bands(two_mass):
    system, ns, d = two_mass
    fmax = ns["FMAX"]
    print("\n" + d.summary())
    # the start input is the spec's F0 row (prototype value, discrete-exact)
    assert d.start.fisher.matrix[0, 0] == pytest.approx(3.641178786047726e-10, rel=1e-12)
    assert d.comparisons["sine"].fisher.matrix[0, 0] == pytest.approx(1.8204303414157233e-10,
                                                                      rel=1e-12)
    assert d.start.value == pytest.approx(162.6, abs=0.05)      # spec 3.6: start Psi 162.6
    gain = d.optimal.fisher.matrix[0, 0] / d.start.fisher.matrix[0, 0]
    assert gain >= 50
    F = d.input("F")
    assert np.all(np.abs(F) <= fmax) and F[0] == 0.5 * fmax
    assert d.saturation["F"] >= 0.95
    traj = d.problem.simulate(d.U)
    for v in ("v1", "v2"):
        assert abs(traj.outputs[v][-1]) <= 1e-3 * np.max(np.abs(traj.outputs[v]))
    # the gain survives the 10 % model error: Fisher at the true c2 = 1100
    at_truth = DesignProblem(system, ns["SCENARIO"], "c2", "x2", params={"c2": 1100.0})
    ratio = (at_truth.evaluate(d.U, gradient=False).fisher.matrix[0, 0]
             / at_truth.evaluate(d.start.U, gradient=False).fisher.matrix[0, 0])
    assert ratio >= 50
    assert d.success and d.history[-1]["value"] == pytest.approx(d.optimal.value)


def test_two_mass_monte_carlo(two_mass):
    system, ns, d = two_mass
    inputs = {k: v for k, v in study_inputs(d).items() if k in ("start", "optimal")}
    # sigma = 0: both inputs give the true c2
    for exp in input_experiments(system, ns["SCENARIO"], inputs, ["x2"]).values():
        res = identify(exp, ["c2"], ns["START"], method="least_squares", progress=False,
                       statistics=False)
        assert res.values["c2"] == pytest.approx(1100.0, rel=1e-8)
    sigma, runs = 1e-6, 60
    with ThreadPoolExecutor(2) as pool:
        mc = compare_monte_carlo(system, ns["SCENARIO"], inputs, ["x2"], ["c2"], ns["START"],
                                 sigma, runs, seed=2024, executor=pool)
    print("\n" + "\n".join(r.table() for r in mc.values()))
    assert all(r.n_runs == runs and not r.failures for r in mc.values())
    assert mc["start"].std[0] / mc["optimal"].std[0] >= 5
    for r in mc.values():
        assert r.agrees(0.999) == {"c2": True}, r.table()     # std vs sigma/sqrt(F(truth))
        assert abs(r.mean[0] - 1100.0) < 4 * r.std[0] / math.sqrt(runs)
    # the Cramer-Rao bounds are in the ratio of the Fisher information at the truth
    crlb = mc["start"].predicted[0] / mc["optimal"].predicted[0]
    assert crlb >= 5


def test_cart_pendulum_design_meets_the_spec_bands(cart):
    system, ns, d = cart
    print("\n" + d.summary())
    opt, comp = d.optimal.fisher.scaled, d.comparisons["sine"].fisher.scaled
    assert np.trace(opt) / np.trace(comp) >= 10
    assert np.all(np.diag(opt) >= 5 * np.diag(comp))
    assert d.start.value == pytest.approx(794.4, abs=0.1)      # spec 3.6: start Psi 794.4
    assert np.all(np.abs(d.input("F")) <= ns["FMAX"])
    for name, r in d.optimal.terminal.items():
        assert abs(r["relative_residual"]) <= 1e-2, (name, r)


def test_cart_pendulum_redundant_coordinates_carry_the_same_information(cart):
    """The minimal model's optimum on the redundant model: the same Fisher information and end
    residuals up to the discretisation difference of the two schemes."""
    system, ns, d = cart
    model_r, ns_r = symdae.load_model("cart_pendulum_redundant")
    prob = DesignProblem(symdae.compile_model(model_r), ns_r["SCENARIO"], ns_r["FREE"], ns_r["OUTPUTS"],
                         params=ns_r["START"], start_input=ns_r["DESIGN"]["start_input"],
                         end=ns_r["DESIGN"]["end"])
    ev = prob.evaluate(d.U, gradient=False)
    F, Fm = ev.fisher.matrix, d.optimal.fisher.matrix
    assert np.max(np.abs(F - Fm)) <= 1e-3 * np.max(np.abs(Fm))
    for name, r in ev.terminal.items():
        assert r["value"] == pytest.approx(d.optimal.terminal[name]["value"],
                                           abs=1e-3 * r["scale"])


def test_cart_pendulum_monte_carlo(cart):
    system, ns, d = cart
    inputs = {k: v for k, v in study_inputs(d).items() if k in ("sine", "optimal")}
    runs = 40
    with ThreadPoolExecutor(2) as pool:
        mc = compare_monte_carlo(system, ns["SCENARIO"], inputs, ["phi"], ["sp", "dp"],
                                 ns["START"], {"phi": 0.01}, runs, seed=2024, executor=pool)
    print("\n" + "\n".join(r.table() for r in mc.values()))
    assert np.all(mc["sine"].std / mc["optimal"].std >= 3)
    for r in mc.values():
        assert not r.failures and r.agrees(0.999) == {"sp": True, "dp": True}, r.table()
        truth = np.array([r.truth["sp"], r.truth["dp"]])
        assert np.all(np.abs(r.mean - truth) < 3 * r.std / math.sqrt(runs))


def test_rms_error_curvature_follows_the_fisher_information(two_mass):
    """Noise-free data: E_RMS''(c2 true) = F(c2 true) (Gauss-Newton Hessian = Fisher, R = I),
    so the optimal input's curve is as many times more curved as its information is larger."""
    system, ns, d = two_mass
    inputs = {k: v for k, v in study_inputs(d).items() if k in ("start", "optimal")}
    grid = {"c2": 1100.0 + np.linspace(-1.0, 1.0, 5)}
    scan = rms_error_scan(system, ns["SCENARIO"], inputs, ["x2"], grid, truth={"c2": 1100.0})
    at_truth = DesignProblem(system, ns["SCENARIO"], "c2", "x2", params={"c2": 1100.0})
    for label in inputs:
        U = d.U if label == "optimal" else d.start.U
        F = at_truth.evaluate(U, gradient=False).fisher.matrix[0, 0]
        assert scan.curvature(label) == pytest.approx(F, rel=1e-4)
    assert np.argmin(scan.values["optimal"]) == 2
    # several noise levels in one call: the grid simulated once, each level as its own call
    several = rms_error_scan(system, ns["SCENARIO"], inputs, ["x2"], grid,
                             truth={"c2": 1100.0}, noise=[0.0, 1e-4])
    one = rms_error_scan(system, ns["SCENARIO"], inputs, ["x2"], grid, truth={"c2": 1100.0},
                         noise=1e-4)
    assert [s.noise for s in several] == [0.0, 1e-4]
    for label in inputs:
        assert np.array_equal(several[0].values[label], scan.values[label])
        assert np.array_equal(several[1].values[label], one.values[label])
        assert not np.array_equal(one.values[label], scan.values[label])
