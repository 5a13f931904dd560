"""Statistics of an identification at its result: Fisher information, covariance, standard
errors, correlations and identifiability warnings.

The noise model is the least-squares cost's: every data sample of a fitted output k carries
independent Gaussian noise of standard deviation sigma_k. The data samples are the grid points
the cost compares with positive weight. Then F = sum over samples S^T S / sigma_k^2, with S the
exact output sensitivities of the tangent sweep, and cov(b_hat) ~ F^-1 (Cramer-Rao).

sigma_k is given by the user or, by default, estimated from the residual at the result (refused
when the residual is below :data:`NOISE_FREE_LEVEL` of the data's size: noise-free data):
sigma_k^2 = RSS_k / (n_k (1 - n_free / n)), n_k samples of output k, n of all outputs; for one
output this is the usual RSS / (n - n_free) (spec section 3.1). The estimator is the maximum-
likelihood one, and F^-1 its covariance, when the cost's weights w_k eta_i are proportional to
1 / sigma_k^2; a note says when they are not.

Those standard errors assume white noise. Each fitted output's residual is checked as the fit
verdict checks it (:func:`symdae.identification.verdict.correlated_lags`); the statistics say
which residuals are correlated, and carry a Newey-West (HAC) sandwich covariance that holds
for correlated residuals too (:mod:`symdae.identification.hac`). Where a residual is
correlated, the summary labels the white-noise standard errors as too small and shows the HAC
ones.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, SymdaeError
from .experiment import map_calls
from .fisher import (
    FisherInformation,
    ParameterStatistics,
    noise_levels,
    parameter_scales,
)
from .hac import HACCovariance, hac_covariance
from .residuals import experiment_residuals, least_squares_terms
from .verdict import CORRELATED, correlated_lags

__all__ = ["IdentificationStatistics", "identification_statistics", "statistics_or_reason",
           "check_noise", "fitted_outputs", "noise_from_text", "noise_levels",
           "NOISE_ESTIMATED", "NOISE_GIVEN"]

NOISE_ESTIMATED = "estimated from the residual"
# a residual below this fraction of the data's size is round-off, not measurement noise (a
# 24-bit converter resolves 6e-8 of its range): the data are noise-free
NOISE_FREE_LEVEL = 1e-9
NOISE_GIVEN = "given"


@dataclass(frozen=True)
class IdentificationStatistics:
    """Fisher information and parameter statistics at an identified point.

    ``noise``: {output: standard deviation} used, ``noise_source``: ``NOISE_GIVEN`` or
    ``NOISE_ESTIMATED``; ``samples``: {output: data samples}; ``degrees_of_freedom``: samples
    minus free parameters; ``notes``: caveats (weights not matched to the noise).
    ``correlated``: the time series (an output, with its experiment where there are several)
    whose residual is not white, where the white-noise standard errors are too small;
    ``hac``: the Newey-West covariance for correlated residuals (None where F is singular).
    """

    noise: dict
    noise_source: str
    samples: dict
    degrees_of_freedom: int
    fisher: FisherInformation
    statistics: ParameterStatistics
    notes: tuple
    correlated: tuple = ()
    hac: HACCovariance | None = None

    @property
    def standard_errors(self) -> dict | None:
        """``{parameter: standard error}`` from the Fisher information (white noise
        assumed), or None when F is singular."""
        st = self.statistics
        if st.standard_errors is None:
            return None
        return dict(zip(st.parameters, st.standard_errors.tolist()))

    @property
    def white_residual(self) -> bool:
        """Whether every fitted output's residual looks white, so that the white-noise
        standard errors (:attr:`standard_errors`) apply."""
        return not self.correlated

    @property
    def standard_errors_hac(self) -> dict | None:
        """``{parameter: standard error}`` of the Newey-West (HAC) covariance, valid for
        correlated residuals too; None when F is singular."""
        if self.hac is None:
            return None
        return dict(zip(self.hac.parameters, self.hac.standard_errors.tolist()))

    @property
    def covariance_kind(self) -> str:
        """The covariance the standard errors to trust come from: ``"hac"`` where a residual
        is correlated (and the HAC covariance exists), else ``"white"``."""
        return "hac" if self.correlated and self.hac is not None else "white"

    @property
    def recommended_standard_errors(self) -> dict | None:
        """:attr:`standard_errors_hac` or :attr:`standard_errors`, as
        :attr:`covariance_kind` says."""
        return self.standard_errors_hac if self.covariance_kind == "hac" \
            else self.standard_errors

    def to_dict(self) -> dict:
        """The statistics, the noise model and the Fisher information as plain values."""
        return {"noise": dict(self.noise), "noise_source": self.noise_source,
                "samples": dict(self.samples), "degrees_of_freedom": self.degrees_of_freedom,
                "fisher_information": self.fisher.to_dict(),
                **self.statistics.to_dict(), "notes": list(self.notes),
                "standard_errors_assume": "white noise",
                "residual_white": self.white_residual,
                "correlated_residuals": list(self.correlated),
                "hac": None if self.hac is None else self.hac.to_dict(),
                "covariance_kind": self.covariance_kind}

    def summary(self) -> str:
        """A readable report: the noise model, the samples and the parameter statistics;
        where a residual is correlated, the white-noise standard errors are labelled as too
        small and the Newey-West (HAC) ones follow."""
        noise = ", ".join(f"{k} {v:.3g}" for k, v in self.noise.items())
        lines = [f"statistics (noise {self.noise_source}: {noise}; "
                 f"{sum(self.samples.values())} samples, {self.degrees_of_freedom} degrees of "
                 "freedom):"]
        if self.correlated:
            lines.append("  standard errors assuming white noise, NOT valid here: the "
                         f"residual of {', '.join(self.correlated)} is correlated, so they are "
                         "too small")
        elif self.hac is None:
            lines.append("  standard errors assuming white noise (the residual could not be "
                         "checked for correlation: it is at round-off or F is singular):")
        else:
            lines.append("  standard errors assuming white noise (the residuals look white):")
        lines.append(self.statistics.summary())
        if self.correlated and self.hac is not None:
            hac = self.hac
            lines.append("  standard errors for correlated residuals (Newey-West sandwich, "
                         "AR(1)-prewhitened; " + "; ".join(
                             f"{k}: bandwidth {hac.bandwidths[k]}, prewhitening "
                             f"{hac.prewhitening[k]:.3g}" for k in hac.bandwidths) + "):")
            white = self.statistics.standard_errors
            for k, name in enumerate(hac.parameters):
                v, se = float(self.statistics.values[k]), float(hac.standard_errors[k])
                rel = f" ({100 * se / abs(v):.3g} %)" if v != 0 else ""
                ratio = f", {se / white[k]:.3g} x the white-noise one" \
                    if white is not None and white[k] > 0 else ""
                lines.append(f"  {name:>12s}: {v:.10g} +- {se:.3g}{rel}{ratio}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _statistics_residuals(experiment, point, free):
    # strict=False: other cost terms carry no noise model and are left out
    return experiment_residuals(experiment, point, free, strict=False)


def identification_statistics(experiments, free: Sequence[str], values: Mapping, *,
                              noise=None, scaling="relative",
                              executor: Executor | None = None) -> IdentificationStatistics:
    """Fisher information and statistics of ``free`` at ``values`` for the least-squares
    terms of ``experiments`` (other cost terms carry no noise model and are left out).

    ``noise``: one standard deviation for all fitted outputs, {output: standard deviation},
    or None to estimate them from the residual. ``scaling``: scales of the scaled Fisher
    matrix (see :func:`symdae.identification.fisher.parameter_scales`; default ``|value|``).
    """
    exps = [experiments] if not isinstance(experiments, (list, tuple)) else list(experiments)
    free = list(free)
    point = {k: float(values[k]) for k in free}
    if not fitted_outputs(exps):          # before any sweep
        raise InputError("no least-squares cost terms: there is no noise model to form the "
                         "Fisher information from")
    results = map_calls(_statistics_residuals, [(e, point, free) for e in exps], executor)
    blocks = [b for res in results for b in res.blocks]
    outputs = list(dict.fromkeys(b.output for b in blocks))
    used = [(b, b.weight > 0) for b in blocks]
    n_k = {k: int(sum(np.count_nonzero(m) for b, m in used if b.output == k)) for k in outputs}
    n = sum(n_k.values())
    dof = n - len(free)
    if noise is None:
        if dof <= 0:
            raise InputError(f"{n} data samples for {len(free)} free parameters: too few to "
                             "estimate the noise level; pass noise=")
        sigma = {}
        for k in outputs:
            rss = sum(float(np.sum(b.residual[m] ** 2)) for b, m in used if b.output == k)
            sigma[k] = math.sqrt(rss * n / (n_k[k] * dof))
            size = max(float(np.max(np.abs(b.samples.values), initial=0.0))
                       for b, m in used if b.output == k)
            if not sigma[k] > NOISE_FREE_LEVEL * size:
                raise InputError(
                    f"the residual of output {k!r} at the identified point is "
                    f"{sigma[k]:.3g} (rms), {sigma[k] / size if size else 0:.2g} of the data's "
                    "size: the data carry no noise (synthetic data from the model?), so no "
                    "noise level can be estimated from them and standard errors from it would "
                    "be meaningless; pass noise= (--noise) for those of a given noise level")
        source = NOISE_ESTIMATED
    else:
        sigma = noise_levels(noise, outputs)
        source = NOISE_GIVEN
    F = np.zeros((len(free), len(free)))
    for b, m in used:
        S = b.sensitivity[m] / sigma[b.output]
        F += S.T @ S
    vals = np.array([point[k] for k in free])
    fisher = FisherInformation(F, tuple(free), vals, parameter_scales(free, vals, scaling),
                               tuple(outputs), np.diag([sigma[k] ** 2 for k in outputs]),
                               "sum over the data samples (eta = 1)", n)
    notes = []
    c = np.concatenate([b.weight[m] * sigma[b.output] ** 2 for b, m in used])
    if c.size and c.max() > c.min() * (1 + 1e-6):
        notes.append("the cost's weights (w_k eta_i) are not proportional to 1/sigma_k^2 of "
                     "this noise model, so the estimate is not the maximum-likelihood one and "
                     "its covariance exceeds the F^-1 reported (the Cramer-Rao bound); weights "
                     "w_k = 1/sigma_k^2 and a uniform sampling make them agree")
    # one time series per block: an output of an experiment (two experiments' records are
    # independent, and so are the noises of different outputs: no cross terms)
    exps_named = len({b.experiment for b in blocks}) > 1
    labels = [f"{b.output} ({b.experiment})" if exps_named else b.output for b in blocks]
    labels = [x if labels.count(x) == 1 else f"{x}[{i}]" for i, x in enumerate(labels)]
    series = [(label, b.sensitivity[m], b.residual[m], b.weight[m])
              for label, (b, m) in zip(labels, used)]
    statistics = fisher.statistics()
    # a residual at round-off (noise-free data, the noise level given) tells nothing of the
    # noise's correlation, and a sandwich of round-off would be standard errors of round-off
    round_off = any(not math.sqrt(float(np.mean(r ** 2))) > NOISE_FREE_LEVEL * max(
        float(np.max(np.abs(b.samples.values), initial=0.0)), 1e-300)
        for (_, _, r, _), (b, _) in zip(series, used) if r.size)
    correlated = () if round_off else tuple(
        label for label, _, r, _ in series if correlated_lags(r)[0] > CORRELATED)
    hac = hac_covariance(free, series) if (statistics.identifiable and n > len(free)
                                           and not round_off) else None
    return IdentificationStatistics(dict(sigma), source, n_k, dof, fisher, statistics,
                                    tuple(notes), correlated, hac)


def noise_from_text(items: Sequence[str], outputs: Sequence[str]):
    """Noise levels from command-line words ``NAME=SIGMA`` or ``SIGMA`` (every output not
    named); None for no words."""
    if not items:
        return None
    named, default = {}, None
    for text in items:
        name, sep, value = text.rpartition("=")
        try:
            x = float(value)
        except ValueError:
            raise InputError(f"noise: expected NAME=SIGMA or SIGMA, got {text!r}") from None
        if sep:
            named[name.strip()] = x
        else:
            default = x
    if default is None:
        return named
    return {**{k: default for k in outputs}, **named}


def fitted_outputs(experiments) -> list[str]:
    """The outputs the least-squares terms of ``experiments`` fit, in order of appearance."""
    exps = [experiments] if not isinstance(experiments, (list, tuple)) else list(experiments)
    return list(dict.fromkeys(o for e in exps for t in least_squares_terms(e.cost)[0]
                              for o in t.outputs))


def check_noise(noise, experiments) -> None:
    """Raise now (before an identification runs) if ``noise`` is not a valid noise level for
    the outputs ``experiments`` fit."""
    if noise is not None:
        noise_levels(noise, fitted_outputs(experiments))


def statistics_or_reason(experiments, free, values, *, noise=None, scaling="relative",
                         executor=None) -> tuple:
    """(IdentificationStatistics, None), or (None, why not) for a report that must not fail
    because its statistics cannot be formed (no least-squares term, an exact fit)."""
    try:
        return identification_statistics(experiments, free, values, noise=noise,
                                          scaling=scaling, executor=executor), None
    except SymdaeError as exc:
        return None, str(exc)
