"""Window functions for Fourier coefficients: shapes on [0, 1] and their amplitude correction.

A window of length L starting at t_l weights a sample at t by eta(t) = g_c w(u), u = (t - t_l)/L,
where w is the shape and g_c the amplitude correction. The default g_c is the coherent gain
1/mean(w): with it a sinusoid on a line of the window keeps its amplitude (the paper's g_c = 2
for the Hann window, Appendix B).

Shapes come from ``scipy.signal.windows`` (by name or ``(name, parameters)`` tuple, as
``scipy.signal.get_window`` takes them), or are a callable w(u). scipy evaluates a window only
on M equally spaced points, and symdae needs it at arbitrary u (window edges between samples,
measurements on their own times). Two cases are therefore distinguished once, when the shape is
made:

* cosine sums (rectangular, Hann, Hamming, Blackman, Nuttall, Blackman-Harris, flat top,
  general_cosine, ...): w(u) = sum_k c_k cos(2 pi k u) exactly; the coefficients are read off
  the DFT of scipy's own periodic window, so the shape is evaluated exactly at any u;
* every other scipy window (Tukey, Kaiser, Gaussian, ...) is sampled by scipy itself, which is
  exact at u_j = j / M; the samples of such a window must then be equally spaced with the
  window's edges on them (else InputError names the window).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

__all__ = ["WindowShape", "window_shape", "RECTANGULAR", "HANN"]

_PROBE = 64          # size of the scipy window whose DFT reveals a cosine sum
_MAX_TERMS = 16      # cosine sums with more terms are treated as sampled windows
_GAIN_POINTS = 2**16  # samples for the mean of a non-cosine window (periodic: ~spectral)


@dataclass(frozen=True)
class WindowShape:
    """A window shape w(u) on u in [0, 1] and its coherent gain 1/mean(w).

    ``cosine``: coefficients c_k of w(u) = sum_k c_k cos(2 pi k u) (None if not a cosine sum);
    ``scipy_spec``: what ``scipy.signal.get_window`` takes, for sampled windows;
    ``function``: a user's callable w(u).
    """

    name: str
    coherent_gain: float
    cosine: tuple | None = None
    scipy_spec: object = None
    function: Callable | None = None

    def values(self, u: np.ndarray, what: str = "window") -> np.ndarray:
        """w(u) at positions u in [0, 1] of the window (u = (t - t_l) / L)."""
        u = np.asarray(u, dtype=float)
        if self.cosine is not None:
            w = np.full(u.shape, self.cosine[0])
            for k, c in enumerate(self.cosine[1:], start=1):
                w += c * np.cos(2 * np.pi * k * u)
            return w
        if self.function is not None:
            w = np.asarray(self.function(u), dtype=float)
            if w.shape != u.shape or not np.all(np.isfinite(w)):
                raise InputError(f"{what}: the window function returned "
                                 f"{'shape ' + str(w.shape) if w.shape != u.shape else 'NaN'}"
                                 f" for {u.size} positions")
            return w
        return self._sampled(u, what)

    def _sampled(self, u, what):
        from scipy.signal import get_window

        # scipy's symmetric window of M + 1 points is w(j / M), j = 0..M: exact there only
        if u.size < 2:
            raise InputError(f"{what}: a {self.name} window needs at least 2 samples")
        M = int(round(1.0 / (u[1] - u[0])))
        j = u * M
        jr = np.rint(j)
        if abs(u[0]) > 1e-9 or M < 2 or np.max(np.abs(j - jr)) > 1e-6:
            raise InputError(f"{what}: the {self.name} window is sampled by scipy, which needs "
                             "equally spaced samples with the window's edges on them; put the "
                             "window's start and end on the time grid, or use a cosine-sum "
                             "window (rectangular, hann, hamming, blackman, flattop, ...), "
                             "which symdae evaluates at any time")
        return get_window(self.scipy_spec, M + 1, fftbins=False)[jr.astype(np.int64)]


RECTANGULAR = WindowShape("rectangular", 1.0, cosine=(1.0,))
HANN = WindowShape("hann", 2.0, cosine=(0.5, -0.5))
_ALIASES = {"rectangular": RECTANGULAR, "rect": RECTANGULAR, "boxcar": RECTANGULAR,
            "hann": HANN, "hanning": HANN}


def _spec_name(spec) -> str:
    if isinstance(spec, tuple):
        return f"{spec[0]}{spec[1:]}"
    return str(spec)


def window_shape(spec) -> WindowShape:
    """The shape for ``spec``: a :class:`WindowShape`, ``"rectangular"``, ``"hann"``, any
    window name or ``(name, parameters)`` tuple of ``scipy.signal.get_window``, or a callable
    w(u) on [0, 1]."""
    if isinstance(spec, WindowShape):
        return spec
    if isinstance(spec, str) and spec.lower() in _ALIASES:
        return _ALIASES[spec.lower()]
    if callable(spec):
        u = np.arange(_GAIN_POINTS) / _GAIN_POINTS
        w = np.asarray(spec(u), dtype=float)
        if w.shape != u.shape or not np.all(np.isfinite(w)) or not w.mean() > 0:
            raise InputError("a window function must map an array u in [0, 1] to finite values "
                             "of the same shape with a positive mean")
        return WindowShape(getattr(spec, "__name__", "custom"), 1.0 / float(w.mean()),
                           function=spec)
    if not isinstance(spec, (str, tuple)):
        raise InputError(f"window must be a name, a (name, parameters) tuple of "
                         f"scipy.signal.get_window, a WindowShape or a callable, got {spec!r}")
    from scipy.signal import get_window

    name = _spec_name(spec)
    try:
        probe = get_window(spec, _PROBE, fftbins=True)
    except (ValueError, TypeError) as exc:
        raise InputError(f"unknown window {name!r} ({exc}); use 'rectangular', 'hann' or a "
                         "scipy.signal.windows name such as 'hamming', 'blackman', "
                         "('tukey', 0.5), ('kaiser', 8)") from None
    # scipy's periodic window is w(j / M), j < M; a cosine sum has only a few DFT lines, and
    # then w(u) is known exactly at every u. Confirm on a second, odd size.
    W = np.fft.rfft(probe) / _PROBE
    K = _MAX_TERMS
    cos = np.concatenate([[W[0].real], 2 * W[1:K + 1].real])
    if np.max(np.abs(W[K + 1:])) <= 1e-12 * abs(W[0]) and np.max(np.abs(W.imag)) <= 1e-12:
        cos = cos[:int(np.max(np.flatnonzero(np.abs(cos) > 1e-14 * abs(cos[0])))) + 1]
        M2 = 2 * _PROBE + 1
        u2 = np.arange(M2) / M2
        shape = WindowShape(name, 1.0 / float(cos[0]), cosine=tuple(float(c) for c in cos))
        if np.allclose(shape.values(u2), get_window(spec, M2, fftbins=True), rtol=0,
                       atol=1e-12):
            return shape
    mean = float(np.mean(get_window(spec, _GAIN_POINTS, fftbins=True)))
    if not mean > 0:
        raise InputError(f"window {name!r} has mean {mean:g}; it cannot be amplitude-corrected")
    return WindowShape(name, 1.0 / mean, scipy_spec=spec)
