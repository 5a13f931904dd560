"""Engine-order analysis in a run-up (frequency-domain paper, section 5.2, Appendix B).

During a run-up the speed n rises from n0 to n1 rpm on [t0, t1] (:class:`RunUp`). For a speed
point n_s the paper takes a Hann window (g_c = 2) of two four-stroke cycles centred where the
ramp reaches n_s,

    t_k(n) = (n0 t1 - n1 t0 + n (t0 - t1)) / (n0 - n1),   [t_l, t_u] = t_k -/+ 2/n  (n in rev/s),

and the Fourier coefficients of order i at omega = 2 pi i n_s (the window's normalisation 2/L,
absolute-time phase). Appendix B: over two whole cycles a Hann window leaks only into the half-
cycle bins, so neighbouring orders do not contaminate order i of a cycle-periodic signal.

:class:`OrderAnalysis` is the list of those windows (one per speed point, one line per order),
so order costs are :class:`~symdae.costs.frequency.FourierCost` s on it (:class:`OrderCost`): the
map y -> (A, B) is fixed by the prescribed ramp, never by the simulated speed, so dJ/dS and the
adjoint gradient stay exact. Optional angle-domain tracking replaces 2 pi i n_s t by i theta(t),
theta the prescribed angle of the ramp: it removes the chirp within a window (the phase error
(1/2) (d omega_i/dt) (2/n)^2 of the fixed frequency, 0.085 rad at 300 rpm/s, order 6, 4000 rpm).
``domain="angle"`` also takes the window in crank angle (d theta weights), which keeps the orders
orthogonal during a ramp, and a measured speed (tacho or speed channel) can replace the ramp:
:mod:`symdae.costs.order_tracking`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..data.measurement import Measurement
from ..errors import DataError, InputError
from .fourier import Line, Spectrum, Window, analysis_lines, finite_number as _number, fourier_map
from .frequency import FourierCost
from .order_tracking import DOMAINS, angle_window, angle_window_fits

__all__ = ["RunUp", "OrderAnalysis", "OrderCurves", "OrderCost", "TRACKING"]

TRACKING = ("frequency", "angle")
_TOL = 1e-9


@dataclass(frozen=True)
class RunUp:
    """A run-up ramp: ``n0`` rpm until ``t0``, linearly to ``n1`` rpm at ``t1`` (s), then
    ``n1``; the prescribed angle theta(t) = 2 pi int_0^t n/60 dt (theta(0) = 0)."""

    n0: float
    n1: float
    t0: float
    t1: float

    def __post_init__(self):
        for name in ("n0", "n1", "t0", "t1"):
            object.__setattr__(self, name, _number(getattr(self, name), f"run-up {name}"))
        if not self.t1 > self.t0:
            raise InputError(f"run-up: t1 ({self.t1:g} s) must be after t0 ({self.t0:g} s)")
        if self.n0 <= 0 or self.n1 <= 0 or self.n0 == self.n1:
            raise InputError(f"run-up: speeds n0 = {self.n0:g}, n1 = {self.n1:g} rpm must be "
                             "positive and different")

    @classmethod
    def of(cls, params: Mapping, names: Sequence[str] = ("n0", "n1", "t0", "t1")) -> RunUp:
        """The ramp from a model's parameter values (``{name: value}``)."""
        missing = [k for k in names if k not in params]
        if missing:
            raise InputError(f"run-up parameters {missing} are not given (have "
                             f"{sorted(params)})")
        return cls(*(params[k] for k in names))

    @property
    def rate(self) -> float:
        """Ramp rate in rpm/s."""
        return (self.n1 - self.n0) / (self.t1 - self.t0)

    def speed(self, t) -> np.ndarray:
        """n(t) in rpm."""
        t = np.asarray(t, dtype=float)
        return self.n0 + self.rate * (np.clip(t, self.t0, self.t1) - self.t0)

    def angle(self, t) -> np.ndarray:
        """theta(t) = 2 pi int_0^t n/60 in rad (the model's prescribed angle)."""
        t = np.asarray(t, dtype=float)
        a = 2 * np.pi * self.rate / 60.0          # rad/s^2 on the ramp
        ramp = np.maximum(t - self.t0, 0.0) ** 2 - np.maximum(t - self.t1, 0.0) ** 2
        return 2 * np.pi * self.n0 / 60.0 * t + 0.5 * a * ramp

    def time_at(self, n_rpm: float) -> float:
        """t_k(n): when the ramp reaches n rpm (the paper's window centre)."""
        n = _number(n_rpm, "speed point")
        lo, hi = sorted((self.n0, self.n1))
        if not lo - _TOL * hi <= n <= hi + _TOL * hi:
            raise InputError(f"speed point {n:g} rpm lies outside the run-up "
                             f"[{self.n0:g}, {self.n1:g}] rpm")
        return (self.n0 * self.t1 - self.n1 * self.t0 + n * (self.t0 - self.t1)) / \
            (self.n0 - self.n1)

    def window(self, n_rpm: float, cycles: int = 2) -> tuple[float, float]:
        """The analysis window of speed point n: t_k(n) -/+ ``cycles`` four-stroke cycles
        (2 revolutions each) / 2, i.e. t_k -/+ cycles / (n / 60)."""
        half = cycles / (_number(n_rpm, "speed point") / 60.0)
        tk = self.time_at(n_rpm)
        return tk - half, tk + half

    def fits(self, n_rpm: float, cycles: int = 2) -> bool:
        """Whether the window of speed point n lies inside the ramp [t0, t1]."""
        t_l, t_u = self.window(n_rpm, cycles)
        lo, hi = sorted((self.t0, self.t1))
        return t_l >= lo - _TOL * hi and t_u <= hi + _TOL * hi


@dataclass(frozen=True)
class _OrderPhase:
    """t -> i theta(t): the angle-domain phase of order i (a class, so it pickles)."""

    runup: RunUp
    order: float

    def __call__(self, t):
        return self.order * self.runup.angle(t)


@dataclass(frozen=True)
class OrderCurves:
    """Order amplitudes against speed: ``amplitude[k, s]`` of order ``orders[k]`` at
    ``speeds[s]`` rpm (A, B the coefficients; NaN for given amplitudes)."""

    speeds: np.ndarray
    orders: tuple
    amplitude: np.ndarray
    A: np.ndarray
    B: np.ndarray

    def order(self, i: float) -> np.ndarray:
        """The amplitude curve of order ``i`` over the speeds."""
        if i not in self.orders:
            raise InputError(f"order {i:g} is not analysed (orders {list(self.orders)})")
        return self.amplitude[self.orders.index(i)]

    def spectrum(self, windows) -> Spectrum:
        """The flat spectrum (speed-major, as the analysis' lines) for a FourierCost."""
        ref = analysis_lines(windows)
        return Spectrum(ref.frequency, self.A.T.ravel(), self.B.T.ravel(),
                        self.amplitude.T.ravel(), ref.window, ref.weight, ref.labels)

    def to_dict(self) -> dict:
        """Speeds, orders and amplitudes as plain lists (for JSON reports)."""
        return {"speeds_rpm": self.speeds.tolist(), "orders": list(self.orders),
                "amplitude": self.amplitude.tolist()}


@dataclass(frozen=True)
class OrderAnalysis:
    """Orders of a run-up at speed points: one Hann window of ``cycles`` four-stroke cycles
    (2 revolutions each) per speed, centred at t_k(n), with one line per order.

    ``speeds`` in rpm; ``orders`` (e.g. (6,) or (2, 4, 6, 8)); ``weights`` rho per order;
    ``tracking``: ``"frequency"`` (the paper: cos(2 pi i n_s t)) or ``"angle"``
    (cos(i theta(t)) with the ramp's prescribed angle); ``shape``/``gain`` of the window
    (Hann with g_c = 2 by default); ``domain``: ``"time"`` (the window in time) or
    ``"angle"`` (the window in crank angle with d theta weights, which keeps the orders
    orthogonal during a ramp; implies angle tracking; see
    :mod:`symdae.costs.order_tracking`). ``runup``: a :class:`RunUp` or a measured
    :class:`~symdae.costs.order_tracking.SpeedTrace`. Build with :meth:`over_band`.
    """

    runup: RunUp
    speeds: tuple
    orders: tuple
    weights: tuple = ()
    tracking: str = "frequency"
    cycles: int = 2
    shape: object = "hann"
    gain: float | None = None
    domain: str = "time"

    def __post_init__(self):
        speeds = tuple(_number(n, "speed point") for n in np.atleast_1d(self.speeds))
        orders = tuple(_number(i, "order") for i in np.atleast_1d(self.orders))
        if not speeds or not orders:
            raise InputError("an order analysis needs at least one speed point and one order")
        if any(i <= 0 for i in orders) or len(set(orders)) != len(orders):
            raise InputError(f"orders must be positive and distinct, got {list(orders)}")
        weights = tuple(self.weights) or (1.0,) * len(orders)
        if len(weights) != len(orders):
            raise InputError(f"{len(weights)} weights for {len(orders)} orders {list(orders)}")
        weights = tuple(_number(w, f"weight of order {i:g}") for w, i in zip(weights, orders))
        if any(w < 0 for w in weights):
            raise InputError(f"order weights must be >= 0, got {list(weights)}")
        if self.tracking not in TRACKING:
            raise InputError(f"tracking must be one of {TRACKING}, got {self.tracking!r}")
        if self.domain not in DOMAINS:
            raise InputError(f"domain must be one of {DOMAINS}, got {self.domain!r}")
        if self.domain == "angle":      # a window in angle has the angle's phase
            object.__setattr__(self, "tracking", "angle")
        if isinstance(self.cycles, bool) or int(self.cycles) != self.cycles or self.cycles < 1:
            raise InputError(f"cycles must be a whole number >= 1, got {self.cycles!r}")
        r = self.runup
        for n in speeds:
            if self.domain == "angle":
                ok, (t_l, t_u) = angle_window_fits(r, n, int(self.cycles))
            else:
                ok = r.fits(n, self.cycles)
                t_l, t_u = r.window(n, self.cycles) if not ok else (0.0, 0.0)
            if not ok:
                raise InputError(f"the window of speed point {n:g} rpm, [{t_l:.6g}, {t_u:.6g}] "
                                 f"s, reaches outside the ramp [{r.t0:g}, {r.t1:g}] s: choose "
                                 "the band inside the run-up")
        object.__setattr__(self, "speeds", speeds)
        object.__setattr__(self, "orders", orders)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "cycles", int(self.cycles))

    @classmethod
    def over_band(cls, runup: RunUp, band_rpm: tuple, step_rpm: float, orders, **kw) \
            -> OrderAnalysis:
        """Speed points every ``step_rpm`` in ``band_rpm`` = (lo, hi), both edges included."""
        lo, hi = (_number(x, "band edge") for x in band_rpm)
        step = _number(step_rpm, "speed step")
        if not (0 < lo <= hi) or not step > 0:
            raise InputError(f"band [{lo:g}, {hi:g}] rpm with step {step:g} rpm: need "
                             "0 < lower <= upper and a positive step")
        k = int(math.floor((hi - lo) / step + _TOL))
        return cls(runup, tuple(lo + step * np.arange(k + 1)), orders, **kw)

    @property
    def n_speeds(self) -> int:
        """The number of speed points (one window each)."""
        return len(self.speeds)

    def windows(self) -> list:
        """One :class:`Window` per speed point with one :class:`Line` per order."""
        if self.domain == "angle":
            return [angle_window(self.runup, n, self.orders, self.weights, self.cycles,
                                 self.shape, self.gain) for n in self.speeds]
        out = []
        for n in self.speeds:
            t_l, t_u = self.runup.window(n, self.cycles)
            lines = tuple(
                Line(i * n / 60.0, w, label=f"order {i:g} at {n:g} rpm",
                     phase=_OrderPhase(self.runup, i) if self.tracking == "angle" else None)
                for i, w in zip(self.orders, self.weights))
            out.append(Window(t_l, t_u, lines, shape=self.shape, gain=self.gain,
                              label=f"{n:g} rpm"))
        return out

    def curves(self, t, y, quadrature: str = "left", what: str = "the signal") -> OrderCurves:
        """Order amplitudes of samples y at times t."""
        t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
        if y.shape != t.shape:
            raise DataError(f"{what}: {y.size} samples for {t.size} times")
        spec = fourier_map(t, self.windows(), quadrature, what).spectrum(y)
        return self.curves_from_spectrum(spec)

    def curves_from_spectrum(self, spec: Spectrum) -> OrderCurves:
        """The order curves of a spectrum over this analysis' :meth:`windows` (its lines
        speed by speed, the orders within each speed, as :meth:`windows` lists them)."""
        shape = (self.n_speeds, len(self.orders))
        return OrderCurves(np.array(self.speeds), self.orders,
                           spec.amplitude.reshape(shape).T.copy(), spec.A.reshape(shape).T.copy(),
                           spec.B.reshape(shape).T.copy())

    def to_dict(self) -> dict:
        """The analysis' settings and windows as plain values (for JSON reports)."""
        r = self.runup
        return {"runup": {"n0_rpm": r.n0, "n1_rpm": r.n1, "t0": r.t0, "t1": r.t1},
                "speeds_rpm": list(self.speeds), "orders": list(self.orders),
                "weights": list(self.weights), "tracking": self.tracking,
                "cycles": self.cycles, "window": str(self.shape), "domain": self.domain,
                "windows_s": [[w.start, w.end] for w in self.windows()]}


class OrderCost(FourierCost):
    """A cost (eq. 5 by default) on the orders of ``output`` over an :class:`OrderAnalysis`.

    ``data``: a :class:`~symdae.data.Measurement` (time data through the same windows),
    :class:`OrderCurves` (e.g. from a measured run-up), or amplitudes of shape
    (n_orders, n_speeds). Other keywords as :class:`FourierCost` (``kind``,
    ``amplitude_scale``, ``quadrature``).
    """

    def __init__(self, output: str, analysis: OrderAnalysis, data, **kw):
        if not isinstance(analysis, OrderAnalysis):
            raise InputError(f"an order cost needs an OrderAnalysis, got "
                             f"{type(analysis).__name__}")
        self.analysis = analysis
        windows = analysis.windows()
        if isinstance(data, OrderCurves):
            self._check_curves(data)
            data = data.spectrum(windows)
        elif not isinstance(data, (Measurement, Spectrum)):
            amp = np.asarray(data, dtype=float)
            want = (len(analysis.orders), analysis.n_speeds)
            if amp.shape != want:
                raise DataError(f"order amplitudes have shape {amp.shape}, the analysis "
                                f"{want} (orders {list(analysis.orders)} x speed points)")
            data = amp.T.ravel()
        super().__init__(output, windows, data, **kw)

    def _check_curves(self, c: OrderCurves):
        a = self.analysis
        if tuple(c.orders) != a.orders or len(c.speeds) != a.n_speeds or \
                not np.allclose(c.speeds, a.speeds, rtol=1e-12, atol=0):
            raise DataError(f"the measured order curves (orders {list(c.orders)}, "
                            f"{len(c.speeds)} speeds) do not match the analysis (orders "
                            f"{list(a.orders)}, {a.n_speeds} speeds)")

    def curves(self, traj) -> OrderCurves:
        """The simulated order curves of ``traj``."""
        return self.analysis.curves_from_spectrum(self.spectrum(traj))

    @property
    def measured_curves(self) -> OrderCurves:
        """The data's order amplitudes as :class:`OrderCurves` (orders x speeds)."""
        return self.analysis.curves_from_spectrum(self.measured)

