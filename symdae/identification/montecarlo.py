"""Monte Carlo check of identification statistics: many identifications from noisy copies of
the same synthetic data, run in parallel on any ``concurrent.futures.Executor``.

Each run adds independent Gaussian noise N(0, sigma_k^2) to every data sample of every fitted
output k, identifies the free parameters and records the result and its reported standard
errors. The spread of the results is compared with the Fisher prediction at the truth (the
Cramer-Rao bound sigma / sqrt(F)). Every run draws from its own stream
(``numpy.random.SeedSequence(seed).spawn``), so the result does not depend on the executor or
on the order in which the runs finish.
"""
from __future__ import annotations

import functools
import math
import operator
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from ..costs.time_domain import LeastSquares
from ..data.measurement import Measurement
from ..errors import InputError, SymdaeError
from ..simulation.memory import MemoryEstimate
from ..threads import gather
from .experiment import Experiment
from .identify import identification_estimate, identify
from .residuals import least_squares_terms
from .statistics import fitted_outputs, identification_statistics, noise_levels

__all__ = ["MonteCarloResult", "monte_carlo", "add_noise", "monte_carlo_estimate"]


def add_noise(experiment: Experiment, noise: Mapping, rng: np.random.Generator) -> Experiment:
    """A copy of ``experiment`` whose least-squares data carry N(0, noise[output]^2) noise
    on every sample (other cost terms are kept as they are)."""
    ls, other = least_squares_terms(experiment.cost)
    terms = []
    for term in ls:
        data = term.data
        noisy = {}
        for output, signal in term.outputs.items():
            if signal in noisy:
                continue
            clean = data.values[signal] if isinstance(data, Measurement) else \
                np.asarray(data[signal], dtype=float)
            noisy[signal] = clean + rng.normal(0.0, noise[output], clean.shape)
        new: Measurement | dict
        if isinstance(data, Measurement):
            new = Measurement(data.t, {**data.values, **noisy}, source=f"{data.source} + noise")
        else:
            new = {**dict(data), **noisy}
        terms.append(LeastSquares(new, dict(term.outputs), term.weights, term.quadrature,
                                  term.align))
    cost = functools.reduce(operator.add, terms + other)      # their sum (one: itself)
    return Experiment(experiment.system, cost, experiment.scenario, experiment.params,
                      experiment.name)


@dataclass(frozen=True)
class _Run:
    values: np.ndarray | None
    standard_errors: np.ndarray | None
    iterations: int
    error: str | None = None


def _run_batch(experiments, seeds, free, start, noise, method, bounds, options,
               max_iterations) -> list:
    # module level, so that a process pool or a Dask cluster can pickle the call; a factory
    # builds the experiments once per batch in the worker
    exps = experiments() if callable(experiments) else experiments
    out = []
    for ss in seeds:
        rng = np.random.default_rng(ss)
        noisy = [add_noise(e, noise, rng) for e in exps]
        try:
            res = identify(noisy, free, start, bounds, method=method, options=options,
                           max_iterations=max_iterations, progress=False)
        except SymdaeError as exc:
            out.append(_Run(None, None, 0, f"{type(exc).__name__}: {exc}"))
            continue
        se = res.statistics.standard_errors if res.statistics is not None else None
        out.append(_Run(np.array([res.values[k] for k in free]),
                        None if se is None else np.array([se[k] for k in free]),
                        res.n_iterations))
    return out


@dataclass(frozen=True)
class MonteCarloResult:
    """Identified values of every successful run and their statistics.

    ``predicted``: the Fisher-predicted standard deviations at ``truth`` for the noise used;
    ``reported``: each run's own standard errors (noise estimated from its residual, F at its
    estimate), NaN where a run reported none.
    """

    parameters: tuple
    truth: dict
    noise: dict
    values: np.ndarray
    reported: np.ndarray
    iterations: np.ndarray
    predicted: np.ndarray
    failures: tuple
    wall_time: float
    method: str
    seed: int
    executor: str = field(default="serial")

    @property
    def n_runs(self) -> int:
        """The number of runs (rows of ``values``)."""
        return int(self.values.shape[0])

    @property
    def mean(self) -> np.ndarray:
        """The mean of the identified values over the runs, per parameter."""
        return self.values.mean(axis=0)

    @property
    def std(self) -> np.ndarray:
        """Sample standard deviation (ddof = 1)."""
        return self.values.std(axis=0, ddof=1)

    @property
    def std_sampling_error(self) -> np.ndarray:
        """Standard error of the sample standard deviation of Gaussian samples,
        about std / sqrt(2 (n - 1))."""
        return self.std / math.sqrt(2 * (self.n_runs - 1))

    def std_interval(self, confidence: float = 0.999) -> tuple[np.ndarray, np.ndarray]:
        """Interval that holds the true standard deviation with ``confidence``, from the
        sample standard deviation ((n-1) s^2 / sigma^2 is chi-square with n-1 dof)."""
        n = self.n_runs
        lo_q, hi_q = stats.chi2.ppf([(1 + confidence) / 2, (1 - confidence) / 2], n - 1)
        s = self.std
        return s * math.sqrt((n - 1) / lo_q), s * math.sqrt((n - 1) / hi_q)

    def agrees(self, confidence: float = 0.999) -> dict:
        """{parameter: whether the predicted standard deviation lies in the sample's
        confidence interval}."""
        lo, hi = self.std_interval(confidence)
        return {k: bool(lo[j] <= self.predicted[j] <= hi[j])
                for j, k in enumerate(self.parameters)}

    def rows(self) -> list[dict]:
        """One dict per parameter: truth, mean, spread, its 99.9 % interval and the Fisher
        prediction."""
        lo, hi = self.std_interval()
        rep = np.nanmean(self.reported, axis=0) if np.isfinite(self.reported).any() else \
            np.full(len(self.parameters), np.nan)
        return [{"parameter": k, "truth": self.truth[k], "mean": float(self.mean[j]),
                 "std": float(self.std[j]), "std_interval_99.9": [float(lo[j]), float(hi[j])],
                 "predicted_std": float(self.predicted[j]),
                 "std_over_predicted": float(self.std[j] / self.predicted[j]),
                 "mean_reported_std": float(rep[j]),
                 "bias_in_standard_errors": float((self.mean[j] - self.truth[k]) /
                                                  (self.std[j] / math.sqrt(self.n_runs)))}
                for j, k in enumerate(self.parameters)]

    def table(self) -> str:
        """The rows as a text table."""
        head = (f"{'parameter':>10s} {'truth':>12s} {'mean':>14s} {'std':>11s} "
                f"{'predicted':>11s} {'std/pred':>9s} {'99.9% interval of std':>25s} "
                f"{'reported':>11s}")
        lines = [f"{self.n_runs} runs ({len(self.failures)} failed), noise {self.noise}, "
                 f"{self.method}, {self.executor}, {self.wall_time:.2f} s", head]
        for r in self.rows():
            lo, hi = r["std_interval_99.9"]
            lines.append(f"{r['parameter']:>10s} {r['truth']:12.6g} {r['mean']:14.9g} "
                         f"{r['std']:11.4e} {r['predicted_std']:11.4e} "
                         f"{r['std_over_predicted']:9.3f} {lo:12.4e}..{hi:11.4e} "
                         f"{r['mean_reported_std']:11.4e}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The result as plain values (for JSON reports)."""
        return {"runs": self.n_runs, "failures": list(self.failures), "noise": self.noise,
                "method": self.method, "seed": self.seed, "executor": self.executor,
                "wall_time_s": self.wall_time, "rows": self.rows(),
                "iterations_median": float(np.median(self.iterations)) if self.n_runs else None,
                "iterations_max": int(np.max(self.iterations)) if self.n_runs else None}


def monte_carlo_estimate(experiments: Sequence[Experiment], n_free: int, method: str,
                         at_once: int) -> MemoryEstimate:
    """The memory of a Monte Carlo study: ``at_once`` identifications at the same time, of
    the experiment whose identification takes the most."""
    ests = [identification_estimate(e, n_free, method) for e in experiments]
    est = max(ests, key=lambda e: e.total)
    return MemoryEstimate(f"{est.what}, {at_once} runs at once", est.points,
                          at_once * est.per_step, at_once * est.fixed,
                          shrink=est.shrink + ", or fewer workers")


def monte_carlo(experiments: Sequence[Experiment] | Callable[[], Sequence[Experiment]],
                free: Sequence[str], start: Mapping, noise, runs: int, *,
                truth: Mapping | None = None, seed: int = 12345,
                method: str = "least_squares", bounds: Mapping | None = None,
                options: Mapping | None = None, max_iterations: int = 100,
                executor: Executor | None = None, batch: int | None = None
                ) -> MonteCarloResult:
    """``runs`` identifications of ``free`` from ``start`` on noisy copies of the
    experiments' (noise-free, synthetic) data.

    experiments:
        Experiments, or a picklable function returning them (for process pools and Dask
        clusters, whose workers then build the experiments once per batch).
    noise:
        {fitted output: standard deviation}, or one for all.
    truth:
        Where the Fisher prediction is made; default: the values identified from the
        noise-free data.
    executor, batch:
        Runs are submitted in batches of ``batch`` (default: one batch per run with no
        executor or threads, about four per worker otherwise) to ``executor``.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 2:
        raise InputError(f"runs must be a whole number >= 2, got {runs!r}")
    exps = list(experiments() if callable(experiments) else experiments)
    free = list(free)
    sigma = noise_levels(noise, fitted_outputs(exps))
    # before any run: with an executor, as many identifications at once as there are cores
    # (an Executor does not say how many workers it has; more would only queue)
    at_once = 1 if executor is None else min(runs, os.cpu_count() or 2)
    monte_carlo_estimate(exps, len(free), method, at_once).check()
    if truth is None:
        clean = identify(exps, free, start, bounds, method=method, options=options,
                         max_iterations=max_iterations, progress=False, statistics=False)
        truth = clean.values
    truth = {k: float(truth[k]) for k in free}
    predicted = identification_statistics(exps, free, truth, noise=sigma).statistics
    if predicted.standard_errors is None:
        raise InputError(predicted.singular_message())
    seeds = np.random.SeedSequence(seed).spawn(runs)
    if batch is None:
        threads = executor is None or isinstance(executor, ThreadPoolExecutor)
        batch = 1 if threads else max(1, math.ceil(runs / (4 * (os.cpu_count() or 2))))
    chunks = [seeds[k:k + batch] for k in range(0, runs, batch)]
    source = experiments if callable(experiments) else exps
    args = (free, dict(start), sigma, method, bounds, options, max_iterations)
    t0 = time.perf_counter()
    if executor is None:
        outcomes = [r for c in chunks for r in _run_batch(source, c, *args)]
    else:
        futures = [executor.submit(_run_batch, source, c, *args) for c in chunks]
        outcomes = [r for batch in gather(futures) for r in batch]
    wall = time.perf_counter() - t0
    ok = [o for o in outcomes if o.error is None]
    nb = len(free)
    values = np.array([o.values for o in ok]).reshape(len(ok), nb)
    reported = np.array([o.standard_errors if o.standard_errors is not None
                         else np.full(nb, np.nan) for o in ok]).reshape(len(ok), nb)
    return MonteCarloResult(
        tuple(free), truth, sigma, values, reported, np.array([o.iterations for o in ok]),
        predicted.standard_errors.copy(), tuple(o.error for o in outcomes if o.error),
        wall, method, seed, "serial" if executor is None else type(executor).__name__)
