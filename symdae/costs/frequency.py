"""Frequency-domain costs: mismatch of Fourier coefficients of an output against measured ones.

The coefficients are a fixed linear map of the output samples (:mod:`symdae.costs.fourier`), so
dJ/dS = R_c^T dJ/dA + R_s^T dJ/dB is exact and the discrete adjoint gives the exact gradient of
the discrete cost. With a = A / a_ref, b = B / a_ref (``amplitude_scale`` a_ref), P = a^2 + b^2,
r = sqrt(P), rho the line weights and bars for the measured spectrum:

    power      J = 1/4 sum rho (P - Pbar)^2                       the paper's eq. (5)
    amplitude  J = 1/2 sum rho (r - rbar)^2
    complex    J = 1/2 sum rho [(a - abar)^2 + (b - bbar)^2]     phase-aware; needs time data
    log        J = 1/2 sum rho [ln(P + eps) - ln(Pbar + eps)]^2, eps = log_floor^2
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..data.measurement import Measurement
from ..errors import DataError, InputError
from .base import Cost
from .fourier import FourierMap, Spectrum, Window, analysis_lines, fourier_map

__all__ = ["FourierCost", "FourierEvaluation", "KINDS"]

KINDS = ("power", "amplitude", "complex", "log")


@dataclass(frozen=True)
class FourierEvaluation:
    """A frequency-domain cost on one trajectory: J, dJ/dS, both spectra and the scaling.

    J is evaluated on amplitudes divided by ``amplitude_scale``.
    """

    cost: float
    dS: np.ndarray
    simulated: Spectrum
    measured: Spectrum
    kind: str
    amplitude_scale: float

    def to_dict(self) -> dict:
        return {"cost": self.cost, "kind": self.kind, "amplitude_scale": self.amplitude_scale,
                "simulated": self.simulated.to_dict(), "measured": self.measured.to_dict()}


def _amplitudes(data, windows: Sequence[Window]) -> np.ndarray:
    """Given amplitudes: one flat sequence over all lines, or one sequence per window."""
    n = [len(w.lines) for w in windows]
    try:
        flat = np.asarray(data, dtype=float)
    except (TypeError, ValueError):
        flat = None
    if flat is not None and flat.ndim == 1:
        if flat.size != sum(n):
            raise DataError(f"{flat.size} measured amplitudes for {sum(n)} lines "
                            f"({len(windows)} window(s) with {n} lines)")
    else:
        parts = list(data)
        if len(parts) != len(windows):
            raise DataError(f"measured amplitudes for {len(parts)} windows, the analysis has "
                            f"{len(windows)}")
        for k, (p, w) in enumerate(zip(parts, windows)):
            if np.size(p) != len(w.lines):
                raise DataError(f"window {k} {w.label}: {np.size(p)} measured amplitudes for "
                                f"its {len(w.lines)} lines")
        flat = np.concatenate([np.atleast_1d(np.asarray(p, dtype=float)) for p in parts])
    return flat


class FourierCost(Cost):
    """A cost on the Fourier coefficients of one output over an analysis (a list of windows).

    Parameters
    ----------
    output:
        The model output whose spectrum is fitted.
    windows:
        A :class:`Window` or a list of them (each with its interval, shape, correction, lines).
    data:
        The measured spectrum: a :class:`Measurement` (its own sample times; the signal
        ``signal`` or ``output`` goes through the same windows), a :class:`Spectrum`, or given
        amplitudes (one sequence over all lines, or one per window).
    kind:
        ``"power"`` (eq. 5, default), ``"amplitude"``, ``"complex"`` or ``"log"``.
    amplitude_scale:
        a_ref > 0: J is evaluated on A / a_ref (eq. 5 scales by a_ref^-4); ``"data"`` takes the
        largest measured amplitude. Default 1 (J in the output's units).
    quadrature:
        ``"left"`` (default; DFT-exact over whole periods) or ``"trapezoid"``.
    log_floor:
        eps = log_floor^2 of the log cost, in units of a_ref.
    """

    def __init__(self, output: str, windows, data, *, signal: str | None = None,
                 kind: str = "power", amplitude_scale: float | str = 1.0,
                 quadrature: str = "left", log_floor: float = 1e-6):
        if kind not in KINDS:
            raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
        self.output, self.kind, self.quadrature = output, kind, quadrature
        self.windows = [windows] if isinstance(windows, Window) else list(windows)
        if not self.windows:
            raise InputError("a Fourier cost needs at least one window")
        self.measured = self._measured(data, signal or output)
        if kind == "complex" and not self.measured.has_phase:
            raise InputError("the complex (phase-aware) cost needs measured A and B: give time "
                             "data (a Measurement), not amplitudes")
        if isinstance(amplitude_scale, str):
            if amplitude_scale != "data":
                raise InputError(f"amplitude_scale must be a positive number or 'data', got "
                                 f"{amplitude_scale!r}")
            amplitude_scale = float(np.max(self.measured.amplitude))
        a_ref = float(amplitude_scale)
        if not (math.isfinite(a_ref) and a_ref > 0):
            raise InputError(f"amplitude_scale must be positive and finite, got {a_ref!r}")
        floor = float(log_floor)
        if not (math.isfinite(floor) and floor > 0):
            raise InputError(f"log_floor must be positive and finite, got {log_floor!r}")
        self.amplitude_scale, self.log_floor = a_ref, floor
        self._maps: dict = {}    # grid -> FourierMap (a cache; the map is fixed per grid)

    # ------------------------------------------------------------------ data
    def _measured(self, data, signal: str) -> Spectrum:
        if isinstance(data, Measurement):
            if signal not in data.values:
                raise DataError(f"{data.source}: no signal {signal!r} for the spectrum of "
                                f"{self.output!r}; signals are {list(data.values)}")
            fmap = fourier_map(data.t, self.windows, self.quadrature,
                               f"the measurement ({data.source})")
            return fmap.spectrum(data.values[signal])
        ref = analysis_lines(self.windows)
        if isinstance(data, Spectrum):
            amp, A, B = data.amplitude, data.A, data.B
            if amp.shape != ref.frequency.shape:
                raise DataError(f"the measured spectrum has {amp.size} lines, the analysis "
                                f"{ref.frequency.size}")
            if not np.allclose(data.frequency, ref.frequency, rtol=1e-9, atol=0):
                k = int(np.argmax(np.abs(data.frequency - ref.frequency)))
                raise DataError(f"line {k} of the measured spectrum is at "
                                f"{data.frequency[k]:g} Hz, the analysis has "
                                f"{ref.frequency[k]:g} Hz")
        else:
            amp = _amplitudes(data, self.windows)
            A = B = np.full(amp.shape, np.nan)
        bad = np.flatnonzero(~np.isfinite(amp) | (amp < 0))
        if bad.size:
            k = int(bad[0])
            raise DataError(f"measured amplitude of line {k} ({ref.labels[k]}, window "
                            f"{ref.window[k]}) is {float(amp[k])}; amplitudes must be finite and "
                            ">= 0")
        return Spectrum(ref.frequency, np.asarray(A, float), np.asarray(B, float),
                        np.asarray(amp, float), ref.window, ref.weight, ref.labels)

    def fourier_map(self, t: np.ndarray) -> FourierMap:
        """The map on the simulation grid ``t`` (built once per grid)."""
        key = (len(t), float(t[0]), float(t[-1]))
        fmap = self._maps.get(key)
        if fmap is None:
            fmap = fourier_map(t, self.windows, self.quadrature, "the simulation")
            self._maps = {key: fmap}
        return fmap

    def memory(self, sizes, scenario) -> tuple[int, int]:
        """dJ/dS per grid point; in all, the map on the grid (per window, the cosine and sine
        rows of each line over its samples, kept) and, while the largest window's rows are
        built, its phases and the two products before they are joined."""
        rows = [(len(w.lines), math.ceil(w.length / scenario.h) + 1) for w in self.windows]
        kept = sum(16 * n * k for n, k in rows)
        return 8 * sizes.n_s, kept + max(24 * n * k for n, k in rows)

    def spectrum(self, traj) -> Spectrum:
        """The simulated spectrum of ``traj``."""
        return self.fourier_map(traj.t).spectrum(traj.outputs[self.output])

    # ------------------------------------------------------------------ cost
    def details(self, system, traj) -> FourierEvaluation:
        """J, dJ/dS and the simulated and measured spectra."""
        col = self._column(system, self.output)
        fmap = self.fourier_map(traj.t)
        sim = fmap.spectrum(traj.outputs[self.output])
        s = self.amplitude_scale
        rho = fmap.weight
        a, b = sim.A / s, sim.B / s
        if self.kind == "complex":
            ra, rb = a - self.measured.A / s, b - self.measured.B / s
            J = 0.5 * float(np.sum(rho * (ra * ra + rb * rb)))
            ga, gb = rho * ra, rho * rb
        else:
            P = a * a + b * b
            Pbar = (self.measured.amplitude / s) ** 2
            if self.kind == "power":
                e = P - Pbar
                J = 0.25 * float(np.sum(rho * e * e))
                f = rho * e
            elif self.kind == "amplitude":
                r = np.sqrt(P)
                e = r - np.sqrt(Pbar)
                J = 0.5 * float(np.sum(rho * e * e))
                # d r / d a = a / r; at r = 0 the cost has a kink: take the zero subgradient
                f = np.divide(rho * e, r, out=np.zeros_like(r), where=r > 0)
            else:
                eps = self.log_floor ** 2
                e = np.log(P + eps) - np.log(Pbar + eps)
                J = 0.5 * float(np.sum(rho * e * e))
                f = 2.0 * rho * e / (P + eps)
            ga, gb = f * a, f * b
        dS = np.zeros((len(traj.t), system.sizes.n_s))
        fmap.transpose(ga / s, gb / s, dS[:, col])
        return FourierEvaluation(J, dS, sim, self.measured, self.kind, s)

    def evaluate(self, system, traj):
        """J over the windows' lines and dJ/dS, from :meth:`details`."""
        d = self.details(system, traj)
        return d.cost, d.dS

