"""Order analysis of a run-up (symdae.costs.orders): geometry, exactness, data and errors.

No simulation here (the model's order costs and gradients are in test_four_cylinder_tvd.py).
References: the ramp inverted by hand; Appendix B (a Hann window over two whole cycles returns
each cycle harmonic's coefficient, with g_c = 2, to round-off, wherever the window starts);
the chirp phase error of the fixed-frequency analysis, (1/2)(d omega_i/dt)(2/n)^2, against
angle tracking.
"""
from __future__ import annotations

import numpy as np
import pytest

from symdae.costs.fourier import fourier_map
from symdae.costs.orders import OrderAnalysis, OrderCost, OrderCurves, RunUp
from symdae.data.measurement import Measurement
from symdae.errors import DataError, InputError

REDUCED = RunUp(3000.0, 5400.0, 0.5, 8.5)


def test_window_centre_inverts_the_ramp():
    for n in np.linspace(3000, 5400, 97):
        tk = REDUCED.time_at(n)
        assert abs(REDUCED.speed(tk) - n) <= 1e-12 * n
        # the paper's formula, written out
        paper = (3000 * 8.5 - 5400 * 0.5 + n * (0.5 - 8.5)) / (3000 - 5400)
        assert abs(tk - paper) <= 1e-12
    assert REDUCED.rate == pytest.approx(300.0)
    with pytest.raises(InputError, match="outside the run-up"):
        REDUCED.time_at(5500.0)


def test_prescribed_angle_is_the_integral_of_the_speed():
    from scipy.integrate import quad

    for t in (0.3, 0.5, 2.0, 8.5, 9.0):
        ref = quad(lambda s: 2 * np.pi * REDUCED.speed(s) / 60, 0, t, points=[0.5, 8.5],
                   epsabs=1e-12, epsrel=1e-13)[0]
        assert REDUCED.angle(t) == pytest.approx(ref, rel=1e-12)


def test_windows_span_two_cycles_inside_the_ramp():
    an = OrderAnalysis.over_band(REDUCED, (3500, 5000), 50, (6,))
    assert an.n_speeds == 31 and an.speeds[0] == 3500 and an.speeds[-1] == 5000
    for n, w in zip(an.speeds, an.windows()):
        assert w.length * n / 60 == pytest.approx(4.0, rel=1e-13)     # 4 revolutions
        assert 0.5 <= w.start and w.end <= 8.5
        assert (w.start + w.end) / 2 == pytest.approx(REDUCED.time_at(n), abs=1e-12)
        assert w.gain == 2.0 and w.shape_name == "hann"
        assert w.lines[0].frequency == pytest.approx(6 * n / 60)
    full = RunUp(1000, 6000, 1.0, 26.0)
    an = OrderAnalysis.over_band(full, (3000, 5500), 25, (2, 4, 6, 8))
    assert an.n_speeds == 101
    with pytest.raises(InputError, match="speed point 3010 rpm.*reaches outside the ramp"):
        OrderAnalysis(RunUp(3000, 5400, 0.5, 8.5), (3010,), (6,))


def test_cycle_harmonics_are_separated_exactly():
    """A cycle-periodic signal at speed n (harmonics k n/2, k = 1..24: every order and half
    order up to 12): each order's coefficients come back to round-off, whatever the window's
    position relative to the phase origin (Appendix B with two periods). The window (0.05 s)
    is a whole number of steps, its edges lie between samples. Round-off: the phases reach
    2 pi 960 Hz 0.83 s = 5000 rad, so each cos/sin carries eps 5000 = 1.1e-12."""
    rng = np.random.default_rng(3)
    n = 4800.0
    k = np.arange(1, 25)
    a, b = rng.uniform(-1, 1, 24), rng.uniform(-1, 1, 24)
    ramp = RunUp(4000.0, 5000.0, 0.0, 1.0)
    an = OrderAnalysis(ramp, (n,), (1.5, 2, 4, 6, 8, 11.5))
    w = an.windows()[0]
    h = 1e-5
    t = 0.37 * h + h * np.arange(int(1.0 / h))
    ph = 2 * np.pi * np.outer(t, k * n / 120)
    y = 0.3 + np.cos(ph) @ a + np.sin(ph) @ b
    cu = an.curves(t, y)
    tol = np.finfo(float).eps * 2 * np.pi * 12 * n / 60 * w.end
    for j, order in enumerate(an.orders):
        i = int(2 * order) - 1
        assert cu.A[j, 0] == pytest.approx(a[i], abs=tol)
        assert cu.B[j, 0] == pytest.approx(b[i], abs=tol)
        assert cu.amplitude[j, 0] == pytest.approx(np.hypot(a[i], b[i]), abs=tol)
    assert np.min(np.abs(t - w.start)) > 0.3 * h     # the edges lie between samples


def test_angle_tracking_removes_the_chirp():
    """An order-6 signal locked to the crank angle on a fast ramp (1000 rpm/s): the fixed-
    frequency analysis loses amplitude to the chirp (phase error 1/2 (d omega/dt) (2/n)^2 =
    0.26 rad at 4200 rpm; the spec's 0.085 rad at 300 rpm/s and 4000 rpm scales to 0.28 rad
    at 1000 rpm/s, its "0.5 rad" is a slip). The phase drift is symmetric about the window's
    centre, so the amplitude loses only a second-order part (8e-4 relative here); angle
    tracking removes it to the Hann window's residual leakage (6e-8)."""
    fast = RunUp(3900.0, 4700.0, 0.0, 0.8)
    h = 1e-5
    t = np.arange(0, 0.8 + h / 2, h)
    y = 2e-3 * np.cos(6 * fast.angle(t) + 0.4)
    n = 4200.0
    omega_rate = 2 * np.pi * 6 * fast.rate / 60
    phase_error = 0.5 * omega_rate * (2 / (n / 60)) ** 2
    assert phase_error == pytest.approx(0.256, abs=0.001)
    assert 0.5 * 2 * np.pi * 6 * 300 / 60 * (2 / (4000 / 60)) ** 2 == pytest.approx(0.085, abs=1e-3)
    err = {}
    for tracking in ("frequency", "angle"):
        cu = OrderAnalysis(fast, (n,), (6,), tracking=tracking).curves(t, y)
        err[tracking] = abs(cu.amplitude[0, 0] - 2e-3) / 2e-3
    assert 3e-4 < err["frequency"] < 3e-3
    assert err["angle"] < 1e-6
    assert err["angle"] < 1e-3 * err["frequency"]


def test_order_cost_data_forms_agree():
    rng = np.random.default_rng(0)
    h = 2e-5
    t = np.arange(0, 8.5 + h / 2, h)
    y = 1e-3 * np.cos(6 * REDUCED.angle(t)) + 1e-4 * rng.standard_normal(t.size)
    an = OrderAnalysis.over_band(REDUCED, (3500, 5000), 100, (4, 6), weights=(0.5, 1.0))
    meas = Measurement(t, {"twist": y})
    c1 = OrderCost("twist", an, meas, amplitude_scale="data")
    curves = c1.measured_curves
    assert isinstance(curves, OrderCurves) and curves.amplitude.shape == (2, 16)
    c2 = OrderCost("twist", an, curves, amplitude_scale="data")
    c3 = OrderCost("twist", an, curves.amplitude, amplitude_scale="data")
    for c in (c2, c3):
        assert np.allclose(c.measured.amplitude, c1.measured.amplitude, rtol=1e-15, atol=0)
        assert c.amplitude_scale == c1.amplitude_scale
    # the lines carry the order weights, speed-major
    fmap = fourier_map(t, an.windows())
    assert np.array_equal(fmap.weight, np.tile([0.5, 1.0], 16))
    with pytest.raises(DataError, match=r"shape \(16, 2\), the analysis \(2, 16\)"):
        OrderCost("twist", an, curves.amplitude.T)
    other = OrderAnalysis.over_band(REDUCED, (3500, 5000), 100, (6,))
    with pytest.raises(DataError, match="do not match the analysis"):
        OrderCost("twist", other, curves)


@pytest.mark.parametrize("kw,match", [
    (dict(orders=()), "at least one"),
    (dict(orders=(6, 6)), "distinct"),
    (dict(orders=(-2,)), "positive"),
    (dict(weights=(1, 2)), "2 weights for 1 orders"),
    (dict(weights=(-1,)), ">= 0"),
    (dict(tracking="crank"), "tracking must be one of"),
    (dict(cycles=1.5), "whole number"),
])
def test_bad_analysis_is_named(kw, match):
    args = dict(runup=REDUCED, speeds=(4000,), orders=(6,))
    args.update(kw)
    with pytest.raises(InputError, match=match):
        OrderAnalysis(**args)


def test_bad_runup_is_named():
    with pytest.raises(InputError, match="t1 .* must be after t0"):
        RunUp(1000, 2000, 3.0, 1.0)
    with pytest.raises(InputError, match="positive and different"):
        RunUp(1000, 1000, 0.0, 1.0)
    with pytest.raises(InputError, match=r"run-up parameters \['t1'\]"):
        RunUp.of({"n0": 1, "n1": 2, "t0": 0})
    with pytest.raises(InputError, match="band"):
        OrderAnalysis.over_band(REDUCED, (5000, 3500), 50, (6,))
