"""Fourier coefficients, windows and frequency-domain costs without simulation.

Reference values come from the definitions: a signal built from known coefficients a_k, b_k,
NumPy's rfft for the DFT identity, Appendix B of the frequency-domain paper written out by hand
(one period of a Hann window leaks 1/4 (-a_{i-1} + 2 a_i - a_{i+1}), two or more whole periods
give a_i / 2), scipy's own window samples, and central differences for dJ/dS (the costs are
polynomials or smooth functions of the samples).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.signal import get_window

import symdae
from symdae.costs.fourier import Line, Window, band_lines, fourier_coefficients
from symdae.costs.frequency import KINDS, FourierCost
from symdae.costs.windows import window_shape
from symdae.data.measurement import Measurement
from symdae.errors import DataError, InputError

T = 1.0                      # period of the test signal
PER_PERIOD = 512             # samples per period
RNG = np.random.default_rng(20240607)
K = 9
A_K = RNG.uniform(-1, 1, K + 1)          # a_0 .. a_9 (a_0 / 2 is the mean)
B_K = np.concatenate([[0.0], RNG.uniform(-1, 1, K)])


def signal(t):
    y = np.full_like(t, A_K[0] / 2)
    for k in range(1, K + 1):
        y += A_K[k] * np.cos(2 * np.pi * k * t / T) + B_K[k] * np.sin(2 * np.pi * k * t / T)
    return y


def grid(periods: int = 5):
    return np.arange(periods * PER_PERIOD + 1) * (T / PER_PERIOD)


ORDERS = np.arange(1, 9)     # lines i / T, i = 1..8


def orders_window(start, periods, **kw):
    return Window.at(start, start + periods * T, ORDERS / T, **kw)


# ---------------------------------------------------------------------------- rectangular
def test_pure_sinusoid_gives_its_coefficients():
    L, N = 2.0, 400
    t = np.arange(N + 1) * L / N
    for k, a, b in [(1, 0.3, -0.7), (7, -1.0, 0.25), (199, 0.5, 0.5)]:
        w = 2 * np.pi * k / L
        y = a * np.cos(w * t) + b * np.sin(w * t)
        sp = fourier_coefficients(t, y, [Window.at(0.0, L, [k / L])])
        assert abs(sp.A[0] - a) <= 1e-13 and abs(sp.B[0] - b) <= 1e-13
        assert abs(sp.amplitude[0] - np.hypot(a, b)) <= 1e-13


def test_left_rule_is_the_dft():
    N = 1000
    t = np.arange(N + 1) * 0.01
    y = RNG.standard_normal(N + 1)
    L = N * 0.01
    ks = np.arange(1, N // 2)
    sp = fourier_coefficients(t, y, [Window.at(0.0, L, ks / L)])
    Y = np.fft.rfft(y[:N])[1:N // 2]
    np.testing.assert_allclose(sp.A, 2 / N * Y.real, rtol=0, atol=1e-13)
    np.testing.assert_allclose(sp.B, -2 / N * Y.imag, rtol=0, atol=1e-13)


def test_band_lines_include_both_edges():
    lines = band_lines(1.25, 1.45, 40.0)
    np.testing.assert_allclose([x.frequency for x in lines], np.arange(50, 59) / 40.0,
                               rtol=1e-15)
    # edges computed in floating point (0.1 + 0.2 != 0.3) are still included
    assert len(band_lines(0.1 + 0.2, 0.7, 10.0)) == 5
    w = Window.over_band(0.0, 40.0, 1.25, 1.45)
    assert w.band == (1.25, 1.45) and len(w.lines) == 9


def test_harmonics_and_weights():
    w = Window.harmonics(0.0, 2.0, 1.5, [2, 4, 6], weights=[1.0, 0.5, 2.0])
    np.testing.assert_allclose(w.frequencies, [3.0, 6.0, 9.0])
    assert [x.weight for x in w.lines] == [1.0, 0.5, 2.0]


# ---------------------------------------------------------------------------- Appendix B
def test_appendix_b_one_period_leaks_into_neighbours():
    t = grid()
    sp = fourier_coefficients(t, signal(t), [orders_window(0.0, 1, shape="hann", gain=1.0)])
    i = ORDERS
    np.testing.assert_allclose(sp.A, 0.25 * (-A_K[i - 1] + 2 * A_K[i] - A_K[i + 1]),
                               rtol=0, atol=1e-13)
    np.testing.assert_allclose(sp.B, 0.25 * (-B_K[i - 1] + 2 * B_K[i] - B_K[i + 1]),
                               rtol=0, atol=1e-13)


def test_appendix_b_one_period_depends_on_where_the_window_starts():
    t = grid()
    sp = fourier_coefficients(t, signal(t), [orders_window(0.37, 1, shape="hann", gain=1.0)])
    i = ORDERS
    leak = 0.25 * (-A_K[i - 1] + 2 * A_K[i] - A_K[i + 1])
    assert np.max(np.abs(sp.A - leak)) > 0.1


@pytest.mark.parametrize("periods", [2, 3])
@pytest.mark.parametrize("start", [0.0, 0.37, 1.0 + 1.0 / 3.0])
def test_appendix_b_whole_periods_give_half_the_coefficient(periods, start):
    """n >= 2 whole periods: a_i / 2 uncorrected and a_i with g_c = 2, wherever the window
    starts (0.37 T and 4/3 T lie between samples)."""
    t = grid()
    y = signal(t)
    raw = fourier_coefficients(t, y, [orders_window(start, periods, shape="hann", gain=1.0)])
    np.testing.assert_allclose(raw.A, A_K[ORDERS] / 2, rtol=0, atol=1e-13)
    np.testing.assert_allclose(raw.B, B_K[ORDERS] / 2, rtol=0, atol=1e-13)
    corrected = fourier_coefficients(t, y, [orders_window(start, periods, shape="hann")])
    np.testing.assert_allclose(corrected.A, A_K[ORDERS], rtol=0, atol=1e-13)
    np.testing.assert_allclose(corrected.B, B_K[ORDERS], rtol=0, atol=1e-13)


# ---------------------------------------------------------------------------- other windows
def test_hann_is_the_paper_window_with_gain_two():
    shape = window_shape("hann")
    assert shape.coherent_gain == 2.0
    u = np.linspace(0, 1, 11)
    np.testing.assert_allclose(shape.values(u), 0.5 * (1 - np.cos(2 * np.pi * u)), atol=1e-16)
    w = Window.at(1.0, 3.0, [1.0], shape="hann")
    tt = np.array([1.0, 1.5, 2.0, 3.0])
    np.testing.assert_allclose(w.eta(tt), [0.0, 1.0, 2.0, 0.0], atol=1e-15)   # eq. (26), 2 pi


@pytest.mark.parametrize("spec", ["hamming", "blackman", "nuttall", "flattop",
                                  ("general_cosine", [1.0, 0.6, 0.1])])
def test_cosine_sum_windows_are_exact_at_any_position(spec):
    shape = window_shape(spec)
    assert shape.cosine is not None
    for M in (37, 64, 1001):
        np.testing.assert_allclose(shape.values(np.arange(M) / M),
                                   get_window(spec, M, fftbins=True), rtol=0, atol=1e-14)
    mean = np.mean(get_window(spec, 4096, fftbins=True))
    assert shape.coherent_gain == pytest.approx(1 / mean, rel=1e-13)


def test_hamming_keeps_amplitudes_over_two_periods_off_grid():
    t = grid()
    sp = fourier_coefficients(t, signal(t), [orders_window(0.37, 2, shape="hamming")])
    np.testing.assert_allclose(sp.A, A_K[ORDERS], rtol=0, atol=1e-13)
    np.testing.assert_allclose(sp.B, B_K[ORDERS], rtol=0, atol=1e-13)


def test_sampled_scipy_window_uses_scipys_samples_and_coherent_gain():
    spec = ("tukey", 0.3)
    shape = window_shape(spec)
    assert shape.cosine is None
    assert shape.coherent_gain == pytest.approx(1 / 0.85, rel=1e-9)   # mean of Tukey: 1 - r/2
    t = grid()
    y = signal(t)
    w = Window.at(1.0, 3.0, [2.0], shape=spec)
    sp = fourier_coefficients(t, y, [w])
    M = 2 * PER_PERIOD
    eta = shape.coherent_gain * get_window(spec, M + 1, fftbins=False)[:M]
    ts = t[PER_PERIOD:3 * PER_PERIOD]
    ref = 2 / 2.0 * np.sum((T / PER_PERIOD) * eta * y[PER_PERIOD:3 * PER_PERIOD]
                           * np.cos(2 * np.pi * 2.0 * ts))
    assert sp.A[0] == pytest.approx(ref, abs=1e-14)
    with pytest.raises(InputError, match=r"tukey.*edges on them"):
        fourier_coefficients(t, y, [Window.at(0.37, 2.37, [2.0], shape=spec)])


def test_callable_window_and_unknown_window():
    w = Window.at(0.0, 2.0, [1.0], shape=lambda u: np.sin(np.pi * u) ** 2)
    assert w.gain == pytest.approx(2.0, rel=1e-12)      # sin^2 = Hann
    t = grid()
    y = signal(t)
    hann = fourier_coefficients(t, y, [Window.at(0.0, 2.0, [1.0], shape="hann")])
    own = fourier_coefficients(t, y, [w])
    assert own.A[0] == pytest.approx(hann.A[0], abs=1e-13)
    with pytest.raises(InputError, match="unknown window 'hannn'"):
        Window.at(0.0, 1.0, [1.0], shape="hannn")


def test_trapezoid_equals_left_for_periodic_data_and_differs_otherwise():
    t = grid()
    y = signal(t)
    win = [orders_window(0.0, 2)]
    left = fourier_coefficients(t, y, win)
    trap = fourier_coefficients(t, y, win, quadrature="trapezoid")
    np.testing.assert_allclose(trap.A, left.A, atol=1e-13)
    # a ramp is not periodic: trapezoid = left + (h/2)(f(t_u) - f(t_l)) times the kernel
    h = T / PER_PERIOD
    ramp = t.copy()
    left = fourier_coefficients(t, ramp, win)
    trap = fourier_coefficients(t, ramp, win, quadrature="trapezoid")
    expected = left.A + (2 / 2.0) * (h / 2) * (ramp[2 * PER_PERIOD] - ramp[0])
    np.testing.assert_allclose(trap.A, expected, atol=1e-13)


def test_several_windows_with_own_lines_and_phase_functions():
    """Many windows with their own lines; a line's phase may be any function of time: with
    phi(t) = 2 pi f t + c the coefficients rotate by c."""
    t = grid()
    y = signal(t)
    c = 0.7
    wins = [orders_window(0.0, 2, shape="hann"),
            Window(1.0, 3.0, (Line(3.0, phase=lambda s: 2 * np.pi * 3.0 * s + c),), "hann"),
            Window.at(2.0, 4.0, [5.0, 6.0])]
    sp = fourier_coefficients(t, y, wins)
    assert list(sp.window) == [0] * 8 + [1] + [2, 2]
    A3, B3 = A_K[3], B_K[3]
    # cos(x + c) = cos x cos c - sin x sin c
    assert sp.A[8] == pytest.approx(A3 * np.cos(c) - B3 * np.sin(c), abs=1e-13)
    assert sp.B[8] == pytest.approx(B3 * np.cos(c) + A3 * np.sin(c), abs=1e-13)
    np.testing.assert_allclose(sp.A[9:], A_K[5:7], atol=1e-13)


# ---------------------------------------------------------------------------- costs
@pytest.fixture(scope="module")
def oscillator(bundled):
    return bundled("oscillator")[0]


@pytest.fixture(scope="module")
def fake_traj(oscillator):
    """An oscillator trajectory whose output q is replaced by a known signal."""
    tr = oscillator.simulate(t_end=4.0, h=T / PER_PERIOD, alpha=-0.1)
    return dataclasses.replace(tr, outputs={**tr.outputs, "q": signal(tr.t)})


def measured_signal(t):
    return 1.1 * signal(t) + 0.2 * np.sin(2 * np.pi * 3 * t + 0.4)


def analysis():
    return [orders_window(0.0, 2, shape="hann"), Window.at(1.0, 4.0, [2.0, 3.0])]


def cost_value(cost, expected_kind, sim, meas, rho, s):
    a, b, abar, bbar = sim.A / s, sim.B / s, meas.A / s, meas.B / s
    P, Pb = a * a + b * b, abar * abar + bbar * bbar
    if expected_kind == "power":
        return 0.25 * np.sum(rho * (P - Pb) ** 2)
    if expected_kind == "amplitude":
        return 0.5 * np.sum(rho * (np.sqrt(P) - np.sqrt(Pb)) ** 2)
    if expected_kind == "complex":
        return 0.5 * np.sum(rho * ((a - abar) ** 2 + (b - bbar) ** 2))
    eps = cost.log_floor ** 2
    return 0.5 * np.sum(rho * (np.log(P + eps) - np.log(Pb + eps)) ** 2)


@pytest.mark.parametrize("kind", KINDS)
def test_cost_values_and_single_sample_derivatives(oscillator, fake_traj, kind):
    t = fake_traj.t
    data = Measurement.from_arrays(t, q=measured_signal(t))
    wins = analysis()
    weights = np.linspace(0.5, 2.0, 10)
    wins[0] = dataclasses.replace(wins[0], lines=tuple(
        dataclasses.replace(x, weight=w) for x, w in zip(wins[0].lines, weights[:8])))
    cost = FourierCost("q", wins, data, kind=kind, amplitude_scale=0.3)
    d = cost.details(oscillator, fake_traj)
    meas = fourier_coefficients(t, measured_signal(t), wins)
    sim = fourier_coefficients(t, signal(t), wins)
    rho = np.concatenate([weights[:8], [1.0, 1.0]])
    assert d.cost == pytest.approx(cost_value(cost, kind, sim, meas, rho, 0.3), rel=1e-13)
    np.testing.assert_allclose(d.simulated.A, sim.A, atol=1e-15)
    np.testing.assert_allclose(d.measured.amplitude, meas.amplitude, atol=1e-15)
    col = oscillator.model.output_names.index("q")
    assert np.all(d.dS[:, [c for c in range(d.dS.shape[1]) if c != col]] == 0)
    # central differences in single samples: in the Hann window only, in both, in the
    # rectangular one only, its last sample, and the trajectory's last (t = 4: [1, 4) excludes it)
    y = fake_traj.outputs["q"]
    for i in [5, 700, 1100, 1800, 2047, len(t) - 1]:
        step = 1e-5
        vals = []
        for sgn in (1, -1):
            yy = y.copy()
            yy[i] += sgn * step
            tr = dataclasses.replace(fake_traj, outputs={**fake_traj.outputs, "q": yy})
            vals.append(cost.evaluate(oscillator, tr)[0])
        fd = (vals[0] - vals[1]) / (2 * step)
        scale = np.max(np.abs(d.dS[:, col]))
        assert abs(fd - d.dS[i, col]) <= 1e-7 * scale, (i, fd, d.dS[i, col])
    assert d.dS[len(t) - 1, col] == 0.0


def test_amplitudes_given_per_line_or_per_window(oscillator, fake_traj):
    t = fake_traj.t
    wins = analysis()
    meas = fourier_coefficients(t, measured_signal(t), wins)
    from_time = FourierCost("q", wins, Measurement.from_arrays(t, q=measured_signal(t)))
    flat = FourierCost("q", wins, meas.amplitude)
    per_window = FourierCost("q", wins, [meas.amplitude[:8], meas.amplitude[8:]])
    J = from_time.evaluate(oscillator, fake_traj)[0]
    assert flat.evaluate(oscillator, fake_traj)[0] == pytest.approx(J, rel=1e-14)
    assert per_window.evaluate(oscillator, fake_traj)[0] == pytest.approx(J, rel=1e-14)
    assert not flat.measured.has_phase
    with pytest.raises(InputError, match="complex .* needs measured A and B"):
        FourierCost("q", wins, meas.amplitude, kind="complex")
    # amplitude_scale 'data' = the largest measured amplitude; J scales by a_ref^-4
    scaled = FourierCost("q", wins, meas.amplitude, amplitude_scale="data")
    a_ref = float(np.max(meas.amplitude))
    assert scaled.amplitude_scale == a_ref
    assert scaled.evaluate(oscillator, fake_traj)[0] == pytest.approx(J / a_ref ** 4, rel=1e-13)


def test_measurement_on_its_own_sample_times(oscillator, fake_traj):
    """Data sampled twice as densely on their own grid give the same (exact) spectrum."""
    t_fine = np.arange(8 * PER_PERIOD + 1) * (T / (2 * PER_PERIOD))
    wins = analysis()
    fine = FourierCost("q", wins, Measurement.from_arrays(t_fine, q=measured_signal(t_fine)))
    ref = fourier_coefficients(fake_traj.t, measured_signal(fake_traj.t), wins)
    np.testing.assert_allclose(fine.measured.A, ref.A, atol=1e-13)


def test_frequency_and_time_costs_add(oscillator, fake_traj):
    t = fake_traj.t
    data = Measurement.from_arrays(t, q=measured_signal(t))
    f = FourierCost("q", analysis(), data)
    ls = symdae.LeastSquares(data, ["q"])
    J, dS = (f + ls).evaluate(oscillator, fake_traj)
    J1, d1 = f.evaluate(oscillator, fake_traj)
    J2, d2 = ls.evaluate(oscillator, fake_traj)
    assert J == J1 + J2
    np.testing.assert_array_equal(dS, d1 + d2)


# ---------------------------------------------------------------------------- bad input
def test_bad_bands_windows_and_lines():
    with pytest.raises(InputError, match=r"band \[1.26, 1.27\] Hz contains no line"):
        Window.over_band(0.0, 40.0, 1.26, 1.27)
    with pytest.raises(InputError, match=r"band \[2, 1\] Hz"):
        band_lines(2.0, 1.0, 10.0)
    with pytest.raises(InputError, match="band lower edge is not finite"):
        band_lines(float("nan"), 1.0, 10.0)
    with pytest.raises(InputError, match="non-positive length"):
        Window.at(2.0, 2.0, [1.0])
    with pytest.raises(InputError, match="non-positive length"):
        Window.at(3.0, 2.0, [1.0])
    with pytest.raises(InputError, match=r"frequency of line .* is not finite"):
        Window.at(0.0, 1.0, [1.0, float("inf")])
    with pytest.raises(InputError, match=r"frequency of line .* is negative"):
        Window.at(0.0, 1.0, [-1.0])
    with pytest.raises(InputError, match="3 weights for 2 lines"):
        Window.at(0.0, 1.0, [1.0, 2.0], weights=[1, 2, 3])
    with pytest.raises(InputError, match="kind must be one of"):
        FourierCost("q", analysis(), [1.0] * 10, kind="phase")


def test_windows_that_do_not_fit_the_grid():
    t = np.arange(401) * 0.01      # 4 s, Nyquist 50 Hz
    y = np.sin(t)
    with pytest.raises(DataError, match=r"window 0 \[0, 5\] s .* longer than the signal"):
        fourier_coefficients(t, y, [Window.at(0.0, 5.0, [1.0])])
    with pytest.raises(DataError, match=r"window 1 \[3, 4.5\] s reaches outside"):
        fourier_coefficients(t, y, [Window.at(0.0, 1.0, [1.0]), Window.at(3.0, 4.5, [1.0])])
    with pytest.raises(DataError, match=r"line 1 \(60 Hz\) of window 0 \[0, 4\] s \(band "
                                        r"\[40, 60\] Hz\) lies above the Nyquist frequency 50"):
        fourier_coefficients(t, y, [Window(0.0, 4.0, (Line(40.0), Line(60.0)), band=(40, 60))])
    with pytest.raises(DataError, match="holds 1 sample"):
        fourier_coefficients(t, y, [Window.at(1.0, 1.005, [1.0])])
    bad = y.copy()
    bad[17] = np.nan
    with pytest.raises(DataError, match="NaN or infinite at sample 17"):
        fourier_coefficients(t, bad, [Window.at(0.0, 1.0, [1.0])])


def test_bad_measured_spectra(oscillator, fake_traj):
    wins = analysis()
    with pytest.raises(DataError, match=r"9 measured amplitudes for 10 lines"):
        FourierCost("q", wins, np.ones(9))
    with pytest.raises(DataError, match=r"window 1 .* 3 measured amplitudes for its 2 lines"):
        FourierCost("q", wins, [np.ones(8), np.ones(3)])
    amp = np.ones(10)
    amp[4] = np.nan
    with pytest.raises(DataError, match=r"amplitude of line 4 \(5 Hz, window 0\) is nan"):
        FourierCost("q", wins, amp)
    other = fourier_coefficients(fake_traj.t, signal(fake_traj.t), [orders_window(0.0, 2)])
    with pytest.raises(DataError, match="measured spectrum has 8 lines, the analysis 10"):
        FourierCost("q", wins, other)
    short = Measurement.from_arrays(np.arange(101) * 0.01, q=np.zeros(101))
    with pytest.raises(DataError, match=r"window 0 .* longer than the measurement \(arrays\)"):
        FourierCost("q", wins, short)
    with pytest.raises(DataError, match=r"no signal 'q'"):
        FourierCost("q", wins, Measurement.from_arrays(np.arange(5.0), x=np.zeros(5)))
    with pytest.raises(DataError, match=r"window 1 \[1, 4.5\] s reaches outside the simulation"):
        cost = FourierCost("q", [orders_window(0.0, 2), Window.at(1.0, 4.5, [2.0])],
                           np.ones(9))
        tr = oscillator.simulate(t_end=4.0, h=0.01, alpha=-0.1)
        cost.evaluate(oscillator, tr)
