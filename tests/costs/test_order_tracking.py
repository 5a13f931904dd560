"""Order tracking from measured speed with windows in the crank-angle domain
(symdae.costs.order_tracking and OrderAnalysis(domain="angle")).

References: analytic signals locked to the angle of a linear ramp (theta quadratic in t, written
out by hand in RunUp.angle); pulse times by inverting that angle; the order cost's dJ/dS against
central differences of J in the samples (J is a polynomial in y, so the differences are exact to
round-off at a moderate step).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import brentq

from symdae.costs.order_tracking import SpeedTrace, tacho_pulses
from symdae.costs.orders import OrderAnalysis, OrderCost, RunUp
from symdae.data.measurement import Measurement
from symdae.data.readers import Channel
from symdae.errors import DataError, InputError

RAMP = RunUp(1000.0, 3000.0, 0.0, 2.0)        # 1000 rpm/s
H = 1e-5
T = np.arange(0.0, 2.0 + H / 2, H)
BAND = (1200.0, 2800.0)


def _two_orders(o1, o2, theta):
    """A strong order o1 (amplitude 1) and a weak neighbour o2 (0.1)."""
    return np.cos(o1 * theta + 0.3) + 0.1 * np.cos(o2 * theta + 1.1)


def _errors(analysis, y):
    cu = analysis.curves(T, y)
    return (float(np.max(np.abs(cu.amplitude[0] - 1.0))),
            float(np.max(np.abs(cu.amplitude[1] - 0.1)) / 0.1))


@pytest.mark.parametrize("o1,o2", [(2, 3), (2, 2.5), (6, 6.5)])
def test_angle_windows_keep_two_orders_apart_on_a_ramp(o1, o2):
    """1000 -> 3000 rpm in 2 s: a Hann window in time (angle phase) leaks the strong order
    into the weak one (1 % of the weak order's amplitude for orders 2 and 3, 6 % for half
    orders); the Hann window in angle reads both to <= 1e-5 relative (measured 1e-11)."""
    y = _two_orders(o1, o2, RAMP.angle(T))
    time_dom = OrderAnalysis.over_band(RAMP, BAND, 400, (o1, o2), tracking="angle")
    angle_dom = OrderAnalysis.over_band(RAMP, BAND, 400, (o1, o2), domain="angle")
    assert angle_dom.tracking == "angle"
    strong_t, weak_t = _errors(time_dom, y)
    strong_a, weak_a = _errors(angle_dom, y)
    assert weak_t > 5e-3                      # the leakage the angle windows remove
    assert strong_a <= 1e-5 and weak_a <= 1e-5
    assert weak_a < 1e-6 * weak_t


def test_angle_window_spans_whole_cycles_of_angle():
    an = OrderAnalysis.over_band(RAMP, BAND, 400, (2,), domain="angle", cycles=2)
    for n, w in zip(an.speeds, an.windows()):
        assert RAMP.angle(w.end) - RAMP.angle(w.start) == pytest.approx(8 * np.pi, rel=1e-12)
        tk = RAMP.time_at(n)
        mid = 0.5 * (RAMP.angle(w.start) + RAMP.angle(w.end))
        assert mid == pytest.approx(RAMP.angle(tk), rel=1e-12)
        # on a ramp the window ends sooner after t_k than it starts before it
        assert w.end - tk < tk - w.start
    d = an.to_dict()
    assert d["domain"] == "angle" and d["windows_s"][0] == [an.windows()[0].start,
                                                           an.windows()[0].end]
    with pytest.raises(InputError, match="domain must be one of"):
        OrderAnalysis(RAMP, (2000,), (2,), domain="crank")
    with pytest.raises(InputError, match="speed point 1010 rpm.*reaches outside"):
        OrderAnalysis(RAMP, (1010,), (2,), domain="angle")


def _pulse_times(ppr):
    n = int(RAMP.angle(2.0) * ppr / (2 * np.pi))
    return np.array([0.0] + [brentq(lambda s, k=k: RAMP.angle(s) - 2 * np.pi * k / ppr, 0.0, 2.0,
                                    xtol=1e-15) for k in range(1, n + 1)])


def test_speed_trace_from_pulses_speed_channel_and_sine_pickup():
    """The measured angle of the ramp: from exact pulse times (60 per revolution), from a
    1 kHz speed channel in rpm, and from a 60-tooth sine pickup sampled at 200 kHz (crossings
    interpolated linearly where the sine is straight): the angle to < 1e-6 rad (2.4e-7 for
    the pickup, 1e-11 for the others), and the two orders through angle windows on each to
    <= 1e-5."""
    pulses = _pulse_times(60)
    inner = T[T <= pulses[-1]]
    tc = np.arange(0.0, 2.0 + 5e-4, 1e-3)
    tf = np.arange(0.0, 2.0 + 2.5e-6, 5e-6)
    traces = {
        "pulses": SpeedTrace.from_pulses(pulses, 60),
        "speed": SpeedTrace.from_speed(Channel("n", tc, RAMP.speed(tc), "rpm")),
        "pickup": SpeedTrace.from_tacho(
            Channel("tacho", tf, np.sin(60 * RAMP.angle(tf)), "V"), 60),
    }
    y = _two_orders(2, 3, RAMP.angle(T))
    for name, tr in traces.items():
        tt = inner[(inner >= tr.t0) & (inner <= tr.t1)]
        offset = float(tr.angle(tt[0]) - RAMP.angle(tt[0]))   # the pickup's first crossing
        assert np.max(np.abs(tr.angle(tt) - offset - RAMP.angle(tt))) < 1e-6, name
        assert np.max(np.abs(tr.speed(tt) / RAMP.speed(tt) - 1)) < 1e-5, name
        an = OrderAnalysis.over_band(tr, BAND, 400, (2, 3), domain="angle")
        cu = an.curves(T, y)        # an angle offset shifts the phases, not the amplitudes
        assert np.max(np.abs(cu.amplitude[0] - 1)) <= 1e-5, name
        assert np.max(np.abs(cu.amplitude[1] - 0.1)) <= 1e-6, name
    assert traces["speed"].n0 == pytest.approx(1000.0, rel=1e-12)
    assert traces["speed"].time_at(2000.0) == pytest.approx(1.0, abs=1e-9)


def test_tacho_with_missing_pulses_and_bad_speed_are_named():
    pulses = _pulse_times(60)
    with pytest.raises(DataError, match=r"bench\.mf4, channel 'tacho': the interval from pulse "
                                        r"100 .* is 1\.99 times its neighbours': missing pulse"):
        tf = np.arange(0.0, 2.0, 5e-6)
        square = np.where(np.sin(60 * RAMP.angle(tf)) > 0, 5.0, 0.0)
        theta = RAMP.angle(tf)
        gap = (theta > 2 * np.pi * 100.5 / 60) & (theta < 2 * np.pi * 101.5 / 60)
        square[gap] = 0.0                      # tooth 101 is not seen
        SpeedTrace.from_tacho(Channel("tacho", tf, square, "V", "bench.mf4"), 60)
    with pytest.raises(DataError, match="an extra pulse"):
        SpeedTrace.from_pulses(np.sort(np.append(pulses, 0.5 * (pulses[50] + pulses[51]))), 60)
    with pytest.raises(InputError, match="whole number"):
        SpeedTrace.from_pulses(pulses, 1.5)
    tc = np.linspace(0, 1, 11)
    with pytest.raises(DataError, match=r"channel 'n': speed at sample 0 \(t = 0 s\) is 0"):
        SpeedTrace.from_speed(Channel("n", tc, 1000 * tc, "rpm"))
    with pytest.raises(InputError, match="cannot convert 'mm'"):
        SpeedTrace.from_speed(Channel("n", tc, 1 + tc, "mm"))
    with pytest.raises(DataError, match="2 rising crossings"):
        tacho_pulses(Channel("tacho", tc, np.sin(2 * np.pi * 2 * tc + 0.1)))
    tr = SpeedTrace.from_speed(Channel("n", tc, 1000 + 100 * tc, "rpm"))
    with pytest.raises(InputError, match="4000 rpm is not reached"):
        tr.time_at(4000.0)
    with pytest.raises(DataError, match="reach outside the measured speed"):
        tr.angle([1.5])


def _fake(t, y):
    system = SimpleNamespace(model=SimpleNamespace(output_names=["twist"]),
                             sizes=SimpleNamespace(n_s=1))
    return system, SimpleNamespace(t=t, outputs={"twist": y})


@pytest.mark.parametrize("kind", ["power", "complex", "log"])
def test_order_cost_gradient_with_angle_windows(kind):
    """dJ/dS of the order cost on angle windows of a measured speed trace, against central
    differences of J along random directions of the samples (J is a polynomial in the samples
    for power and complex, smooth for log; step 1e-4 of the signal)."""
    h = 5e-5
    t = np.arange(0.0, 2.0 + h / 2, h)
    tc = np.arange(0.0, 2.0 + 5e-4, 1e-3)
    trace = SpeedTrace.from_speed(Channel("n", tc, RAMP.speed(tc), "rpm"))
    an = OrderAnalysis.over_band(trace, BAND, 400, (2, 3), weights=(1.0, 0.5), domain="angle")
    rng = np.random.default_rng(1)
    meas = Measurement(t, {"twist": _two_orders(2, 3, RAMP.angle(t))})
    cost = OrderCost("twist", an, meas, kind=kind, amplitude_scale="data")
    y = _two_orders(2.0, 3.0, RAMP.angle(t) + 0.2) * 1.3 + 0.01 * rng.standard_normal(t.size)
    system, traj = _fake(t, y)
    J, dS = cost.evaluate(system, traj)
    assert J > 0 and dS.shape == (t.size, 1)
    for _ in range(3):
        v = rng.standard_normal(t.size)
        eps = 1e-4
        up = cost.evaluate(*_fake(t, y + eps * v))[0]
        dn = cost.evaluate(*_fake(t, y - eps * v))[0]
        fd = (up - dn) / (2 * eps)
        assert fd == pytest.approx(float(dS[:, 0] @ v), rel=1e-7, abs=1e-12 * abs(J))
