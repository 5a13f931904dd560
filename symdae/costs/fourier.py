"""Fourier coefficients of a sampled output: windows, lines and the fixed linear map y -> (A, B).

An *analysis* is a list of :class:`Window` s. Each window has an interval [t_l, t_u] of length L,
a shape with its amplitude correction g_c, a phase origin tau and its own set of :class:`Line` s.
For line k of window w (the paper's eqs. 3-4, windowed as in its section 5.2):

    A_wk = (2/L) sum_i mu_i eta_w(t_i) y_i cos(phi_wk(t_i))
    B_wk = (2/L) sum_i mu_i eta_w(t_i) y_i sin(phi_wk(t_i))

with phi_wk(t) = 2 pi f_k (t - tau) by default, or any prescribed phase function of time (e.g.
i theta(t) for order tracking against a prescribed crank angle). The quadrature mu is applied to
the samples inside the window: ``left`` (the samples in [t_l, t_u) with mu_i = t_{i+1} - t_i,
the paper's rule; with a rectangular window over whole periods it is the DFT: A - iB =
(2/N) rfft(y)), or ``trapezoid``. Window edges are not snapped to the grid (L stays exact):
eta is evaluated at the samples. With the left rule a window of M steps covers M consecutive
samples wherever its edges fall, so a cosine-sum window (Hann, ...) over whole periods of a
periodic signal is summed exactly even with its edges between samples.

The map depends only on the sample times and the prescribed windows, never on the simulated
state, so it is built once per grid (:func:`fourier_map`) as one dense block per window (only the
samples inside the window), and dJ/dy = R_c^T dJ/dA + R_s^T dJ/dB is exact.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..analysis.quadrature import QUADRATURES
from ..errors import DataError, InputError
from .windows import WindowShape, window_shape

__all__ = ["Line", "Window", "Spectrum", "FourierMap", "fourier_map", "fourier_coefficients",
           "band_lines", "analysis_lines"]

_TOL = 1e-9   # relative tolerance for edges and band limits (of the window length or band)


def finite_number(x, what: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise InputError(f"{what} is not finite ({x!r})")
    return v


@dataclass(frozen=True)
class Line:
    """One spectral line of a window.

    ``frequency`` in Hz (the nominal frequency: plots, reports and the Nyquist check);
    ``weight`` rho >= 0 in the cost; ``phase``: optional prescribed phase function t -> rad
    used instead of 2 pi f (t - origin) (angle-domain order tracking: ``lambda t: i *
    theta(t)``); ``label`` for reports.
    """

    frequency: float
    weight: float = 1.0
    phase: Callable | None = None
    label: str = ""

    def __post_init__(self):
        what = f"line {self.label or self.frequency!r}"
        f = finite_number(self.frequency, f"frequency of {what}")
        if f < 0:
            raise InputError(f"frequency of {what} is negative ({f!r} Hz)")
        w = finite_number(self.weight, f"weight of {what}")
        if w < 0:
            raise InputError(f"weight of {what} is negative ({w!r})")
        if self.phase is not None and not callable(self.phase):
            raise InputError(f"phase of {what} must be a function of time, got {self.phase!r}")
        object.__setattr__(self, "frequency", f)
        object.__setattr__(self, "weight", w)


def band_lines(f_lo: float, f_hi: float, length: float, weights=None) -> tuple:
    """The lines f_k = k / length with f_lo <= f_k <= f_hi (edges included, to 1e-9 of a line
    spacing), the frequency grid of Appendix B. InputError names an empty or reversed band."""
    lo, hi = finite_number(f_lo, "band lower edge"), finite_number(f_hi, "band upper edge")
    L = finite_number(length, "window length")
    band = f"band [{f_lo:g}, {f_hi:g}] Hz"
    if lo < 0 or hi < lo:
        raise InputError(f"{band}: the edges must satisfy 0 <= lower <= upper")
    if not L > 0:
        raise InputError(f"{band}: the window length must be positive, got {L!r}")
    k0, k1 = math.ceil(lo * L - _TOL), math.floor(hi * L + _TOL)
    if k1 < k0:
        raise InputError(f"{band} contains no line k/L of a {L:g} s window (spacing "
                         f"{1 / L:g} Hz; nearest lines {(k1) / L:g} and {k0 / L:g} Hz): widen "
                         "the band or lengthen the window")
    ks = range(max(k0, 0), k1 + 1)
    wts = _weights(weights, len(ks), band)
    return tuple(Line(k / L, w, label=f"{k / L:g} Hz") for k, w in zip(ks, wts))


def _weights(weights, n: int, what: str) -> list:
    if weights is None:
        return [1.0] * n
    w = np.atleast_1d(np.asarray(weights, dtype=float))
    if w.size == 1:
        return [float(w[0])] * n
    if w.size != n:
        raise InputError(f"{what}: {w.size} weights for {n} lines")
    return w.tolist()


@dataclass(frozen=True)
class Window:
    """A window of the analysis: interval [start, end], shape, amplitude correction, lines.

    ``shape``: ``"rectangular"`` (default), ``"hann"``, any ``scipy.signal.get_window`` name or
    tuple, or a callable w(u) on [0, 1]. ``gain``: the amplitude correction g_c (default the
    coherent gain 1/mean(w): 1 rectangular, 2 Hann; pass 1.0 for the uncorrected window).
    ``origin``: the phase origin tau of cos/sin (default absolute time). Build one with
    :meth:`band`, :meth:`at` or :meth:`harmonics`, or pass ``lines`` directly.
    """

    start: float
    end: float
    lines: tuple
    shape: object = "rectangular"
    gain: float | None = None
    origin: float = 0.0
    label: str = ""
    band: tuple | None = None
    _shape: WindowShape = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        name = self.label or f"[{self.start!r}, {self.end!r}] s"
        t_l = finite_number(self.start, f"start of window {name}")
        t_u = finite_number(self.end, f"end of window {name}")
        if not t_u > t_l:
            raise InputError(f"window {name} has a non-positive length ({t_u - t_l:g} s)")
        lines = tuple(self.lines)
        if not lines or not all(isinstance(x, Line) for x in lines):
            raise InputError(f"window {name} needs a non-empty sequence of Line records")
        shape = window_shape(self.shape)
        gain = shape.coherent_gain if self.gain is None else \
            finite_number(self.gain, f"gain of window {name}")
        if not gain > 0:
            raise InputError(f"gain of window {name} must be positive, got {gain!r}")
        object.__setattr__(self, "start", t_l)
        object.__setattr__(self, "end", t_u)
        object.__setattr__(self, "lines", lines)
        object.__setattr__(self, "gain", gain)
        object.__setattr__(self, "origin", finite_number(self.origin, f"origin of window {name}"))
        object.__setattr__(self, "label", self.label or f"[{t_l:g}, {t_u:g}] s")
        object.__setattr__(self, "_shape", shape)

    @property
    def length(self) -> float:
        """The window's length ``end - start`` [s]."""
        return self.end - self.start

    @property
    def resolved_shape(self) -> WindowShape:
        """The window's shape as resolved from ``shape`` (its cosine coefficients, scipy
        spec or callable, and its coherent gain)."""
        return self._shape

    @property
    def shape_name(self) -> str:
        """The name of the window's shape (``rectangular``, ``hann``, a scipy window)."""
        return self._shape.name

    @property
    def frequencies(self) -> np.ndarray:
        """The frequencies of the window's lines [Hz]."""
        return np.array([x.frequency for x in self.lines])

    def eta(self, t: np.ndarray) -> np.ndarray:
        """g_c w((t - t_l) / L) at times t inside the window."""
        return self.gain * self._shape.values((np.asarray(t) - self.start) / self.length,
                                              f"window {self.label}")

    @classmethod
    def over_band(cls, start: float, end: float, f_lo: float, f_hi: float, *, weights=None,
                  **kw) -> Window:
        """The lines k / (end - start) inside [f_lo, f_hi] Hz, edges included."""
        try:
            lines = band_lines(f_lo, f_hi, float(end) - float(start), weights)
        except InputError as exc:
            raise InputError(f"window [{start:g}, {end:g}] s: {exc}") from None
        return cls(start, end, lines, band=(float(f_lo), float(f_hi)), **kw)

    @classmethod
    def at(cls, start: float, end: float, frequencies: Sequence[float], *, weights=None,
           **kw) -> Window:
        """Explicit frequencies in Hz."""
        freqs = list(np.atleast_1d(frequencies))
        wts = _weights(weights, len(freqs), f"window [{start:g}, {end:g}] s")
        return cls(start, end, tuple(Line(f, w, label=f"{f:g} Hz") for f, w in
                                     zip(freqs, wts)), **kw)

    @classmethod
    def harmonics(cls, start: float, end: float, base: float, orders: Sequence[float], *,
                  weights=None, **kw) -> Window:
        """Lines at order * base Hz (e.g. engine orders of a speed in rev/s)."""
        base = finite_number(base, "base frequency")
        orders = list(np.atleast_1d(orders))
        wts = _weights(weights, len(orders), f"window [{start:g}, {end:g}] s")
        return cls(start, end, tuple(Line(o * base, w, label=f"order {o:g}") for o, w in
                                     zip(orders, wts)), **kw)


@dataclass(frozen=True)
class Spectrum:
    """Fourier coefficients of one output, one entry per line (windows concatenated).

    ``A``, ``B`` are NaN where only amplitudes are known (e.g. given order curves).
    """

    frequency: np.ndarray
    A: np.ndarray
    B: np.ndarray
    amplitude: np.ndarray
    window: np.ndarray       # index of the window of each line
    weight: np.ndarray
    labels: tuple

    @property
    def has_phase(self) -> bool:
        """Whether A and B are known (finite), not only the amplitudes."""
        return bool(np.all(np.isfinite(self.A)) and np.all(np.isfinite(self.B)))

    def to_dict(self) -> dict:
        """The spectrum as plain lists (for JSON reports)."""
        return {"frequency_hz": self.frequency.tolist(), "A": self.A.tolist(),
                "B": self.B.tolist(), "amplitude": self.amplitude.tolist(),
                "window": self.window.tolist(), "weight": self.weight.tolist(),
                "labels": list(self.labels)}


@dataclass(frozen=True)
class _Block:
    lines: slice          # rows of this window in the flat line list
    samples: slice        # samples inside the window
    CS: np.ndarray        # (2 lines, samples): (2/L) mu eta [cos(phi); sin(phi)], one matvec

    @property
    def C(self) -> np.ndarray:
        return self.CS[:self.CS.shape[0] // 2]

    @property
    def S(self) -> np.ndarray:
        return self.CS[self.CS.shape[0] // 2:]


@dataclass(frozen=True)
class FourierMap:
    """The linear map y -> (A, B) of an analysis on one sample grid."""

    n_samples: int
    blocks: tuple
    frequency: np.ndarray
    window: np.ndarray
    weight: np.ndarray
    labels: tuple

    @property
    def n_lines(self) -> int:
        """The number of lines over all windows."""
        return len(self.frequency)

    def coefficients(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(A, B) of the samples y (n_samples,)."""
        A, B = np.empty(self.n_lines), np.empty(self.n_lines)
        for b in self.blocks:
            AB = b.CS @ y[b.samples]
            n = len(AB) // 2
            A[b.lines], B[b.lines] = AB[:n], AB[n:]
        return A, B

    def transpose(self, dA: np.ndarray, dB: np.ndarray, out: np.ndarray) -> np.ndarray:
        """out += R_c^T dA + R_s^T dB: the derivative with respect to y of a function of
        (A, B) whose derivatives are dA, dB."""
        for b in self.blocks:
            out[b.samples] += np.concatenate([dA[b.lines], dB[b.lines]]) @ b.CS
        return out

    def spectrum(self, y: np.ndarray) -> Spectrum:
        """The :class:`Spectrum` of the samples ``y`` (on the map's time grid)."""
        A, B = self.coefficients(y)
        return Spectrum(self.frequency, A, B, np.hypot(A, B), self.window, self.weight,
                        self.labels)


def _window_samples(t: np.ndarray, w: Window, rule: str, tol: float):
    """(first, stop) sample indices of the window and their quadrature weights mu.

    left: the samples in [t_l, t_u), mu_i = t_{i+1} - t_i (the next sample may lie beyond t_u:
    a window of M steps then always covers M consecutive samples, so a cosine-sum window over
    whole periods stays exact wherever its edges fall); trapezoid: the samples in [t_l, t_u],
    mu_i = (min(t_{i+1}, t_u) - max(t_{i-1}, t_l)) / 2.
    """
    i0 = int(np.searchsorted(t, w.start - tol, side="left"))
    if rule == "left":
        i1 = int(np.searchsorted(t, w.end - tol, side="left"))
        return i0, i1, t[i0 + 1:i1 + 1] - t[i0:i1]
    i1 = int(np.searchsorted(t, w.end + tol, side="right"))
    ts = t[i0:i1]
    nxt = np.minimum(np.append(ts[1:], t[i1] if i1 < len(t) else ts[-1]), w.end)
    prv = np.maximum(np.insert(ts[:-1], 0, t[i0 - 1] if i0 > 0 else ts[0]), w.start)
    return i0, i1, 0.5 * (nxt - prv)


def fourier_map(t: np.ndarray, windows: Sequence[Window], quadrature: str = "left",
                what: str = "the simulation") -> FourierMap:
    """Build the map for the sample times ``t`` (strictly increasing).

    Every window must lie inside [t[0], t[-1]] and hold at least two samples, and every line
    must lie at or below the Nyquist frequency 1/(2 dt) of the window's samples (dt the largest
    sample spacing there); otherwise DataError names the window, band and line.
    """
    if quadrature not in ("left", "trapezoid"):
        raise InputError(f"quadrature of a Fourier analysis must be 'left' or 'trapezoid', "
                         f"got {quadrature!r} (one of {QUADRATURES} for time-domain costs)")
    t = np.asarray(t, dtype=float)
    windows = list(windows)
    if not windows:
        raise InputError("a Fourier analysis needs at least one window")
    lines = analysis_lines(windows)
    blocks, row = [], 0
    span = t[-1] - t[0]
    tol = _TOL * span / (len(t) - 1)      # "on a sample" means within 1e-9 of a mean spacing
    for k, w in enumerate(windows):
        name = f"window {k} {w.label}" + (f" (band [{w.band[0]:g}, {w.band[1]:g}] Hz)"
                                          if w.band else "")
        if w.length > span + tol:
            raise DataError(f"{name} is {w.length:g} s long, longer than {what} "
                            f"[{t[0]:g}, {t[-1]:g}] s")
        if w.start < t[0] - tol or w.end > t[-1] + tol:
            raise DataError(f"{name} reaches outside {what} [{t[0]:g}, {t[-1]:g}] s")
        i0, i1, mu = _window_samples(t, w, quadrature, tol)
        ts = t[i0:i1]
        if ts.size < 2:
            raise DataError(f"{name} holds {ts.size} sample(s) of {what}; it needs at least 2")
        nyquist = 0.5 / float(np.max(np.diff(t[i0:i1 + 1])))
        for j, line in enumerate(w.lines):
            if line.frequency > nyquist * (1 + _TOL):
                raise DataError(f"line {j} ({line.frequency:g} Hz) of {name} lies above the "
                                f"Nyquist frequency {nyquist:g} Hz of {what} "
                                f"(sample spacing {1 / (2 * nyquist):g} s)")
        amp = (2.0 / w.length) * mu * w.eta(np.clip(ts, w.start, w.end))
        phases = np.empty((len(w.lines), ts.size))
        for j, line in enumerate(w.lines):
            if line.phase is None:
                phases[j] = 2 * np.pi * line.frequency * (ts - w.origin)
            else:
                ph = np.asarray(line.phase(ts), dtype=float)
                if ph.shape != ts.shape or not np.all(np.isfinite(ph)):
                    raise InputError(f"the phase function of line {j} of {name} must return "
                                     f"{ts.size} finite values")
                phases[j] = ph
        n = len(w.lines)
        CS = np.concatenate([amp * np.cos(phases), amp * np.sin(phases)])
        blocks.append(_Block(slice(row, row + n), slice(i0, i1), CS))
        row += n
    return FourierMap(len(t), tuple(blocks), lines.frequency, lines.window, lines.weight,
                      lines.labels)


def analysis_lines(windows: Sequence[Window]) -> Spectrum:
    """The lines of an analysis (frequency, window index, weight, label; coefficients NaN)."""
    freq: list[float] = []
    win: list[int] = []
    wts: list[float] = []
    labels: list[str] = []
    for k, w in enumerate(windows):
        if not isinstance(w, Window):
            raise InputError(f"window {k} must be a Window, got {type(w).__name__}")
        freq.extend(w.frequencies)
        win.extend([k] * len(w.lines))
        wts.extend(x.weight for x in w.lines)
        labels.extend(x.label or f"{x.frequency:g} Hz" for x in w.lines)
    nan = np.full(len(freq), np.nan)
    return Spectrum(np.array(freq), nan, nan.copy(), nan.copy(), np.array(win, dtype=np.int64),
                    np.array(wts), tuple(labels))


def fourier_coefficients(t, y, windows: Sequence[Window], quadrature: str = "left",
                         what: str = "the signal") -> Spectrum:
    """The spectrum of samples y at times t for an analysis (a list of windows)."""
    t = np.asarray(t, dtype=float)
    y = np.asarray(y, dtype=float)
    if y.shape != t.shape:
        raise DataError(f"{what}: {y.size} samples for {t.size} times")
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise DataError(f"{what} is NaN or infinite at sample {bad[0]} (t = {t[bad[0]]:g})")
    if t.ndim != 1 or t.size < 2 or np.any(np.diff(t) <= 0):
        raise DataError(f"{what}: sample times must be strictly increasing")
    return fourier_map(t, windows, quadrature, what).spectrum(y)
