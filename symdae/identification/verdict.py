"""The verdict on a fit: how much of each output it explains, and whether what it leaves is
noise.

An optimiser's "converged" says only that it cannot improve the cost nearby. Per fitted
output (the least-squares terms) the verdict compares the residual at the identified values
with two things the data themselves show:

* the data's variation: the normalised error, rms(residual) / rms(data - mean(data));
* the noise in the data, estimated from their differences: for white noise of level sigma the
  k-th difference has the standard deviation sigma sqrt(C(2k, k)), while a smooth signal's
  k-th differences shrink with the sampling step to the power k; the smallest of the robust
  estimates (median absolute deviation) for k = 1 .. 4 is taken.

And it asks whether the residual is white: the fraction of its first lags whose
autocorrelation lies outside the band +-2 / sqrt(N) (about 5 % for white noise). A residual
far above the noise, a sizeable part of the data's variation, and correlated is what a local
minimum leaves (the phase slip of an oscillator whose frequency is off) or a model that
cannot describe the data: :func:`symdae.identify` then reports ``success`` false with the
verdict's message. A residual at round-off (noise-free data from the model itself) or at the
noise level passes.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import SimulationError
from .experiment import experiment_labels, map_calls
from .residuals import least_squares_terms, residual_blocks

__all__ = ["OutputVerdict", "FitVerdict", "fit_verdict", "noise_level", "correlated_lags",
           "UNEXPLAINED", "ABOVE_NOISE", "CORRELATED", "LAGS"]

UNEXPLAINED = 0.1     # normalised error above which an output is not explained
ABOVE_NOISE = 10.0    # ... when its residual is also this many times the data's noise
CORRELATED = 0.25     # fraction of lags outside the white band above which it is not white
LAGS = 20             # lags of the autocorrelation looked at (at most a quarter of N)


def noise_level(values: np.ndarray) -> float:
    """The noise standard deviation of evenly sampled ``values``, estimated from their
    differences of order 1 .. 4 (the smallest robust estimate)."""
    y = np.asarray(values, dtype=float)
    best = math.inf
    for k in range(1, 5):
        if y.size < k + 3:
            break
        d = np.diff(y, n=k)
        mad = float(np.median(np.abs(d - np.median(d))))
        best = min(best, 1.4826 * mad / math.sqrt(math.comb(2 * k, k)))
    return 0.0 if math.isinf(best) else best


def correlated_lags(residual: np.ndarray, lags: int = LAGS) -> tuple[float, int]:
    """(fraction of the lags 1 .. L whose autocorrelation lies outside +-2 / sqrt(N), L) of
    ``residual``; L = min(``lags``, N // 4). (0, 0) for a residual too short or zero."""
    r = np.asarray(residual, dtype=float)
    r = r - r.mean()
    n = r.size
    L = min(int(lags), n // 4)
    denom = float(r @ r)
    if L < 1 or denom == 0.0:
        return 0.0, 0
    rho = np.array([float(r[:-k] @ r[k:]) / denom for k in range(1, L + 1)])
    return float(np.mean(np.abs(rho) > 2.0 / math.sqrt(n))), L


@dataclass(frozen=True)
class OutputVerdict:
    """The verdict on one fitted output of one experiment (see the module docstring)."""

    experiment: str
    output: str
    samples: int
    residual_rms: float
    data_rms: float
    noise: float
    correlated: float
    lags: int

    @property
    def normalised_error(self) -> float:
        """rms(residual) / rms(data about their mean): the part of the data's variation the
        fit leaves unexplained."""
        if self.data_rms > 0:
            return self.residual_rms / self.data_rms
        return 0.0 if self.residual_rms == 0 else math.inf

    @property
    def white(self) -> bool:
        """Whether the residual looks white (at most ``CORRELATED`` of its lags outside the
        band)."""
        return self.correlated <= CORRELATED

    @property
    def unexplained(self) -> bool:
        """Whether the fit leaves a sizeable part of this output unexplained, far above the
        data's noise."""
        return self.normalised_error > UNEXPLAINED and \
            self.residual_rms > ABOVE_NOISE * self.noise

    @property
    def suspicious(self) -> bool:
        """Unexplained and correlated: what a local minimum or a wrong model leaves."""
        return self.unexplained and not self.white

    def to_dict(self) -> dict:
        """Plain values (``report.json``)."""
        return {"experiment": self.experiment, "output": self.output, "samples": self.samples,
                "normalised_error": self.normalised_error, "residual_rms": self.residual_rms,
                "data_rms": self.data_rms, "noise": self.noise,
                "correlated_lags": self.correlated, "lags": self.lags, "white": self.white,
                "suspicious": self.suspicious}

    def line(self) -> str:
        """One line: the output, its normalised error against the noise, whiteness."""
        who = self.output if self.experiment == "experiment" else \
            f"{self.output} ({self.experiment})"
        return (f"{who}: {self.normalised_error:.1%} unexplained (residual rms "
                f"{self.residual_rms:.3g}, data {self.data_rms:.3g} about their mean, noise "
                f"about {self.noise:.2g}); residual "
                + ("white" if self.white else
                   f"correlated ({self.correlated:.0%} of {self.lags} lags outside the white "
                   "band)"))


@dataclass
class FitVerdict:
    """The verdict on every fitted output; ``local_minimum`` when one of them is
    :attr:`OutputVerdict.suspicious`."""

    outputs: list = field(default_factory=list)

    @property
    def local_minimum(self) -> bool:
        """Whether the fit leaves an output unexplained, far above its noise, with a
        correlated residual."""
        return any(o.suspicious for o in self.outputs)

    @property
    def message(self) -> str:
        """In words: what the fit leaves and what to try."""
        bad = [o for o in self.outputs if o.suspicious]
        if not bad:
            return "no fitted output leaves a correlated residual far above its noise"
        worst = max(bad, key=lambda o: o.normalised_error)
        return (f"the fit leaves {worst.normalised_error:.0%} of {worst.output} unexplained "
                f"(about {worst.residual_rms / max(worst.noise, 1e-300):.2g} times the data's "
                "noise) and the residual is correlated: a local minimum is likely (or a model "
                "that cannot describe the data); try multiple shooting "
                "(shooting=MultipleShooting(...)) or other start values")

    def to_dict(self) -> dict:
        """Plain values (``report.json``)."""
        return {"local_minimum": self.local_minimum, "message": self.message,
                "outputs": [o.to_dict() for o in self.outputs]}

    def summary(self) -> str:
        """One line per output, then the message."""
        return "\n".join(["verdict: " + self.message] + ["  " + o.line() for o in self.outputs])


def _output_verdicts(experiment, values, label) -> list[OutputVerdict]:
    if not least_squares_terms(experiment.cost)[0]:
        return []
    # the outputs alone, within the experiment's memory budget (a long run is segmented)
    traj = experiment.evaluate(values).trajectory
    out = []
    for b in residual_blocks(experiment.system, traj, experiment.cost, label):
        keep = b.weight > 0
        data = np.asarray(b.samples.values)[keep]
        res = np.asarray(b.residual)[keep]
        if data.size < 2:
            continue
        frac, lags = correlated_lags(res)
        out.append(OutputVerdict(label, b.output, int(data.size),
                                 float(np.sqrt(np.mean(res ** 2))),
                                 float(np.sqrt(np.mean((data - data.mean()) ** 2))),
                                 noise_level(data), frac, lags))
    return out


def fit_verdict(experiments: Sequence, values: Mapping, executor=None) -> FitVerdict | None:
    """The verdict on the least-squares terms of ``experiments`` at ``values`` (one run of
    each), or None when none of them has one or a run fails."""
    exps = list(experiments)
    labels = experiment_labels(exps)
    try:
        parts = map_calls(_output_verdicts, [(e, dict(values), label)
                                             for e, label in zip(exps, labels)], executor)
    except SimulationError:
        return None
    outputs = [o for part in parts for o in part]
    return FitVerdict(outputs) if outputs else None
