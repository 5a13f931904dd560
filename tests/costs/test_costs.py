"""Costs on output trajectories and the measured data they compare with.

Every expected value is computed here with plain NumPy from the definitions (the discrete-adjoint
paper's eq. 4 with eta_i = h for i < N and eta_N = 0, the trapezoidal rule, np.interp for
measurements on their own sample times), never by calling symdae's own helpers.
"""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

import symdae
from symdae.analysis.quadrature import quadrature_weights
from symdae.costs.base import CostSum
from symdae.costs.time_domain import LeastSquares, OutputIntegral
from symdae.data.measurement import Measurement
from symdae.errors import DataError

T_END, H, ALPHA = 0.5, 1e-3, -0.1
N = int(round(T_END / H))


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def oscillator(bundled):
    return bundled("oscillator")[0]


@pytest.fixture(scope="module")
def traj(oscillator):
    """Oscillator trajectory at c = 37, d = 0.55 (outputs a, q, v), the model to compare."""
    return oscillator.simulate(t_end=T_END, h=H, alpha=ALPHA, params={"c": 37.0, "d": 0.55})


def with_outputs(traj, **outputs):
    """The same trajectory with some outputs replaced by known signals."""
    return dataclasses.replace(traj, outputs={**traj.outputs, **outputs})


def left_weights(t):
    """eta_i = t_{i+1} - t_i for i < N, eta_N = 0 (eq. 4 of the discrete-adjoint paper)."""
    eta = np.zeros(len(t))
    for i in range(len(t) - 1):
        eta[i] = t[i + 1] - t[i]
    return eta


def col(system, name):
    return system.model.output_names.index(name)


# ---------------------------------------------------------------------------- quadrature
def test_left_weights_are_h_then_zero():
    h = 0.25
    t = h * np.arange(5)
    eta = quadrature_weights(t, "left")
    np.testing.assert_array_equal(eta, [h, h, h, h, 0.0])
    # non-uniform samples: each weight is the step to the next sample
    eta = quadrature_weights(np.array([0.0, 0.1, 0.3, 0.6]), "left")
    np.testing.assert_allclose(eta, [0.1, 0.2, 0.3, 0.0], rtol=0, atol=1e-15)


def test_trapezoid_and_sum_weights():
    t = np.array([0.0, 0.1, 0.3, 0.6])
    np.testing.assert_allclose(quadrature_weights(t, "trapezoid"), [0.05, 0.15, 0.25, 0.15],
                               rtol=0, atol=1e-15)
    np.testing.assert_array_equal(quadrature_weights(t, "sum"), [1.0, 1.0, 1.0, 1.0])
    h = 0.5
    np.testing.assert_array_equal(quadrature_weights(h * np.arange(4), "trapezoid"),
                                  [h / 2, h, h, h / 2])


def test_quadratures_integrate_what_they_should():
    t = np.sort(np.random.default_rng(0).uniform(0.0, 2.0, 40))
    span = t[-1] - t[0]
    assert quadrature_weights(t, "left").sum() == pytest.approx(span, rel=1e-14)
    assert quadrature_weights(t, "trapezoid").sum() == pytest.approx(span, rel=1e-14)
    # the trapezoidal rule is exact for linear functions on any samples
    f = 3.0 * t - 1.5
    exact = 1.5 * (t[-1] ** 2 - t[0] ** 2) - 1.5 * span
    assert quadrature_weights(t, "trapezoid") @ f == pytest.approx(exact, rel=1e-13)


def test_explicit_weights_and_bad_rules():
    t = np.linspace(0.0, 1.0, 5)
    eta = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    np.testing.assert_array_equal(quadrature_weights(t, eta), eta)
    with pytest.raises(ValueError, match=r"shape \(3,\).*\(5,\)"):
        quadrature_weights(t, eta[:3])
    with pytest.raises(ValueError, match="simpson"):
        quadrature_weights(t, "simpson")


# ---------------------------------------------------------------------------- least squares
def test_least_squares_full_grid_several_outputs(oscillator, traj):
    """Data on every grid time for a and q, weights 2.5 and 40, left rule (the paper's eq. 4)."""
    t = traj.t
    ref_a = np.cos(7.0 * t) * 30.0
    ref_q = 0.9 * np.cos(6.1 * t)
    cost = LeastSquares({"a": ref_a, "q": ref_q}, weights={"a": 2.5, "q": 40.0})
    J, dS = cost.evaluate(oscillator, traj)

    eta = np.full(N + 1, H)
    eta[-1] = 0.0
    r_a = traj.outputs["a"] - ref_a
    r_q = traj.outputs["q"] - ref_q
    J_ref = 0.5 * (2.5 * np.sum(eta * r_a ** 2) + 40.0 * np.sum(eta * r_q ** 2))
    assert J == pytest.approx(J_ref, rel=1e-12)
    assert dS.shape == (N + 1, oscillator.sizes.n_s)
    # the grid spacing t_{i+1} - t_i equals h only to round-off (~1e-13 relative)
    np.testing.assert_allclose(dS[:, col(oscillator, "a")], 2.5 * eta * r_a, rtol=1e-12, atol=0)
    np.testing.assert_allclose(dS[:, col(oscillator, "q")], 40.0 * eta * r_q, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(dS[:, col(oscillator, "v")], 0.0)
    assert np.all(dS[-1] == 0.0)  # eta_N = 0


def test_least_squares_derivative_is_the_derivative(oscillator, traj):
    """Central differences of J in a few output samples (exact up to round-off: J is
    quadratic in S)."""
    t = traj.t
    cost = LeastSquares({"a": np.sin(5.0 * t), "v": np.cos(3.0 * t)},
                        weights={"v": 3.0}, quadrature="trapezoid")
    J, dS = cost.evaluate(oscillator, traj)
    for name, i in (("a", 0), ("a", 17), ("v", 250), ("v", N)):
        e = 1e-3
        bump = e * (np.arange(N + 1) == i)
        s = traj.outputs[name]
        Jp, _ = cost.evaluate(oscillator, with_outputs(traj, **{name: s + bump}))
        Jm, _ = cost.evaluate(oscillator, with_outputs(traj, **{name: s - bump}))
        assert (Jp - Jm) / (2 * e) == pytest.approx(dS[i, col(oscillator, name)], rel=1e-7,
                                                  abs=1e-12)


def test_least_squares_output_to_signal_mapping(oscillator, traj):
    """outputs={model output: data signal}: the model's q is compared with column 'x_meas'."""
    x = 0.7 * np.cos(6.0 * traj.t)
    data = Measurement.from_arrays(traj.t, x_meas=x)
    J, dS = LeastSquares(data, outputs={"q": "x_meas"}).evaluate(oscillator, traj)
    r = traj.outputs["q"] - x
    eta = left_weights(traj.t)
    assert J == pytest.approx(0.5 * np.sum(eta * r * r), rel=1e-13)
    np.testing.assert_allclose(dS[:, col(oscillator, "q")], eta * r, rtol=1e-13, atol=1e-300)


def test_zero_residual_at_the_data(oscillator, traj):
    data = Measurement.from_trajectory(traj, ["a", "q", "v"])
    J, dS = LeastSquares(data, weights={"q": 5.0}).evaluate(oscillator, traj)
    assert J == 0.0
    assert not np.any(dS)


def test_measurement_on_a_subset_of_the_grid_match(oscillator, traj):
    """Samples at irregular grid times only; the quadrature uses the sample spacing."""
    rng = np.random.default_rng(1)
    idx = np.sort(rng.choice(np.arange(3, N - 2), size=60, replace=False))
    t_data = idx * H  # computed, not copied from the grid: equal to it only up to round-off
    x = 25.0 * np.sin(4.0 * t_data) + 1.0
    y = 0.3 * np.cos(9.0 * t_data)
    data = Measurement.from_arrays(t_data, a=x, q=y)
    cost = LeastSquares(data, weights={"a": 0.5, "q": 8.0}, align="match")
    J, dS = cost.evaluate(oscillator, traj)

    eta = left_weights(t_data)  # t_{k+1} - t_k between samples, 0 at the last
    r_a = traj.outputs["a"][idx] - x
    r_q = traj.outputs["q"][idx] - y
    J_ref = 0.5 * (0.5 * np.sum(eta * r_a ** 2) + 8.0 * np.sum(eta * r_q ** 2))
    assert J == pytest.approx(J_ref, rel=1e-12)
    dS_ref = np.zeros_like(dS)
    dS_ref[idx, col(oscillator, "a")] = 0.5 * eta * r_a
    dS_ref[idx, col(oscillator, "q")] = 8.0 * eta * r_q
    np.testing.assert_allclose(dS, dS_ref, rtol=1e-12, atol=1e-300)
    # auto recognises grid times and does the same
    J_auto, dS_auto = LeastSquares(data, weights={"a": 0.5, "q": 8.0}).evaluate(oscillator, traj)
    assert J_auto == J
    np.testing.assert_array_equal(dS_auto, dS)


def test_measurement_on_non_grid_times_interpolate(oscillator, traj):
    """Samples on their own times (covering the grid); align="interpolate": linear
    interpolation onto every grid time, then the left rule on the grid."""
    t_data = np.linspace(-0.0123, T_END + 0.0071, 157)
    x = 20.0 * np.sin(11.0 * t_data) - 3.0
    y = np.exp(-t_data) * 0.8
    data = Measurement.from_arrays(t_data, a=x, q=y)
    for align in ("interpolate",):
        J, dS = LeastSquares(data, ["a", "q"], {"q": 12.0}, "left", align).evaluate(oscillator,
                                                                                     traj)
        eta = np.full(N + 1, H)
        eta[-1] = 0.0
        r_a = traj.outputs["a"] - np.interp(traj.t, t_data, x)
        r_q = traj.outputs["q"] - np.interp(traj.t, t_data, y)
        assert J == pytest.approx(0.5 * np.sum(eta * (r_a ** 2 + 12.0 * r_q ** 2)), rel=1e-12)
        np.testing.assert_allclose(dS[:, col(oscillator, "a")], eta * r_a, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(dS[:, col(oscillator, "q")], 12.0 * eta * r_q, rtol=1e-12,
                                   atol=1e-300)


def interpolation_matrix(t_samples, t_grid):
    """P with (P s)_j = s linearly interpolated at t_j, column by column with np.interp."""
    eye = np.eye(len(t_grid))
    return np.column_stack([np.interp(t_samples, t_grid, eye[i]) for i in range(len(t_grid))])


@pytest.mark.parametrize("align", ["samples", "auto"])
def test_measurement_on_non_grid_times_samples(oscillator, traj, align):
    """Samples on their own times: the model's outputs are interpolated to the samples inside
    the grid's span (those outside are left out), the left rule on the sample times; dS is
    the transpose of that interpolation applied to w eta r."""
    t_data = np.linspace(-0.0123, T_END + 0.0071, 157)
    x = 20.0 * np.sin(11.0 * t_data) - 3.0
    y = np.exp(-t_data) * 0.8
    data = Measurement.from_arrays(t_data, a=x, q=y)
    J, dS = LeastSquares(data, ["a", "q"], {"q": 12.0}, "left", align).evaluate(oscillator,
                                                                                  traj)
    inside = (t_data >= 0.0) & (t_data <= T_END)
    ts = t_data[inside]
    assert 150 <= ts.size < 157
    P = interpolation_matrix(ts, traj.t)
    eta = left_weights(ts)
    r_a = P @ traj.outputs["a"] - x[inside]
    r_q = P @ traj.outputs["q"] - y[inside]
    assert J == pytest.approx(0.5 * np.sum(eta * (r_a ** 2 + 12.0 * r_q ** 2)), rel=1e-12)
    np.testing.assert_allclose(dS[:, col(oscillator, "a")], P.T @ (eta * r_a), rtol=1e-11,
                               atol=1e-12 * np.abs(P.T @ (eta * r_a)).max())
    np.testing.assert_allclose(dS[:, col(oscillator, "q")], P.T @ (12.0 * eta * r_q),
                               rtol=1e-11, atol=1e-12 * np.abs(P.T @ (eta * r_q)).max() * 12)


def test_samples_at_both_ends_of_the_grid(oscillator, traj):
    """A sample exactly at t0 and one exactly at t_end take the end grid values."""
    t_data = np.array([0.0, 0.1234, T_END])
    data = Measurement.from_arrays(t_data, a=np.zeros(3))
    where = data.align(traj.t, "a", "samples")
    got = where.at(traj.outputs["a"])
    np.testing.assert_allclose(got, np.interp(t_data, traj.t, traj.outputs["a"]), rtol=1e-13)
    assert got[0] == traj.outputs["a"][0] and got[-1] == traj.outputs["a"][-1]


def test_match_refuses_non_grid_times(oscillator, traj):
    data = Measurement.from_arrays(np.linspace(0.0, T_END, 157), a=np.zeros(157))
    with pytest.raises(DataError, match=r"not on the simulation grid"):
        LeastSquares(data, ["a"], align="match").evaluate(oscillator, traj)
    with pytest.raises(ValueError, match="align must be one of"):
        LeastSquares(data, ["a"], align="nearest").evaluate(oscillator, traj)


def test_least_squares_keeps_the_comparison_of_a_grid(oscillator, traj):
    """compared() works the data's samples and weights out once per grid: the same numbers
    as worked out afresh, again for an equal grid, new ones for another grid or weight."""
    rng = np.random.default_rng(3)
    data = {"q": rng.normal(size=N + 1)}
    cost = LeastSquares(data, ["q"], weights={"q": 2.0})
    samples, w = cost.compared(traj.t, "q")
    np.testing.assert_array_equal(w, 2.0 * left_weights(traj.t))
    np.testing.assert_array_equal(samples.values, data["q"])
    again = cost.compared(traj.t.copy(), "q")          # an equal grid, another array
    assert again[0] is samples and again[1] is w
    assert not w.flags.writeable and not samples.values.flags.writeable
    half = traj.t[: N // 2 + 1]
    with pytest.raises(DataError, match="shape"):      # another grid: worked out again
        cost.compared(half, "q")
    cost.weights["q"] = 3.0                            # another weight: new weights
    np.testing.assert_array_equal(cost.compared(traj.t, "q")[1], 3.0 * left_weights(traj.t))
    J, _ = cost.evaluate(oscillator, traj)
    r = traj.outputs["q"] - data["q"]
    assert J == pytest.approx(0.5 * np.sum(3.0 * left_weights(traj.t) * r * r), rel=1e-14)


def test_least_squares_copies_array_data(oscillator, traj):
    """The cost compares with the data as they were when it was made; pickling drops the
    kept comparisons."""
    import pickle
    data = {"q": np.zeros(N + 1)}
    cost = LeastSquares(data, ["q"])
    J0, _ = cost.evaluate(oscillator, traj)
    data["q"][:] = 1.0
    assert cost.evaluate(oscillator, traj)[0] == J0
    assert not cost.data["q"].flags.writeable
    clone = pickle.loads(pickle.dumps(cost))
    assert clone._compared == {} and clone.evaluate(oscillator, traj)[0] == J0


def test_value_is_the_cost_without_its_derivative(oscillator, traj):
    """Cost.value (what an evaluation without gradient computes) is evaluate's J, bit for bit:
    least squares on the grid and on a Measurement, a sum of costs, and a cost that only has
    evaluate (the base class's value)."""
    rng = np.random.default_rng(5)
    on_grid = LeastSquares({"q": rng.normal(size=N + 1), "a": rng.normal(size=N + 1)},
                           weights={"q": 3.0})
    t_data = np.linspace(0.01, T_END - 0.01, 37)
    measured = LeastSquares(Measurement.from_arrays(t_data, v=rng.normal(size=37)), ["v"])
    integral = OutputIntegral("q", 2.0)
    for cost in (on_grid, measured, integral, on_grid + measured + integral):
        assert cost.value(oscillator, traj) == cost.evaluate(oscillator, traj)[0]
    exp = symdae.Experiment(oscillator, on_grid + measured, traj.scenario,
                            params=traj.params)
    assert exp.evaluate().cost == exp.evaluate(gradient=True).cost


# ---------------------------------------------------------------------------- output integral
def test_output_integral_of_a_known_signal(oscillator, traj):
    t = traj.t
    f = np.sin(3.0 * t) + t ** 2
    tr = with_outputs(traj, v=f)
    J, dS = OutputIntegral("v", weight=2.0).evaluate(oscillator, tr)
    trap = H * (np.sum(f) - 0.5 * (f[0] + f[-1]))
    assert J == pytest.approx(2.0 * trap, rel=1e-12)
    exact = (1.0 - math.cos(3.0 * T_END)) / 3.0 + T_END ** 3 / 3.0
    assert abs(J / 2.0 - exact) < T_END * H ** 2 * 10.0 / 12.0  # |f''| <= 11 on [0, 0.5]
    eta = np.full(N + 1, H)
    eta[[0, -1]] = H / 2
    np.testing.assert_allclose(dS[:, col(oscillator, "v")], 2.0 * eta, rtol=1e-12, atol=0)
    others = [k for k in range(dS.shape[1]) if k != col(oscillator, "v")]
    assert not np.any(dS[:, others])
    # another quadrature
    J_left, _ = OutputIntegral("v", quadrature="left").evaluate(oscillator, tr)
    assert J_left == pytest.approx(H * np.sum(f[:-1]), rel=1e-12)


# ---------------------------------------------------------------------------- sums of costs
def test_cost_sum(oscillator, traj):
    ls = LeastSquares({"a": np.zeros(N + 1)}, weights={"a": 0.1})
    oi = OutputIntegral("q", weight=-3.0)
    ls2 = LeastSquares({"v": np.ones(N + 1)}, quadrature="trapezoid")
    parts = [c.evaluate(oscillator, traj) for c in (ls, oi, ls2)]
    total = (ls + oi) + ls2
    assert isinstance(total, CostSum) and len(total.costs) == 3  # nested sums flatten
    J, dS = total.evaluate(oscillator, traj)
    assert J == pytest.approx(sum(p[0] for p in parts), rel=1e-14)
    np.testing.assert_allclose(dS, sum(p[1] for p in parts), rtol=1e-14, atol=0)
    J2, dS2 = CostSum([ls, CostSum([oi, ls2])]).evaluate(oscillator, traj)
    assert J2 == J
    np.testing.assert_array_equal(dS2, dS)


# ---------------------------------------------------------------------------- unknown names
def test_unknown_outputs_raise_key_error_naming_them(oscillator, traj):
    with pytest.raises(KeyError) as err:
        LeastSquares({"acc": np.zeros(N + 1)}).evaluate(oscillator, traj)
    msg = str(err.value)
    assert "'acc'" in msg and all(f"'{n}'" in msg for n in ("a", "q", "v"))
    with pytest.raises(KeyError, match=r"'x1'.*\['a', 'q', 'v'\]"):
        OutputIntegral("x1").evaluate(oscillator, traj)
    with pytest.raises(KeyError, match="'v'"):  # a weight for an output that is not fitted
        LeastSquares({"a": np.zeros(N + 1)}, weights={"v": 1.0})
    with pytest.raises(ValueError, match="'a'.*>= 0"):
        LeastSquares({"a": np.zeros(N + 1)}, weights={"a": -1.0})
    data = Measurement.from_arrays(traj.t, a=np.zeros(N + 1))
    with pytest.raises(DataError, match=r"no signal 'q'.*\['a'\]"):
        LeastSquares(data, outputs={"q": "q"}).evaluate(oscillator, traj)


# ---------------------------------------------------------------------------- data errors
def test_nan_in_a_signal_names_signal_sample_and_time():
    t = np.linspace(0.0, 1.0, 11)
    x = np.zeros(11)
    x[7] = np.nan
    with pytest.raises(DataError, match=r"'force'.*sample 7.*t = 0\.7"):
        Measurement.from_arrays(t, force=x)
    x[7] = np.inf
    with pytest.raises(DataError, match=r"'force'.*sample 7"):
        Measurement.from_arrays(t, force=x)


def test_nan_in_grid_data_names_signal_and_sample(oscillator, traj):
    ref = np.zeros(N + 1)
    ref[123] = np.nan
    with pytest.raises(DataError, match=r"'a'.*sample 123"):
        LeastSquares({"a": ref}).evaluate(oscillator, traj)


def test_bad_times():
    x = np.zeros(4)
    with pytest.raises(DataError, match=r"not strictly increasing at index 2.*0\.3.*0\.2"):
        Measurement.from_arrays([0.0, 0.3, 0.2, 0.4], a=x)
    with pytest.raises(DataError, match=r"not strictly increasing at index 2.*0\.1.*0\.1"):
        Measurement.from_arrays([0.0, 0.1, 0.1, 0.4], a=x)
    with pytest.raises(DataError, match=r"sample time 1 is not finite"):
        Measurement.from_arrays([0.0, np.nan, 0.2, 0.4], a=x)
    with pytest.raises(DataError, match="at least 2"):
        Measurement.from_arrays([0.0], a=[1.0])
    with pytest.raises(DataError, match="no signals"):
        Measurement.from_arrays([0.0, 1.0])


def test_length_mismatches(oscillator, traj):
    with pytest.raises(DataError, match=r"'a' has 3 samples.*times have 4"):
        Measurement.from_arrays([0.0, 0.1, 0.2, 0.3], a=[1.0, 2.0, 3.0])
    with pytest.raises(DataError, match=r"'a'.*shape \(500,\).*\(501,\)"):
        LeastSquares({"a": np.zeros(N)}).evaluate(oscillator, traj)


def test_grid_outside_the_data_span(oscillator, traj):
    # interpolation onto the grid: the data end before t_end
    t_data = np.linspace(0.0, 0.4, 77)
    data = Measurement.from_arrays(t_data, a=np.zeros(77))
    with pytest.raises(DataError, match=r"simulated span \[0, 0\.5\].*sampled span \[0, 0\.4\]"):
        LeastSquares(data, ["a"], align="interpolate").evaluate(oscillator, traj)
    # interpolation onto the grid: the data start after t0
    t_data = np.linspace(0.01, 0.6, 77)
    data = Measurement.from_arrays(t_data, a=np.zeros(77))
    with pytest.raises(DataError, match="not inside"):
        LeastSquares(data, ["a"], align="interpolate").evaluate(oscillator, traj)
    # at the samples (the default): the cost covers the overlap [0.01, 0.5]
    where = data.align(traj.t, "a")
    assert where.span[0] == 0.01 and where.span[1] <= T_END and len(where) == \
        np.count_nonzero(t_data <= T_END)
    J, _ = LeastSquares(data, ["a"]).evaluate(oscillator, traj)
    inside = t_data <= T_END
    r = np.interp(t_data[inside], traj.t, traj.outputs["a"])
    assert J == pytest.approx(0.5 * np.sum(left_weights(t_data[inside]) * r ** 2), rel=1e-12)
    # matching: sample times on the grid's lattice beyond t_end are left out
    t_data = H * np.arange(0, 2 * N, 10)
    data = Measurement.from_arrays(t_data, a=np.ones(t_data.size))
    where = data.align(traj.t, "a", "match")
    assert len(where) == N // 10 + 1 and where.theta is None
    # no sample in the span at all: named
    data = Measurement.from_arrays(T_END + np.array([0.1, 0.2]), a=np.zeros(2))
    with pytest.raises(DataError, match=r"no sample of 'a' lies in the simulated span"):
        LeastSquares(data, ["a"]).evaluate(oscillator, traj)


# ---------------------------------------------------------------------------- CSV files
def write(path, text):
    path.write_text(text)
    return path


def test_csv_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    t = np.cumsum(rng.uniform(1e-4, 1e-2, 50))
    m = Measurement.from_arrays(t, a1=rng.normal(size=50) * 1e3, x1=rng.normal(size=50) * 1e-7)
    path = m.to_csv(tmp_path / "m.csv")
    back = Measurement.from_csv(path)
    np.testing.assert_array_equal(back.t, m.t)  # bit for bit
    assert list(back.values) == ["a1", "x1"]
    for k in m.values:
        np.testing.assert_array_equal(back.values[k], m.values[k])
    assert back.source == str(path)
    only = Measurement.from_csv(path, columns=["x1"])
    assert list(only.values) == ["x1"]
    # another time column name
    path2 = m.to_csv(tmp_path / "m2.csv", time_column="time_s")
    np.testing.assert_array_equal(Measurement.from_csv(path2, time_column="time_s").t, m.t)


def test_csv_missing_file(tmp_path):
    path = tmp_path / "nope.csv"
    with pytest.raises(DataError, match=re.escape(str(path)) + ".*does not exist"):
        Measurement.from_csv(path)


def test_csv_missing_columns(tmp_path):
    path = write(tmp_path / "d.csv", "t,a\n0,1\n0.1,2\n0.2,3\n")
    with pytest.raises(DataError, match=re.escape(str(path)) + r".*no column 'b'.*\['t', 'a'\]"):
        Measurement.from_csv(path, columns=["b"])
    with pytest.raises(DataError, match=r"no time column 'time'"):
        Measurement.from_csv(path, time_column="time")


def test_csv_non_numeric_field_names_file_line_column(tmp_path):
    path = write(tmp_path / "d.csv", "t,a,b\n0,1,2\n0.1,2,3\n0.2,3,oops\n0.3,4,5\n")
    with pytest.raises(DataError,
                       match=re.escape(str(path)) + r", line 4, column 'b': 'oops' is not a "):
        Measurement.from_csv(path)
    path = write(tmp_path / "e.csv", "t,a\n0,1\n0.1,\n0.2,3\n")
    with pytest.raises(DataError, match=r"line 3, column 'a': '' is not a number"):
        Measurement.from_csv(path)


def test_csv_ragged_row_and_short_file(tmp_path):
    path = write(tmp_path / "d.csv", "t,a\n0,1\n0.1,2,7\n0.2,3\n")
    with pytest.raises(DataError, match=r"line 3: 3 fields, the header has 2"):
        Measurement.from_csv(path)
    path = write(tmp_path / "s.csv", "t,a\n0,1\n")
    with pytest.raises(DataError, match="at least two data rows"):
        Measurement.from_csv(path)


def test_csv_nan_and_unsorted_times_name_the_file(tmp_path):
    path = write(tmp_path / "d.csv", "t,a\n0,1\n0.1,nan\n0.2,3\n")
    with pytest.raises(DataError, match=re.escape(str(path)) + r".*'a'.*sample 1.*t = 0\.1"):
        Measurement.from_csv(path)
    path = write(tmp_path / "u.csv", "t,a\n0,1\n0.2,2\n0.1,3\n")
    with pytest.raises(DataError, match=re.escape(str(path)) + r".*not strictly increasing"):
        Measurement.from_csv(path)


def test_csv_line_numbers_count_blank_lines(tmp_path):
    path = write(tmp_path / "d.csv", "t,a\n0,1\n\n0.1,2\n0.2,x\n")
    with pytest.raises(DataError, match=r"line 5, column 'a'"):
        Measurement.from_csv(path)


def test_csv_repeated_column_name_is_an_error(tmp_path):
    path = write(tmp_path / "d.csv", "t,a,a\n0,1,5\n0.1,2,6\n0.2,3,7\n")
    with pytest.raises(DataError, match="'a'"):
        Measurement.from_csv(path)
