"""Measured channels on a simulation grid: interpolation, anti-aliased resampling, time offset.

A bench channel has its own sample times in the file's clock; the model runs on a uniform grid
t_0 + k h from its own t = 0. With the time offset d (model time = file time - d):

* ``interpolate``: linear interpolation at the grid times, for channels sampled about as fast as
  the grid (or slower);
* ``resample``: for channels sampled faster than the grid, which carry content above the grid's
  Nyquist frequency 1/(2h) that plain interpolation would fold into the band (a 3.3 kHz
  vibration read every 1 ms shows up at 300 Hz). The channel is first put on a fine grid
  aligned with the simulation's (spacing h/k, k = ceil(rate h), cubic spline; the identity where
  the samples already lie there), then low-pass filtered and decimated by k with
  :func:`scipy.signal.resample_poly` (a zero-phase FIR anti-aliasing filter), which lands
  exactly on the grid times. The filter reaches :data:`EDGE_STEPS` grid steps: a measurement
  that does not extend that far beyond the interval is continued by odd reflection and an
  :class:`AlignmentWarning` says so;
* ``samples``: the channels keep their own sample times (shifted by the offset); the cost then
  compares at those samples, with the model's outputs interpolated to them
  (:meth:`Measurement.align`), so its statistics count the measured samples. The channels must
  share their sample times; samples outside the identified interval are left out;
* ``auto``: ``resample`` where the channel's rate is more than :data:`RESAMPLE_ABOVE` times the
  grid's, else ``samples`` when every channel is kept at its samples and they share their
  times, else ``interpolate``.

The offset is given, or estimated by cross-correlating one channel with a first simulation
(:func:`estimate_offset`: the discrete peak, refined to a small fraction of a step on the
reference's cubic spline) and
reported. A channel that does not cover the identified interval (after the offset) is an error
naming the file, the channel and the missing part.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

# scipy.interpolate, .optimize and .signal are imported where they are used: they take about
# 0.5 s to import, and the command line reads METHODS to build its parsers (--help)
from ..errors import DataError, InputError
from .measurement import Measurement
from .readers import Channel, Recording

__all__ = ["RESAMPLE_ABOVE", "METHODS", "AlignmentWarning", "ChannelAlignment", "OffsetEstimate",
           "Alignment", "align_channel", "estimate_offset", "align_recording"]

RESAMPLE_ABOVE = 1.2
# the anti-aliasing FIR of resample_poly: 2 * 10 k + 1 taps, cut-off at the grid's Nyquist
# frequency; a Kaiser window with beta = 10 keeps the passband ripple below 1e-6 (scipy's
# default beta = 5 leaves 5e-4 on a 20 Hz sine decimated from 10 kHz to 1 kHz)
FILTER_WINDOW = ("kaiser", 10.0)
EDGE_STEPS = 10      # grid steps at each end of a measurement that the filter's start-up reaches
METHODS = ("auto", "samples", "interpolate", "resample")
_TOL = 1e-9


class AlignmentWarning(UserWarning):
    """A measured channel is put on the grid with reduced accuracy at the interval's ends."""


@dataclass(frozen=True)
class ChannelAlignment:
    """How one channel was put on the grid: ``method``, its ``rate`` and the grid's (Hz), the
    decimation factor ``k`` of ``resample`` (1 otherwise) and the ``offset`` (s)."""

    name: str
    method: str
    rate: float
    grid_rate: float
    k: int
    offset: float

    def to_dict(self) -> dict:
        return {"channel": self.name, "method": self.method, "rate_hz": self.rate,
                "grid_rate_hz": self.grid_rate, "decimation": self.k, "offset_s": self.offset}


@dataclass(frozen=True)
class OffsetEstimate:
    """A time offset from cross-correlation: model time = file time - ``offset``;
    ``correlation`` the normalised correlation coefficient at the peak, ``lag`` the peak in
    reference steps (fractional), ``channel`` the channel used."""

    offset: float
    correlation: float
    lag: float
    channel: str

    def to_dict(self) -> dict:
        """The estimate as plain values (for JSON reports)."""
        return {"offset_s": self.offset, "correlation": self.correlation, "lag_steps": self.lag,
                "channel": self.channel}


@dataclass(frozen=True)
class Alignment:
    """The aligned data (a :class:`Measurement` on the grid), per channel how, and the offset
    (with its estimate where it was estimated)."""

    measurement: Measurement
    channels: dict
    offset: float
    estimate: OffsetEstimate | None = None

    def report(self) -> str:
        """Lines for a log: the offset and each channel's method and rates."""
        how = (f"estimated by cross-correlation of {self.estimate.channel!r} "
               f"(coefficient {self.estimate.correlation:.4f})" if self.estimate else "given")
        lines = [f"time offset {self.offset:.9g} s ({how}); model time = file time - offset"]
        for c in self.channels.values():
            if c.method == "samples":
                lines.append(f"  {c.name}: {c.rate:g} Hz, compared at its own samples (the "
                             f"model interpolated from the {c.grid_rate:g} Hz grid)")
                continue
            extra = f", decimated by {c.k} after a low-pass" if c.method == "resample" else ""
            lines.append(f"  {c.name}: {c.rate:g} Hz -> {c.grid_rate:g} Hz grid, "
                         f"{c.method}{extra}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The offset, its estimate and each channel's method as plain values (for JSON
        reports)."""
        return {"offset_s": self.offset,
                "estimate": self.estimate.to_dict() if self.estimate else None,
                "channels": {n: c.to_dict() for n, c in self.channels.items()}}


def _grid(t_grid) -> tuple[np.ndarray, float]:
    t = np.asarray(t_grid, dtype=float)
    if t.ndim != 1 or t.size < 2:
        raise InputError(f"the simulation grid must be 1-D with at least 2 times, got shape "
                         f"{t.shape}")
    step = np.diff(t)
    h = float(np.mean(step))
    if not h > 0 or np.max(np.abs(step - h)) > 1e-6 * h:
        raise InputError("the simulation grid must be uniform (t_0 + k h)")
    return t, h


def _check_covers(ch: Channel, tm: np.ndarray, t: np.ndarray, h: float, offset: float):
    lo, hi = float(t[0]), float(t[-1])
    tol = _TOL * max(h, abs(hi))
    if tm[0] <= lo + tol and tm[-1] >= hi - tol:
        return
    miss = [f"[{lo:g}, {min(hi, tm[0]):g}] s" if tm[0] > lo + tol else "",
            f"[{max(lo, tm[-1]):g}, {hi:g}] s" if tm[-1] < hi - tol else ""]
    raise DataError(f"{ch.source}, channel {ch.name!r}: the samples cover [{tm[0]:g}, "
                    f"{tm[-1]:g}] s of model time (file time - offset {offset:g} s), the "
                    f"identified interval is [{lo:g}, {hi:g}] s: "
                    f"{' and '.join(m for m in miss if m)} not measured; shorten the interval, "
                    "correct the offset or supply longer data")


def align_channel(channel: Channel, t_grid, *, offset: float = 0.0, method: str = "auto") \
        -> tuple[np.ndarray, ChannelAlignment]:
    """The channel's values at the grid times and how they were obtained (see the module;
    ``samples`` is a choice for a whole recording: :func:`align_recording`)."""
    if method not in METHODS or method == "samples":
        raise InputError(f"alignment method of one channel must be one of "
                         f"{[m for m in METHODS if m != 'samples']}, got {method!r}")
    t, h = _grid(t_grid)
    offset = float(offset)
    if not math.isfinite(offset):
        raise InputError(f"the time offset must be finite, got {offset!r}")
    tm = channel.t - offset
    _check_covers(channel, tm, t, h, offset)
    rate, grid_rate = channel.rate, 1.0 / h
    if method == "auto":
        method = "resample" if rate > RESAMPLE_ABOVE * grid_rate else "interpolate"
    if method == "interpolate":
        return np.interp(t, tm, channel.values), \
            ChannelAlignment(channel.name, method, rate, grid_rate, 1, offset)
    k = max(1, math.ceil(rate * h - 1e-6))
    margin = min(t[0] - tm[0], tm[-1] - t[-1]) / h
    if k > 1 and margin < EDGE_STEPS:
        warnings.warn(f"{channel.source}, channel {channel.name!r}: the measurement reaches only "
                      f"{max(margin, 0):.3g} grid steps beyond the identified interval; the "
                      f"anti-aliasing filter's start-up affects up to {EDGE_STEPS} values at "
                      "its ends", AlignmentWarning, stacklevel=2)
    values = _resample(tm, channel.values, t, h, k)
    return values, ChannelAlignment(channel.name, method, rate, grid_rate, k, offset)


def _resample(tm: np.ndarray, x: np.ndarray, t: np.ndarray, h: float, k: int) -> np.ndarray:
    """Low-pass and decimate onto the grid t (see the module); the fine grid starts at a grid
    time so that every k-th fine sample is a grid time."""
    from scipy.interpolate import CubicSpline
    from scipy.signal import resample_poly

    hf = h / k
    j0 = math.ceil((tm[0] - t[0]) / hf - 1e-6)
    j0 = k * math.ceil(j0 / k)
    j1 = math.floor((tm[-1] - t[0]) / hf + 1e-6)
    fine = t[0] + hf * np.arange(j0, j1 + 1)
    xf = CubicSpline(tm, x)(np.clip(fine, tm[0], tm[-1]))
    g0 = -j0 // k                       # grid index 0 within the decimated signal
    if k == 1:
        return xf[g0:g0 + t.size].copy()
    # odd reflection about the end samples: continues a smooth signal's value and slope, so
    # the filter's start-up only shows within EDGE_STEPS grid steps of the ends
    pad = min(2 * EDGE_STEPS * k, xf.size - 1)
    pad -= pad % k
    xp = np.concatenate([2 * xf[0] - xf[pad:0:-1], xf, 2 * xf[-1] - xf[-2:-pad - 2:-1]])
    y = resample_poly(xp, 1, k, window=FILTER_WINDOW)
    return y[pad // k + g0:pad // k + g0 + t.size].copy()


def _uniform(ch: Channel, h: float) -> tuple[np.ndarray, np.ndarray]:
    """The channel on its own uniform grid of spacing h (cubic spline)."""
    from scipy.interpolate import CubicSpline

    n = int(math.floor((ch.t[-1] - ch.t[0]) / h + 1e-9)) + 1
    tu = ch.t[0] + h * np.arange(n)
    return tu, CubicSpline(ch.t, ch.values)(np.clip(tu, ch.t[0], ch.t[-1]))


def estimate_offset(channel: Channel, t_ref, y_ref, *, max_shift: float | None = None) \
        -> OffsetEstimate:
    """The offset d (model time = file time - d) that best lines the channel up with a
    reference signal ``y_ref`` at the uniform times ``t_ref`` (e.g. a first simulation of the
    same output): the peak of their cross-correlation (means removed), refined to the maximum
    of the normalised correlation with the reference's cubic spline shifted continuously.
    ``max_shift`` (s) restricts the search to ``|d| <= max_shift``."""
    from scipy.signal import correlate, correlation_lags

    t, h = _grid(t_ref)
    y = np.asarray(y_ref, dtype=float)
    if y.shape != t.shape or not np.all(np.isfinite(y)):
        raise InputError(f"the reference for the offset of {channel.name!r} needs one finite "
                         f"value per time ({y.shape} values for {t.shape} times)")
    tu, xu = _uniform(channel, h)
    xu, y0 = xu - xu.mean(), y - y.mean()
    c = correlate(xu, y0, mode="full", method="fft")
    lags = correlation_lags(xu.size, y0.size, mode="full")
    offsets = tu[0] + lags * h - t[0]
    if max_shift is not None:
        c = np.where(np.abs(offsets) <= float(max_shift) + _TOL, c, -np.inf)
    i = int(np.argmax(c))
    if not np.isfinite(c[i]) or c[i] <= 0:
        raise DataError(f"{channel.source}, channel {channel.name!r}: no positive correlation "
                        "with the reference (within the allowed shift); give the offset")
    lag = lags[i]
    seg = xu[max(lag, 0):max(lag, 0) + y0.size]
    ref = y0[max(-lag, 0):max(-lag, 0) + seg.size]
    coef = float(c[i] / math.sqrt(float(seg @ seg) * float(ref @ ref) + 1e-300))
    d = _refine(channel, t, y0, float(offsets[i]), h, max_shift)
    return OffsetEstimate(d, coef, float(lag + (d - offsets[i]) / h), channel.name)


def _refine(ch: Channel, t: np.ndarray, y0: np.ndarray, d0: float, h: float,
            max_shift: float | None) -> float:
    """The maximum of the normalised correlation between the channel's samples and the
    reference's cubic spline shifted by d, within two steps of the discrete peak d0. The
    reference (a simulation) is smooth and the channel's samples stay where they are, so
    measurement noise does not make the objective ripple with d; the samples are those inside
    the reference's span, so an event at its start (a release, a step) keeps its weight."""
    from scipy.interpolate import CubicSpline
    from scipy.optimize import minimize_scalar

    spline = CubicSpline(t, y0)
    tm, x = ch.t, ch.values

    def minus_corr(d):
        inside = (tm - d >= t[0]) & (tm - d <= t[-1])
        if inside.sum() < 3:
            return 0.0
        xs, y = x[inside] - x[inside].mean(), spline(tm[inside] - d)
        y = y - y.mean()
        # normalised: the plain correlation also grows with the energy in the overlap, which
        # moves its maximum off the true shift
        return -float(xs @ y) / math.sqrt(float(xs @ xs) * float(y @ y) + 1e-300)

    # two steps either side: the plain correlation's discrete peak may sit a step off the
    # normalised one's
    lo, hi = d0 - 2 * h, d0 + 2 * h
    if max_shift is not None:
        lo, hi = max(lo, -float(max_shift)), min(hi, float(max_shift))
    if not hi > lo:
        return d0
    res = minimize_scalar(minus_corr, bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-6 * h})
    return float(res.x) if res.fun <= minus_corr(d0) else d0


def align_recording(recording: Recording, t_grid, *, offset: float | str = 0.0,
                    reference=None, reference_channel: str | None = None,
                    method: str = "auto", max_shift: float | None = None) -> Alignment:
    """All channels of ``recording`` (named by model output, e.g. after a channel map) on the
    grid. ``offset``: seconds (model time = file time - offset) or ``"estimate"``: then
    ``reference`` is a first simulation (a Trajectory, or ``{output: values}`` on the grid)
    and ``reference_channel`` the channel to correlate (default the first one the reference
    has)."""
    t, _ = _grid(t_grid)
    estimate = None
    if isinstance(offset, str):
        if offset != "estimate":
            raise InputError(f"offset must be a number of seconds or 'estimate', got "
                             f"{offset!r}")
        estimate = _estimate(recording, t, reference, reference_channel, max_shift)
        offset = estimate.offset
    kept = _at_samples(recording, t, float(offset), method)
    if kept is not None:
        return Alignment(*kept, float(offset), estimate)
    values, how = {}, {}
    for name, ch in recording.channels.items():
        values[name], how[name] = align_channel(
            ch, t, offset=offset, method="auto" if method == "samples" else method)
    return Alignment(Measurement(t.copy(), values, source=recording.source), how, float(offset),
                     estimate)


def _at_samples(recording: Recording, t: np.ndarray, offset: float,
                method: str) -> tuple[Measurement, dict] | None:
    """(Measurement at the channels' own times, how) for ``samples`` (or ``auto`` where no
    channel needs resampling and they share their times); None to align on the grid."""
    if method not in ("samples", "auto"):
        return None
    h = float(t[1] - t[0])
    fast = [n for n, c in recording.channels.items() if c.rate > RESAMPLE_ABOVE / h]
    times = recording.common_times()
    if method == "auto" and (fast or times is None):
        return None
    if times is None:
        raise DataError(f"{recording.source}: align 'samples' needs channels that share their "
                        "sample times; these have their own time bases: align 'auto' or "
                        "'interpolate' puts them on the grid")
    tm = times - offset
    tol = _TOL * max(h, abs(float(t[-1])))
    if tm[-1] < t[0] - tol or tm[0] > t[-1] + tol:
        raise DataError(f"{recording.source}: the samples cover [{tm[0]:g}, {tm[-1]:g}] s of "
                        f"model time (file time - offset {offset:g} s), none of the identified "
                        f"interval [{t[0]:g}, {t[-1]:g}] s; correct the offset or the interval")
    how = {n: ChannelAlignment(n, "samples", c.rate, 1.0 / h, 1, offset)
           for n, c in recording.channels.items()}
    values = {n: c.values.copy() for n, c in recording.channels.items()}
    return Measurement(tm, values, source=recording.source), how


def _estimate(recording: Recording, t: np.ndarray, reference, name: str | None,
              max_shift: float | None) -> OffsetEstimate:
    outputs = getattr(reference, "outputs", reference)
    if not hasattr(outputs, "keys"):
        raise InputError("offset='estimate' needs reference= a first simulation (a Trajectory "
                         "or {output: values on the grid})")
    if name is None:
        name = next((n for n in recording.channels if n in outputs), None)
        if name is None:
            raise InputError(f"{recording.source}: none of the channels {recording.names} is "
                             f"an output of the reference ({sorted(outputs)}) to estimate the "
                             "offset with")
    elif name not in outputs:
        raise InputError(f"the reference has no output {name!r} (outputs {sorted(outputs)})")
    t_ref = getattr(reference, "t", t)
    return estimate_offset(recording.channel(name), t_ref, outputs[name], max_shift=max_shift)
