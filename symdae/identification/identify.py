"""Parameter identification: minimise the sum of experiment costs with scipy.optimize, driven
by the exact discrete-adjoint gradient.

Free parameters are optimised in scaled form w_j = p_j / scale_j (by default scale = start
value): the engine mount's parameters span ten orders of magnitude, and an optimiser working
in raw units would see a hopelessly ill-scaled problem.
"""
from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from ..analysis.pod import PODModeError
from ..errors import InputError, Interrupted, SimulationError, UnknownNameError
from ..model.definition import by_parameter_name, parameter_name
from ..progress import report
from ..simulation.checkpoint import DEFAULT_MEMORY_FRACTION
from ..simulation.memory import MemoryEstimate, forward_bytes, largest, tangent_bytes
from ..simulation.scenario import physical_memory
from ..threads import one_blas_thread
from .experiment import Experiment, evaluate_many, experiment_labels
from .fisher import parameter_scales
from .least_squares import LEAST_SQUARES_METHODS, least_squares_fit
from .residuals import least_squares_terms
from .shooting import MultipleShooting, ShootingReport, multiple_shooting
from .statistics import IdentificationStatistics, check_noise, statistics_or_reason
from .verdict import FitVerdict, fit_verdict

__all__ = ["IdentificationResult", "identify", "choose_method", "DEFAULT_OPTIONS",
           "AUTO_GAUSS_NEWTON_MAX_FREE", "identification_estimate"]

# L-BFGS-B's ftol is relative to max(|J|, 1): once J < 1 it acts as an absolute threshold and
# stops long before the cost reaches round-off, so symdae switches it off and stops on the
# projected gradient or when the line search can make no further progress.
DEFAULT_OPTIONS = {
    "L-BFGS-B": {"ftol": 0.0, "gtol": 0.0},
    "BFGS": {"gtol": 0.0},
    "trust-constr": {"gtol": 1e-300, "xtol": 1e-15},
}

# method="auto" takes Gauss-Newton (least_squares) up to this many free parameters: an
# iteration costs one forward sweep plus the tangent sweep along the free parameters (on the
# engine mount about 0.4 + 0.1 k forward sweeps for k of them, benchmarks/bench_tangent.py),
# against 1.4-1.6 forward sweeps per L-BFGS-B evaluation; there Gauss-Newton needs 7
# iterations where L-BFGS-B needs 60 (82 evaluations), so it wins until the tangent directions
# outweigh the saved iterations (benchmarks/bench_gauss_newton.py).
AUTO_GAUSS_NEWTON_MAX_FREE = 20


@dataclass
class IdentificationResult:
    """What :func:`identify` found, and how."""

    free: list
    start: dict
    values: dict
    scales: dict
    start_cost: float
    cost: float
    gradient: dict
    history: list
    n_iterations: int
    n_simulations: int
    n_gradients: int
    wall_time: float
    success: bool
    message: str
    method: str
    experiment_costs: dict
    # Fisher information, standard errors, correlations at ``values`` (symdae.identification.statistics),
    # or None with the reason in statistics_note
    statistics: IdentificationStatistics | None = None
    statistics_note: str | None = None
    # the multiple-shooting stage before the single-shooting fit, or None without one
    shooting: ShootingReport | None = None
    # how well the fit explains each fitted output (verdict.FitVerdict), or None without
    # least-squares terms
    verdict: FitVerdict | None = None

    def relative_error(self, truth: Mapping) -> dict:
        """``|identified - truth| / |truth|`` per free parameter (absolute error where truth = 0)."""
        return {k: abs(self.values[k] - truth[k]) / (abs(truth[k]) or 1.0) for k in self.free}

    def settled_at(self, rel: float = 1e-6) -> int:
        """The first iteration from which every parameter stays within ``rel`` (relative) of
        its identified value: where the optimiser had the answer, before the iterations that
        only polish it at round-off."""
        ok = [all(abs(e["values"][k] / self.values[k] - 1) <= rel if self.values[k] else
                  e["values"][k] == 0 for k in self.free) for e in self.history]
        first = len(ok)
        while first > 0 and ok[first - 1]:
            first -= 1
        return self.history[min(first, len(ok) - 1)]["iteration"]

    def to_dict(self) -> dict:
        """The result as plain values (the CLI's ``report.json``)."""
        return {
            "method": self.method, "free": self.free, "start": self.start,
            "identified": self.values, "scales": self.scales, "start_cost": self.start_cost,
            "cost": self.cost, "cost_reduction_orders": _orders(self.start_cost, self.cost),
            "gradient": self.gradient, "iterations": self.n_iterations,
            "simulations": self.n_simulations, "gradients": self.n_gradients,
            "wall_time_s": self.wall_time, "success": self.success, "message": self.message,
            "experiment_costs": self.experiment_costs, "history": self.history,
            "statistics": None if self.statistics is None else self.statistics.to_dict(),
            "statistics_note": self.statistics_note,
            "shooting": None if self.shooting is None else self.shooting.to_dict(),
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
        }

    def summary(self) -> str:
        """A readable report: method, cost reduction, counts, start and identified values,
        statistics."""
        lines = [f"{self.method}: {self.message}",
                 f"cost {self.start_cost:.6e} -> {self.cost:.6e} "
                 f"({_orders(self.start_cost, self.cost):.1f} orders) in {self.n_iterations} "
                 f"iterations, {self.n_simulations} simulations, {self.n_gradients} gradients, "
                 f"{self.wall_time:.3f} s"]
        if self.shooting is not None:
            lines.insert(1, self.shooting.summary())
        for k in self.free:
            lines.append(f"  {k:>12s}: {self.start[k]:.10g} -> {self.values[k]:.10g}")
        if self.statistics is not None:
            lines.append(self.statistics.summary())
        elif self.statistics_note is not None:      # None: not asked for
            lines.append(f"no statistics: {self.statistics_note}")
        if self.verdict is not None:
            lines.append(self.verdict.summary())
        return "\n".join(lines)


def _orders(a: float, b: float) -> float:
    if a > 0 and b > 0:
        return math.log10(a / b)
    return float("inf") if b == 0 and a > 0 else float("nan")


def _scaled_bounds(free, start, scales, bounds):
    """Bounds on the scaled variables, or None; checks names and the start value."""
    if not bounds:
        return None
    unknown = [k for k in bounds if k not in free]
    if unknown:
        raise UnknownNameError(f"bounds given for {unknown}, which are not free ({free})")
    out = []
    for k, s in zip(free, scales):
        lo, hi = bounds.get(k, (None, None))
        if lo is not None and hi is not None and not lo < hi:
            raise InputError(f"bounds of {k}: lower {lo!r} must be below upper {hi!r}")
        if (lo is not None and start[k] < lo) or (hi is not None and start[k] > hi):
            raise InputError(f"start value of {k} ({start[k]:g}) lies outside its bounds "
                             f"[{lo}, {hi}]")
        out.append((None if lo is None else lo / s, None if hi is None else hi / s))
    return out


class _Objective:
    """J(w) and dJ/dw of the summed experiment costs at scaled free parameters w.

    Remembers the last point (scipy asks for J and the gradient at the same w), counts
    evaluations, and turns a failed simulation (or a POD mode that cannot be matched) at a
    trial point, or a cost above ten times the largest seen so far (a run that blew up),
    into that bound, with a zero gradient, so that the line search backs off towards the
    last good point. Not ``inf``: L-BFGS-B's
    Moré-Thuente search interpolates between f values, and an infinite one ends the run
    there with "ABNORMAL" or a spurious convergence. At the start values (``strict=True``)
    the error propagates: there the cause is the set-up, not the step.
    """

    def __init__(self, experiments, free, scales, executor, progress):
        self.experiments, self.free, self.scales = experiments, free, scales
        self.executor, self.progress = executor, progress
        self.cols = [[e.system.model.parameter_names.index(k) for k in free]
                     for e in experiments]
        self.labels = experiment_labels(experiments)
        self.evaluations = 0          # simulations + adjoint gradients, per experiment
        self.per_experiment: dict = {}
        self.failures = 0             # trial points where the cost is undefined or bounded
        self._worst = 0.0             # largest finite cost seen
        self._last = None

    def physical(self, w) -> dict:
        return {k: float(v) for k, v in zip(self.free, np.asarray(w) * self.scales)}

    def __call__(self, w, strict: bool = False):
        key = np.asarray(w, dtype=float).tobytes()
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        p = self.physical(w)
        try:
            results = evaluate_many(self.experiments, p, self.executor, gradient=True)
        except (SimulationError, PODModeError) as exc:
            if strict:
                if hasattr(exc, "add_note"):         # Python >= 3.11 (3.10 is supported)
                    exc.add_note(f"(identification: at the start values {p})")
                raise
            if self.progress:
                print(f"  simulation failed at {p}: {str(exc).splitlines()[0]}",
                      file=sys.stderr)
            self._last = None
            self.failures += 1
            return (10.0 * self._worst if self._worst > 0 else 1.0), np.zeros(len(self.free))
        self.evaluations += len(results)
        J, g = 0.0, np.zeros(len(self.free))
        for r, c, label in zip(results, self.cols, self.labels):
            assert r.gradient is not None       # evaluated with gradient=True
            J += r.cost
            g += r.gradient[c]
            self.per_experiment[label] = r.cost
        if self._worst > 0 and not J <= 10.0 * self._worst:
            # a run that blew up (a trial point far outside the model's stable range: the
            # cost grows by orders of magnitude, its gradient more) is no better a guide for
            # the line search than one that failed; its astronomical slope would only shrink
            # the next trial step
            self._last = None
            self.failures += 1
            return 10.0 * self._worst, np.zeros(len(self.free))
        out = (J, g * self.scales)
        if math.isfinite(J):
            self._worst = max(self._worst, abs(J))
        self._last = (key, out)
        return out


def _check_experiments(experiments, free):
    exps = [experiments] if isinstance(experiments, Experiment) else list(experiments)
    if not exps:
        raise InputError("no experiments")
    if not free or len(set(free)) != len(free):
        raise InputError(f"free parameters must be a non-empty list of distinct names: {free}")
    for e in exps:
        names = e.system.model.parameter_names
        missing = [k for k in free if k not in names]
        if missing:
            raise UnknownNameError(f"experiment {e.name!r}: model {e.system.model.name!r} has "
                                   f"no parameter(s) {missing}; its parameters are {names}")
    return exps


def _start_values(exps, free, start) -> dict:
    model = exps[0].system.model
    nominal = dict(zip(model.parameter_names, model.nominal_values))
    start = {k: nominal[k] for k in free} if start is None else dict(start)
    extra = [k for k in start if k not in free]
    if extra:       # silently ignoring them would fit from values the user did not mean
        raise InputError(f"start values for {extra}, which are not free (free: {list(free)}); "
                         "give fixed values as the experiment's params")
    missing = [k for k in free if k not in start]
    if missing:
        raise UnknownNameError(f"no start value for free parameter(s) {missing}")
    return {k: float(start[k]) for k in free}


# copies of the Jacobian (one row per fitted sample and a column per free parameter) alive at
# once in Gauss-Newton: scipy's trf keeps the last J, its copy, the scaled J and the SVD's U
# while the next is assembled from the sensitivities at the samples, their weighted copy and
# the stacked result; of the residual vector (one value per fitted sample): the blocks'
# weights, residuals and model samples of two points and scipy's copies of r (ten in all)
JACOBIAN_COPIES = 7
RESIDUAL_COPIES = 12
# the statistics: after the tangent sweep, its output sensitivities, those at the samples and
# their weighted rows; the weights, residuals and model samples of each output
STATISTICS_JACOBIANS = 2


def identification_estimate(experiment, n_free: int, method: str,
                            statistics: bool = True) -> MemoryEstimate:
    """The memory one identification of ``experiment`` by ``method`` takes: the largest of
    its phases, which run one after the other.

    Each evaluation: the trajectory (:func:`~symdae.simulation.memory.forward_bytes`) and
    what the cost allocates (``cost.memory``: dJ/dS, Fourier maps, POD snapshots). The
    gradient methods add the adjoint, which reads the trajectory (checkpointed beyond the
    experiment's memory budget: then the outputs and dJ/dS of every step and the budget).
    Gauss-Newton (``LEAST_SQUARES_METHODS``) and the statistics add a tangent sweep along
    the free parameters and the Jacobian of the residuals (JACOBIAN_COPIES,
    RESIDUAL_COPIES, STATISTICS_JACOBIANS).
    """
    sizes, sc = experiment.system.sizes, experiment.scenario
    points = sc.n_steps + 1
    forward = forward_bytes(sizes, sc.scheme)
    cost_step, cost_fixed = experiment.cost.memory(sizes, sc)
    tangents = tangent_bytes(sizes, sc.scheme, n_free)
    fitted = sum(len(t.outputs) for t in least_squares_terms(experiment.cost)[0])
    jacobian, residual = 8 * n_free * fitted, 8 * fitted
    name = f"experiment {experiment.name!r}"
    phases = []
    if method in LEAST_SQUARES_METHODS:
        during = max(tangents + 4 * jacobian, 8 * n_free * sizes.n_s + JACOBIAN_COPIES * jacobian)
        phases.append(MemoryEstimate(
            f"{name} (Gauss-Newton with {n_free} free parameters)", points,
            forward + during + RESIDUAL_COPIES * residual,
            shrink="a larger h, a shorter run, fewer free parameters or method='L-BFGS-B' "
            "(its adjoint gradient is checkpointed)"))
    else:
        budget = experiment.memory_budget or DEFAULT_MEMORY_FRACTION * physical_memory()
        shrink = "a larger h, a shorter run or a smaller memory_budget (checkpointing)"
        if points * sizes.gradient_row_bytes <= budget:     # checkpoint.plan's test
            phases.append(MemoryEstimate(f"{name} (cost and adjoint gradient)", points,
                                         forward_bytes(sizes, sc.scheme, False, True)
                                         + cost_step, cost_fixed, shrink))
        else:
            phases.append(MemoryEstimate(f"{name} (cost and checkpointed adjoint gradient)",
                                         points, 8 * (1 + sizes.n_s) + cost_step,
                                         cost_fixed + int(budget), shrink))
    if statistics and fitted:
        phases.append(MemoryEstimate(
            f"{name} (statistics of {n_free} free parameters)", points,
            forward + max(tangents, 8 * n_free * sizes.n_s + STATISTICS_JACOBIANS * jacobian
                          + 4 * residual),
            shrink="a larger h, a shorter run, fewer free parameters or statistics=False"))
    return largest(*phases)


def choose_method(experiments, free: Sequence[str]) -> tuple[str, str]:
    """What ``method="auto"`` takes, and why: ``"least_squares"`` (Gauss-Newton with the
    tangent Jacobian) when every experiment's cost is a sum of LeastSquares terms, at most
    :data:`AUTO_GAUSS_NEWTON_MAX_FREE` parameters are free and the states of every step (which
    the tangent sweep for the Jacobian needs) fit the experiment's memory budget; else
    ``"L-BFGS-B"`` with the adjoint gradient (any cost, any number of parameters,
    checkpointed beyond the budget)."""
    exps = _check_experiments(experiments, list(free))
    if len(free) > AUTO_GAUSS_NEWTON_MAX_FREE:
        return "L-BFGS-B", (f"{len(free)} free parameters (Gauss-Newton up to "
                            f"{AUTO_GAUSS_NEWTON_MAX_FREE})")
    for e in exps:
        ls, other = least_squares_terms(e.cost)
        if other or not ls:
            return "L-BFGS-B", f"experiment {e.name!r} has a cost that is not least squares"
        budget = e.memory_budget or DEFAULT_MEMORY_FRACTION * physical_memory()
        if (e.scenario.n_steps + 1) * e.system.sizes.row_bytes > budget:
            return "L-BFGS-B", (f"experiment {e.name!r}: the states of its "
                                f"{e.scenario.n_steps} steps exceed its memory budget (the "
                                "adjoint gradient is checkpointed, the tangent Jacobian not)")
    return "least_squares", "least-squares costs only"


def identify(experiments, free: Sequence[str], start: Mapping | None = None,
             bounds: Mapping | None = None, *, method: str = "auto", scaling="start",
             max_iterations: int = 500, options: Mapping | None = None,
             progress: bool | Callable = True,
             executor: Executor | None = None, noise=None,
             statistics: bool = True,
             shooting: MultipleShooting | None = None) -> IdentificationResult:
    """Identify the ``free`` parameters by minimising the summed cost of ``experiments``.

    Parameters
    ----------
    experiments:
        An :class:`Experiment` or a list of them (each with its own scenario, data and
        cost); their costs are summed into one objective.
    free:
        Names of the parameters to identify (they must exist in every experiment's model).
    start:
        ``{name: start value}``; default the nominal values of the first experiment's model.
    bounds:
        ``{name: (lower, upper)}`` in physical units (None for no bound on a side).
    method:
        ``"auto"`` (default: :func:`choose_method`, Gauss-Newton for least-squares costs with
        few parameters, where it needs a few iterations instead of dozens, else L-BFGS-B);
        ``"L-BFGS-B"``, ``"BFGS"`` or ``"trust-constr"`` (scipy.optimize.minimize with the
        adjoint gradient); or ``"least_squares"``, ``"lm"``, ``"gauss-newton-plain"``:
        Gauss-Newton / Levenberg-Marquardt on the residuals of least-squares costs with their
        exact Jacobian (:mod:`symdae.least_squares`). The result's ``method`` says which ran.
    scaling:
        ``"start"`` (optimise w = p / p_start), ``"none"``, ``{name: scale}`` or an array
        (:func:`symdae.identification.fisher.parameter_scales`).
    options:
        Passed to the scipy optimiser (minimize on top of :data:`DEFAULT_OPTIONS`, or
        least_squares); they depend on the method, so name the method with them.
    progress:
        True prints one line per iteration to stderr; a callable receives each history entry.
    executor:
        A ``concurrent.futures.Executor`` that evaluates the experiments concurrently
        (:func:`symdae.evaluate_many`); None evaluates them one after the other.
    noise, statistics:
        With ``statistics`` (default) the result carries the Fisher information, standard
        errors and correlations at the identified point (:mod:`symdae.identification.statistics`) for
        output noise ``noise`` ({output: standard deviation} or one for all); None
        estimates it from the residual.
    shooting:
        :class:`MultipleShooting` fits the segments of the record first (each from its own
        start state, the continuity gaps driven to zero; least-squares costs in the time
        domain only) and the method then polishes the result by single shooting, so the
        answer is the single-shooting optimum, reached from start values far from it. The
        result's ``shooting`` reports the stage; its ``start_cost`` is single shooting's at
        ``start``, its ``history`` that of the polish.

    The result's ``verdict`` (:func:`fit_verdict`: per fitted output of the least-squares
    terms, the normalised error, the data's noise level, whether the residual is white) makes
    ``success`` false, with a message in words, where the fit leaves an output largely
    unexplained, far above its noise, with a correlated residual: a likely local minimum.
    """
    free = [parameter_name(k) for k in free]
    start, bounds = by_parameter_name(start), by_parameter_name(bounds)
    exps = _check_experiments(experiments, free)
    if method == "auto":
        if options:
            raise InputError(f"options {sorted(options)} belong to one optimiser: give method "
                             "(e.g. 'L-BFGS-B' or 'least_squares') with them, not 'auto'")
        method = choose_method(exps, free)[0]
    if method not in DEFAULT_OPTIONS and method not in LEAST_SQUARES_METHODS:
        raise InputError(f"method must be one of ['auto'] + {list(DEFAULT_OPTIONS)} or "
                         f"{list(LEAST_SQUARES_METHODS)}, got {method!r}")
    if bounds and method == "BFGS":
        raise InputError("BFGS does not take bounds; use L-BFGS-B or trust-constr")
    if shooting is not None and not isinstance(shooting, MultipleShooting):
        raise InputError(f"shooting must be a MultipleShooting or None, got "
                         f"{type(shooting).__name__}")
    start = _start_values(exps, free, start)
    scales = parameter_scales(free, [start[k] for k in free], scaling)
    sb = _scaled_bounds(free, start, scales, bounds)
    check_noise(noise, exps)
    for e in exps:                 # before any sweep: a run that cannot fit is refused now
        identification_estimate(e, len(free), method, statistics).check()
    # the optimisers' own BLAS calls are on vectors of a few entries: OpenBLAS's thread pool
    # only slows them (L-BFGS-B took 6 ms instead of 0.05 ms per evaluation under load)
    progress = _BestSoFar(progress)
    with one_blas_thread(), progress.on_interrupt():
        t_start = time.perf_counter()
        stage, first = None, start
        if shooting is not None:
            stage = multiple_shooting(exps, free, start, shooting, scales=scales,
                                      scaled_bounds=sb, max_iterations=max_iterations,
                                      executor=executor, progress=progress)
            first = stage.values
        if method in LEAST_SQUARES_METHODS:
            result = least_squares_fit(exps, free, first, scales, sb, method=method,
                                       max_iterations=max_iterations, options=options,
                                       progress=progress, executor=executor,
                                       result_type=IdentificationResult)
        else:
            result = _minimize(exps, free, first, scales, sb, method, max_iterations, options,
                               progress, executor)
        if stage is not None:
            _after_shooting(result, stage, exps, start, executor, t_start)
        result.verdict = fit_verdict(exps, result.values, executor)
        if result.verdict is not None and result.verdict.local_minimum:
            # wherever the optimiser stopped, the data say the fit is wrong
            result.success = False
            result.message = f"{result.message}; but {result.verdict.message}"
        if statistics:
            result.statistics, result.statistics_note = statistics_or_reason(
                exps, free, result.values, noise=noise, executor=executor)
        else:
            result.statistics_note = None           # not asked for: nothing to say
    return result


def _after_shooting(result, stage, exps, start, executor, t_start) -> None:
    """The polish's result as the identification's: from the user's start, with the
    multiple-shooting stage's counts and report."""
    try:
        start_cost = sum(r.cost for r in evaluate_many(exps, start, executor, gradient=False))
    except SimulationError:
        start_cost = math.nan            # single shooting cannot even run from there
    result.start, result.start_cost = dict(start), float(start_cost)
    result.shooting = stage
    result.n_iterations += stage.iterations
    result.n_simulations += stage.evaluations * len(exps) + len(exps)
    result.n_gradients += stage.jacobians * len(exps)
    result.wall_time = time.perf_counter() - t_start
    result.message = f"single shooting from the multiple-shooting result: {result.message}"


class _BestSoFar:
    """The progress hook of an identification that also keeps its best iterate, so that Ctrl-C
    can report it (``on_interrupt``); reports to the user's ``progress`` as before."""

    def __init__(self, progress: bool | Callable):
        self.progress = progress
        self.best: dict | None = None

    def __bool__(self) -> bool:       # "print the progress?" stays the user's choice
        return bool(self.progress)

    def __call__(self, entry: dict) -> None:
        if self.best is None or entry["cost"] < self.best["cost"]:
            self.best = entry
        report(entry, self.progress)

    @contextmanager
    def on_interrupt(self):
        try:
            yield
        except KeyboardInterrupt as exc:
            if self.best is None:
                raise
            where = str(exc) if isinstance(exc, Interrupted) else "interrupted"
            raise Interrupted(f"{where} during the identification (best at iteration "
                              f"{self.best['iteration']})", time=getattr(exc, "time", float("nan")),
                              t_end=getattr(exc, "t_end", float("nan")),
                              best=dict(self.best["values"]),
                              best_cost=float(self.best["cost"])) from exc


def _minimize(exps, free, start, scales, sb, method, max_iterations, options, progress,
              executor) -> IdentificationResult:
    w0 = np.array([start[k] for k in free]) / scales
    objective = _Objective(exps, free, scales, executor, progress)

    t_start = time.perf_counter()
    J0, g0 = objective(w0, strict=True)
    if not math.isfinite(J0):
        raise SimulationError(f"the cost is not finite at the start values {start}: {J0}")
    history = [{"iteration": 0, "cost": J0, "values": objective.physical(w0),
                "scaled": w0.tolist()}]

    def callback(intermediate_result):
        w = intermediate_result.x
        entry = {"iteration": len(history), "cost": float(intermediate_result.fun),
                 "values": objective.physical(w), "scaled": np.asarray(w).tolist()}
        history.append(entry)
        report(entry, progress)

    report(history[0], progress)
    opts = {**DEFAULT_OPTIONS[method], **dict(options or {})}
    opts.setdefault("maxiter", int(max_iterations))
    kwargs = {"hess": optimize.BFGS()} if method == "trust-constr" else {}
    res = optimize.minimize(objective, w0, jac=True, method=method, bounds=sb,
                            options=opts, callback=callback, **kwargs)
    w_best, (J_best, g_best) = _best_point(objective, res.x, history, sb)
    success, message = _verdict(res, method, g_best, g0)
    if objective.failures:
        message += (f"; {objective.failures} trial point(s) had no cost (simulation failed "
                    "or POD mode lost) or blew up (over ten times the largest cost seen) and "
                    "the line search backed off from them")
    return IdentificationResult(
        free=free, start=start, values=objective.physical(w_best),
        scales=dict(zip(free, scales.tolist())), start_cost=J0, cost=J_best,
        gradient=dict(zip(free, (g_best / scales).tolist())), history=history,
        n_iterations=int(getattr(res, "nit", len(history) - 1)),
        n_simulations=objective.evaluations, n_gradients=objective.evaluations,
        wall_time=time.perf_counter() - t_start, success=success, message=message,
        method=method, experiment_costs=dict(objective.per_experiment),
    )


def _feasible(w, sb) -> bool:
    return sb is None or all((lo is None or x >= lo) and (hi is None or x <= hi)
                             for x, (lo, hi) in zip(w, sb))


def _best_point(objective, w_end, history, sb):
    """The optimiser may end on a trial point (and trust-constr does not keep its iterates
    inside the bounds): keep the best feasible iterate seen."""
    w_best = np.asarray(w_end)
    value = objective(w_best)
    candidates = [e for e in history if _feasible(e["scaled"], sb)]
    best = min(candidates, key=lambda e: e["cost"]) if candidates else None
    if best is not None and (best["cost"] < value[0] or not _feasible(w_best, sb)):
        w_best = np.array(best["scaled"])
        value = objective(w_best)
    return w_best, value


def _verdict(res, method, g_best, g0) -> tuple[bool, str]:
    message, success = str(res.message), bool(res.success)
    stalled = "ABNORMAL" in message or "precision loss" in message.lower()
    if stalled and method in ("L-BFGS-B", "BFGS"):
        # with ftol = gtol = 0 this is the normal end: no step along the search direction
        # lowers J any more. Call it converged when the gradient has also collapsed.
        g_rel = float(np.max(np.abs(g_best)) / max(np.max(np.abs(g0)), 1e-300))
        success = g_rel <= 1e-6
        message = ("stopped because the line search could not lower the cost any further; "
                   f"max|gradient| fell to {g_rel:.1e} of its start value "
                   f"(scipy: {message.strip()})")
    return success, message
