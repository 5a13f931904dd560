"""Order tracking from measured speed, with windows in the crank-angle domain.

A bench run-up has no prescribed ramp: the crank angle comes from a tacho (pulses per
revolution) or a measured speed channel (:class:`SpeedTrace`, a drop-in for
:class:`~symdae.costs.orders.RunUp`: angle, speed, the time a speed is reached, windows).

During a ramp a Hann window in *time* is not a Hann window in *angle*: seen in theta it is
skewed by the changing speed, and the orders of a cycle-periodic signal, orthogonal over whole
cycles of theta, leak into each other (1.4e-3 of order 2 into order 3, 1.6e-2 into order 2.5, on
a 1000 -> 3000 rpm ramp in 2 s). :class:`AngleWindow` takes the window in theta instead,

    A_i = (2 / Theta) int g_c w((theta - theta_l) / Theta) y cos(i theta) d theta
        = (2 / Theta) int g_c w(u(theta(t))) y(t) cos(i theta(t)) theta'(t) dt,

summed on the simulation's time samples with the left rule and the exact theta'(t) (the
d theta weights), so no resampling is needed and the map y -> (A, B) stays a fixed linear map
(the order cost's gradient stays exact). Over ``cycles`` four-stroke cycles (Theta = 4 pi
cycles) orders a multiple of 1/cycles apart are orthogonal, and since the integrand vanishes
with its first derivatives at the window's ends (Hann) the left rule is accurate far beyond
first order: two orders read to ~1e-9.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.interpolate import CubicSpline, PPoly
from scipy.optimize import brentq

from ..data.readers import Channel
from ..data.units import unit_factor
from ..errors import DataError, InputError
from .fourier import Line, Window

__all__ = ["SpeedTrace", "AngleWindow", "angle_window", "angle_window_fits", "tacho_pulses",
           "DOMAINS"]

DOMAINS = ("time", "angle")
_TOL = 1e-9
MISSING_PULSE_RATIO = 1.5    # an interval this much longer than its neighbours' is a gap


def tacho_pulses(channel: Channel, *, threshold: float | None = None) -> np.ndarray:
    """The times of the rising crossings of ``threshold`` (default: halfway between the
    channel's extremes), linearly interpolated between samples (exact to O(dt^3) for a sine
    pickup whose crossing lies where it is straight)."""
    x = channel.values
    thr = 0.5 * (float(x.min()) + float(x.max())) if threshold is None else float(threshold)
    i = np.flatnonzero((x[:-1] < thr) & (x[1:] >= thr))
    if i.size < 4:
        raise DataError(f"{channel.source}, channel {channel.name!r}: {i.size} rising crossings "
                        f"of {thr:g} {channel.unit}; a tacho needs at least 4 pulses")
    frac = (thr - x[i]) / (x[i + 1] - x[i])
    return channel.t[i] + frac * (channel.t[i + 1] - channel.t[i])


def _check_pulses(times: np.ndarray, where: str) -> None:
    """DataError naming the first pulse interval much longer (a missing pulse) or shorter (an
    extra pulse) than the median of its neighbours."""
    d = np.diff(times)
    if np.any(d <= 0):
        k = int(np.flatnonzero(d <= 0)[0]) + 1
        raise DataError(f"{where}: pulse {k} (t = {times[k]:g} s) is not after pulse {k - 1}")
    n = d.size
    for k in range(n):
        nb = np.concatenate([d[max(0, k - 4):k], d[k + 1:k + 5]])
        if nb.size == 0:
            continue
        ref = float(np.median(nb))
        ratio = d[k] / ref
        if ratio > MISSING_PULSE_RATIO or ratio < 1 / MISSING_PULSE_RATIO:
            what = "missing pulse(s)" if ratio > 1 else "an extra pulse"
            raise DataError(f"{where}: the interval from pulse {k} (t = {times[k]:.9g} s) to "
                            f"pulse {k + 1} is {ratio:.3g} times its neighbours': {what}; "
                            "repair the tacho signal or give a speed channel")


@dataclass(frozen=True, eq=False)
class SpeedTrace:
    """A measured run-up: the crank angle theta(t) (rad, theta(t0) = ``angle0``) as a spline
    over [t0, t1], its rate and the speed in rpm. Build with :meth:`from_tacho`,
    :meth:`from_pulses` or :meth:`from_speed`; used wherever a :class:`RunUp` is (the order
    analysis), with the model's time (apply the alignment's offset first)."""

    theta: PPoly
    source: str = "measured"

    @classmethod
    def from_pulses(cls, times, pulses_per_rev: int, *, angle0: float = 0.0,
                    source: str = "tacho pulses") -> SpeedTrace:
        """Pulse times of a tacho with ``pulses_per_rev`` equally spaced pulses: theta =
        angle0 + 2 pi k / pulses_per_rev at pulse k, a cubic spline through them (exact for a
        linear ramp, whose angle is quadratic)."""
        ppr = int(pulses_per_rev)
        if ppr != pulses_per_rev or ppr < 1:
            raise InputError(f"pulses per revolution must be a whole number >= 1, got "
                             f"{pulses_per_rev!r}")
        times = np.asarray(times, dtype=float)
        if times.ndim != 1 or times.size < 4 or not np.all(np.isfinite(times)):
            raise DataError(f"{source}: needs at least 4 finite pulse times")
        _check_pulses(times, source)
        theta = float(angle0) + 2 * np.pi * np.arange(times.size) / ppr
        return cls(CubicSpline(times, theta), source)

    @classmethod
    def from_tacho(cls, channel: Channel, pulses_per_rev: int, *, threshold=None,
                   angle0: float = 0.0) -> SpeedTrace:
        """A tacho channel (pulse train or sine pickup): its rising crossings of
        ``threshold``, then :meth:`from_pulses`."""
        where = f"{channel.source}, channel {channel.name!r}"
        return cls.from_pulses(tacho_pulses(channel, threshold=threshold), pulses_per_rev,
                               angle0=angle0, source=where)

    @classmethod
    def from_speed(cls, channel: Channel, *, unit: str | None = None,
                   angle0: float = 0.0) -> SpeedTrace:
        """A speed channel (its unit, else ``unit``, else rpm): theta the integral of its
        cubic spline."""
        where = f"{channel.source}, channel {channel.name!r}"
        omega = channel.values * unit_factor(unit or channel.unit or "rpm", "rad/s", where)
        bad = np.flatnonzero(omega <= 0)
        if bad.size:
            k = int(bad[0])
            raise DataError(f"{where}: speed at sample {k} (t = {channel.t[k]:g} s) is "
                            f"{channel.values[k]:g}; the order analysis needs a positive speed")
        theta = CubicSpline(channel.t, omega).antiderivative()
        return cls(_shifted(theta, float(angle0)), where)

    # ---------------------------------------------------------------- RunUp interface
    @property
    def t0(self) -> float:
        """The trace's first time [s] (model time)."""
        return float(self.theta.x[0])

    @property
    def t1(self) -> float:
        """The trace's last time [s] (model time)."""
        return float(self.theta.x[-1])

    @property
    def n0(self) -> float:
        """The speed at the trace's first time [rpm]."""
        return float(self.speed(self.t0))

    @property
    def n1(self) -> float:
        """The speed at the trace's last time [rpm]."""
        return float(self.speed(self.t1))

    def _inside(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        tol = _TOL * max(1.0, abs(self.t1))
        if np.any(t < self.t0 - tol) or np.any(t > self.t1 + tol):
            raise DataError(f"{self.source}: times [{np.min(t):g}, {np.max(t):g}] s reach "
                            f"outside the measured speed [{self.t0:g}, {self.t1:g}] s")
        return np.clip(t, self.t0, self.t1)

    def angle(self, t) -> np.ndarray:
        """theta(t) in rad."""
        return self.theta(self._inside(t))

    def angle_rate(self, t) -> np.ndarray:
        """d theta / dt in rad/s."""
        return self.theta(self._inside(t), 1)

    def speed(self, t) -> np.ndarray:
        """n(t) in rpm."""
        return self.angle_rate(t) * (30.0 / np.pi)

    def time_at(self, n_rpm: float) -> float:
        """The first time the speed reaches n rpm."""
        n = float(n_rpm)
        roots = self.theta.derivative().solve(n * np.pi / 30.0, extrapolate=False)
        roots = roots[np.isfinite(roots)]
        if roots.size == 0:
            raise InputError(f"speed point {n:g} rpm is not reached in {self.source} "
                             f"(speeds {self.n0:g} to {self.n1:g} rpm at the ends)")
        return float(np.min(roots))

    def time_at_angle(self, theta: float) -> float:
        """The time the angle reaches ``theta`` (the angle increases: positive speed)."""
        roots = self.theta.solve(float(theta), extrapolate=False)
        roots = roots[np.isfinite(roots)]
        if roots.size == 0:
            raise InputError(f"angle {theta:g} rad lies outside {self.source} "
                             f"([{float(self.theta(self.t0)):g}, {float(self.theta(self.t1)):g}]"
                             " rad)")
        return float(np.min(roots))

    def window(self, n_rpm: float, cycles: int = 2) -> tuple[float, float]:
        """The time-domain window of a speed point, as RunUp's: t_k -/+ cycles / (n / 60)."""
        half = cycles / (float(n_rpm) / 60.0)
        tk = self.time_at(n_rpm)
        return tk - half, tk + half

    def fits(self, n_rpm: float, cycles: int = 2) -> bool:
        """Whether the window of ``cycles`` four-stroke cycles centred at ``n_rpm`` lies
        inside the trace."""
        t_l, t_u = self.window(n_rpm, cycles)
        return t_l >= self.t0 - _TOL * self.t1 and t_u <= self.t1 + _TOL * self.t1


def _shifted(spline, c: float):
    """spline + c (a PPoly: add c to the constant coefficient)."""
    coef = spline.c.copy()
    coef[-1] += c
    return PPoly.construct_fast(coef, spline.x, spline.extrapolate)


def _angle_rate(tracker, t) -> np.ndarray:
    if hasattr(tracker, "angle_rate"):
        return tracker.angle_rate(t)
    return tracker.speed(t) * (np.pi / 30.0)


def _time_at_angle(tracker, theta: float, guess: float, span: float) -> float:
    if hasattr(tracker, "time_at_angle"):
        return tracker.time_at_angle(theta)
    f = lambda s: float(tracker.angle(s)) - theta      # noqa: E731 (brentq's callable)
    lo, hi = guess - span, guess + span
    for _ in range(60):                 # the angle increases: widen until it brackets
        if f(lo) <= 0 <= f(hi):
            return brentq(f, lo, hi, xtol=1e-15 * max(1.0, abs(guess)), rtol=1e-15)
        lo, hi = guess - 2 * (guess - lo), guess + 2 * (hi - guess)
    raise InputError(f"angle {theta:g} rad is never reached by the run-up")


@dataclass(frozen=True)
class AngleWindow(Window):
    """A window in crank angle: [theta_start, theta_start + theta_span] of ``tracker``'s
    angle, with start/end the times it is crossed. ``eta`` carries the d theta weight
    theta'(t) L / Theta, so the Fourier map's (2 / L) mu eta is (2 / Theta) mu theta' g_c w(u),
    u = (theta(t) - theta_start) / Theta (see the module)."""

    tracker: Any = None           # anything with angle(t): a SpeedTrace, a RunUp
    theta_start: float = 0.0
    theta_span: float = 1.0

    def eta(self, t: np.ndarray) -> np.ndarray:
        """The weight of the Fourier map at the times ``t`` (see the class)."""
        t = np.asarray(t, dtype=float)
        u = np.clip((self.tracker.angle(t) - self.theta_start) / self.theta_span, 0.0, 1.0)
        w = self.resolved_shape.values(u, f"window {self.label}")
        return self.gain * w * _angle_rate(self.tracker, t) * (self.length / self.theta_span)


@dataclass(frozen=True)
class _OrderAngle:
    """t -> i theta(t) of a tracker (a class, so it pickles)."""

    tracker: object
    order: float

    def __call__(self, t):
        return self.order * self.tracker.angle(t)


def angle_window(tracker, n_rpm: float, orders, weights, cycles: int = 2, shape="hann",
                 gain=None) -> AngleWindow:
    """The angle-domain window of speed point n: ``cycles`` four-stroke cycles (4 pi cycles
    rad) of the tracker's angle centred where the speed reaches n, one line per order with the
    phase i theta(t)."""
    n = float(n_rpm)
    tk = tracker.time_at(n)
    span = 4 * np.pi * cycles
    th_c = float(tracker.angle(tk))
    half_t = cycles / (n / 60.0)
    t_l = _time_at_angle(tracker, th_c - span / 2, tk - half_t, half_t)
    t_u = _time_at_angle(tracker, th_c + span / 2, tk + half_t, half_t)
    lines = tuple(Line(i * n / 60.0, w, label=f"order {i:g} at {n:g} rpm",
                       phase=_OrderAngle(tracker, i)) for i, w in zip(orders, weights))
    w = AngleWindow(t_l, t_u, lines, shape=shape, gain=gain, label=f"{n:g} rpm",
                    tracker=tracker, theta_start=th_c - span / 2, theta_span=span)
    if w.resolved_shape.cosine is None and w.resolved_shape.function is None:
        raise InputError(f"an angle-domain window needs a cosine-sum or callable shape "
                         f"(hann, hamming, blackman, ...), got {w.shape_name!r}")
    return w


def angle_window_fits(tracker, n_rpm: float, cycles: int) -> tuple[bool, tuple]:
    """Whether the angle window of speed point n lies inside the run-up, and its times."""
    try:
        w = angle_window(tracker, n_rpm, (1.0,), (1.0,), cycles)
    except (InputError, DataError):
        return False, (math.nan, math.nan)
    lo, hi = sorted((tracker.t0, tracker.t1))
    ok = w.start >= lo - _TOL * abs(hi) and w.end <= hi + _TOL * abs(hi)
    return ok, (w.start, w.end)
