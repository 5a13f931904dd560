"""Input maps, criteria and the design driver's plumbing: bounded maps (the paper's eqs. 17,
18), their derivatives and inverses, knot bases, the criteria's derivatives against finite
differences of Phi, the chain rule from the optimiser's variables to the input samples, the
'gradient' optimiser, CSV/JSON output, and every bad input named."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import symdae
from symdae import InputError, NotIdentifiableError, UnknownNameError
from symdae.design.criteria import CRITERIA, EigenvalueGapWarning, criterion
from symdae.design.driver import DesignVariables, design_input
from symdae.design.input_maps import bound_map, input_basis, knot_basis
from symdae.design.problem import DesignProblem


@pytest.fixture(scope="module")
def two_mass(bundled):
    return bundled("two_mass_oscillator")


def short(ns, t_end=0.2):
    return ns["SCENARIO"].replace(t_end=t_end)


@pytest.mark.parametrize("kind", ["arctan", "logistic"])
def test_bound_maps_are_the_papers(kind):
    bm = bound_map(kind, -2.0, 3.0)
    z = np.linspace(-50, 50, 2001)
    u = bm.value(z)
    assert np.all((u >= -2.0) & (u <= 3.0))                     # the bounds hold ...
    mid = np.abs(z) <= 10
    assert np.all((u[mid] > -2.0) & (u[mid] < 3.0))             # ... strictly, short of them
    assert bm.value(np.array([0.0]))[0] == pytest.approx(0.5, abs=1e-15)    # psi(0) = mid
    assert bm.derivative(np.array([0.0]))[0] == pytest.approx(1.0, abs=1e-15)  # psi'(0) = 1
    # eq. 18 / eq. 17 literally
    if kind == "arctan":
        s = 5.0 / math.pi
        assert np.allclose(u, 0.5 + s * np.arctan(z / s), rtol=0, atol=1e-15)
    else:
        s = 4.0 / 5.0
        with np.errstate(over="ignore"):
            assert np.allclose(u, 3.0 - 5.0 / (1.0 + np.exp(s * z)), rtol=0, atol=1e-14)
    h = 1e-6
    fd = (bm.value(z + h) - bm.value(z - h)) / (2 * h)
    assert np.max(np.abs(fd - bm.derivative(z))) < 1e-8
    inside = np.linspace(-1.99, 2.99, 101)
    assert np.allclose(bm.value(bm.inverse(inside)), inside, rtol=0, atol=1e-12)
    # the spec's example: F0 = 0.5 Fmax maps to z = 2 Fmax / pi under eq. 18
    if kind == "arctan":
        assert bound_map(kind, -1, 1).inverse(np.array([0.5]))[0] == pytest.approx(2 / np.pi)


def test_knot_basis_interpolates_and_sums_to_one():
    t = np.linspace(0.001, 1.0, 1000)
    B = knot_basis(t, [0.0, 0.25, 0.5, 1.0])
    assert np.allclose(B.sum(axis=1), 1.0) and np.all(B >= 0)
    c = np.array([1.0, -1.0, 2.0, 0.0])
    assert np.allclose(B @ c, np.interp(t, [0, 0.25, 0.5, 1.0], c))
    with pytest.raises(InputError, match="strictly increasing"):
        knot_basis(t, [0.0, 0.5, 0.5, 1.0])
    with pytest.raises(InputError, match="must cover"):
        knot_basis(t, [0.1, 1.0])
    with pytest.raises(InputError, match=r"\(1000, K\) matrix"):
        input_basis({"basis": np.ones((10, 2))}, t)


@pytest.mark.parametrize("name", CRITERIA)
def test_criterion_derivative_against_differences(name):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((3, 3))
    F = A @ A.T + 0.5 * np.eye(3)
    c = criterion(name, F)
    for _ in range(3):
        E = rng.standard_normal((3, 3))
        E = E + E.T
        h = 1e-6
        fd = (criterion(name, F + h * E).value - criterion(name, F - h * E).value) / (2 * h)
        assert np.sum(c.G * E) == pytest.approx(fd, rel=1e-7, abs=1e-9)
    assert np.allclose(c.G, c.G.T)
    if name == "trace":
        assert c.value == pytest.approx(-np.trace(F))
    if name == "A":
        assert c.value == pytest.approx(np.trace(np.linalg.inv(F)))


def test_criteria_need_a_definite_fisher_matrix_and_warn_on_repeated_eigenvalues():
    F = np.diag([2.0, 0.0])
    assert criterion("trace", F).value == -2.0
    for name in ("A", "D", "E", "cond"):
        with pytest.raises(NotIdentifiableError, match=f"criterion '{name}' needs a positive"):
            criterion(name, F)
    with pytest.warns(EigenvalueGapWarning, match="repeated"):
        criterion("E", np.eye(2))
    with pytest.raises(InputError, match="unknown criterion 'T'"):
        criterion("T", np.eye(2))


@pytest.mark.parametrize("kind,param", [("arctan", "grid"), ("logistic", "grid"),
                                        ("box", "grid"), ("arctan", {"knots": [0, 0.1, 0.2]}),
                                        ("logistic", "basis")])
def test_chain_rule_from_the_variables(two_mass, kind, param):
    system, ns = two_mass
    sc = short(ns)
    prob = DesignProblem(system, sc, ["c2", "d2"], "x2", params=ns["START"],
                         start_input={"F": lambda t: 0.5 + 0.2 * np.sin(20 * t)},
                         criterion="D", end={"v1": 0.0})
    if param == "basis":
        t1 = prob.t[1:]
        param = {"basis": np.column_stack([np.ones_like(t1), np.sin(30 * t1), t1])}
    var = DesignVariables(prob, {"F": (-1.0, 1.0)}, kind, param)
    z = var.start() + 0.1 * np.random.default_rng(1).standard_normal(var.size)
    ev = prob.evaluate(var.to_U(z))
    g = var.pullback(z, ev.gradient)
    d = np.random.default_rng(2).standard_normal(var.size)
    h = 1e-4
    fd = (prob.evaluate(var.to_U(z + h * d), gradient=False).value
          - prob.evaluate(var.to_U(z - h * d), gradient=False).value) / (2 * h)
    assert g @ d == pytest.approx(fd, rel=1e-6)
    U = var.to_U(z)
    assert U[0, 0] == prob.U_start[0, 0]
    if kind == "box":      # psi(z) = z on the grid; the bounds go to L-BFGS-B instead
        assert np.array_equal(U[1:, 0], z)
        assert var.box_bounds() == [(-1.0, 1.0)] * var.size
    else:
        assert np.all(np.abs(U) <= 1.0) and var.box_bounds() is None


def test_design_with_the_papers_steepest_descent_lowers_psi(two_mass, tmp_path):
    system, ns = two_mass
    lines = []
    d = design_input(system, short(ns, 0.5), "c2", "x2", inputs={"F": (-1.0, 1.0)},
                     params=ns["START"], start_input={"F": 0.5}, end={"v1": 0.0, "v2": 0.0},
                     optimizer="gradient", max_iterations=15, progress=lines.append,
                     compare={"sine": {"F": ns["REFERENCE_INPUTS"]["sine"]}})
    values = [e["value"] for e in d.history]
    assert len(lines) == len(d.history) == d.n_iterations + 1
    assert all(b < a for a, b in zip(values, values[1:]))      # Armijo: every step descends
    assert d.optimal.value < d.start.value and d.optimal.value == values[-1]
    path = d.to_csv(tmp_path / "input.csv")
    table = np.loadtxt(path, delimiter=",", skiprows=1)
    assert np.array_equal(table[:, 1], d.input("F")) and np.array_equal(table[:, 0], d.t)
    report = json.loads(json.dumps(d.to_dict()))
    assert report["criterion"] == "trace" and "sine" in report["comparisons"]
    assert report["optimal"]["terminal"]["v1"]["target"] == 0.0


def test_bad_input_is_named(two_mass):
    system, ns = two_mass
    sc = short(ns)
    base = dict(params=ns["START"], start_input={"F": 0.5})
    with pytest.raises(InputError, match="input 'F': the lower bound 1 must be below"):
        design_input(system, sc, "c2", "x2", inputs={"F": (1.0, -1.0)}, **base)
    with pytest.raises(InputError, match="input 'F': the lower bound 1 must be below"):
        design_input(system, sc, "c2", "x2", inputs={"F": (1.0, 1.0)}, **base)
    with pytest.raises(InputError, match=r"initial input 'F' is 0.5 at t0 \(sample 0\), outside"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-0.2, 0.2)}, **base)
    with pytest.raises(InputError, match="initial input 'F' is 1.5 at sample 101, outside"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1.0, 1.0)}, params=ns["START"],
                     start_input={"F": lambda t: np.where(t < 0.1005, 0.5, 1.5)})
    with pytest.raises(InputError, match="initial input 'F' is 1 at sample 1.*strictly inside"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1.0, 1.0)}, params=ns["START"],
                     start_input={"F": 1.0})
    with pytest.raises(UnknownNameError, match="end condition on 'v3': not an output"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, end={"v3": 0.0}, **base)
    with pytest.raises(UnknownNameError, match="end condition on 'v:x3'"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, end={"v:x3": 0.0}, **base)
    for sigma in (0.0, -1e-3, float("nan")):
        with pytest.raises(InputError, match="must be a positive finite number"):
            design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)},
                         noise={"x2": sigma}, **base)
    with pytest.raises(UnknownNameError, match="no parameter 'c3'"):
        design_input(system, sc, "c3", "x2", inputs={"F": (-1, 1)}, **base)
    with pytest.raises(UnknownNameError, match="no output 'x3'"):
        design_input(system, sc, "c2", "x3", inputs={"F": (-1, 1)}, **base)
    with pytest.raises(UnknownNameError, match="no input 'G'"):
        design_input(system, sc, "c2", "x2", inputs={"G": (-1, 1)}, **base)
    with pytest.raises(InputError, match="unknown criterion 'T'"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, criterion="T", **base)
    with pytest.raises(InputError, match="unknown bound map 'tanh'"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, bound_map="tanh", **base)
    with pytest.raises(InputError, match="optimizer must be one of"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, optimizer="BFGS", **base)
    with pytest.raises(InputError, match="start input carries no information"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, params=ns["START"],
                     start_input={"F": 0.0})
    with pytest.raises(NotIdentifiableError, match="criterion 'D' needs a positive"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, criterion="D",
                     params=ns["START"], start_input={"F": 0.0})
    with pytest.raises(InputError, match="zero along the whole start trajectory"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, end={"a2": 0.0},
                     params=ns["START"], start_input={"F": lambda t: 0.5 * (t > 0.5)})
    with pytest.raises(InputError, match="end_scale of 'v1' must be positive"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, end={"v1": 0.0},
                     end_scale={"v1": 0.0}, **base)
    with pytest.raises(InputError, match="box bounds on the coefficients of a general basis"):
        design_input(system, sc, "c2", "x2", inputs={"F": (-1, 1)}, bound_map="box",
                     parameterisation={"basis": np.ones((sc.n_steps, 2))}, **base)


def test_one_of_two_inputs_designed_on_knots():
    """A model with two inputs (hoisted u sin(t) and cos(v t) terms): only v is designed, as a
    piecewise-linear input on knots; u keeps its scenario values, the chain rule through the
    knots is exact, and the D-optimal design raises det F~ while meeting a state end
    condition."""
    from test_design_kernels import hoisted_u_model
    system = symdae.compile_model(hoisted_u_model())
    sc = symdae.Scenario(t_end=0.3, h=2e-3, inputs={"u": 0.3, "v": lambda t: np.cos(5 * t)})
    knots = {"v": {"knots": np.linspace(0.0, 0.3, 7)}}
    prob = DesignProblem(system, sc, ["k", "c"], ["s", "r"], designed=["v"], criterion="D",
                         end={"v:x": 0.0})
    var = DesignVariables(prob, {"v": (-2.0, 2.0)}, "arctan", knots)
    z = var.start() + 0.05
    assert var.size == 7
    ev = prob.evaluate(var.to_U(z))
    d = np.random.default_rng(0).standard_normal(z.size)
    fd = (prob.evaluate(var.to_U(z + 1e-5 * d), gradient=False).value
          - prob.evaluate(var.to_U(z - 1e-5 * d), gradient=False).value) / 2e-5
    assert var.pullback(z, ev.gradient) @ d == pytest.approx(fd, rel=1e-8)
    r = design_input(system, sc, ["k", "c"], ["s", "r"], inputs={"v": (-2.0, 2.0)},
                     parameterisation=knots, criterion="D", end={"v:x": 0.0},
                     max_iterations=20, progress=False)
    assert np.all(r.input("u") == 0.3) and np.all(np.abs(r.input("v")) <= 2.0)
    det = [np.linalg.det(s.fisher.scaled) for s in (r.start, r.optimal)]
    assert det[1] > 2 * det[0] and r.optimal.value < r.start.value
    assert abs(r.optimal.terminal["v:x"]["relative_residual"]) < 0.05
