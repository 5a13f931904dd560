"""Multiple shooting: identification that reaches the fit from far-off start values on long
records.

Over a long record a small error in a frequency accumulates a phase error, and the
single-shooting cost has a narrow basin around the truth and a local minimum next to every
other period. Multiple shooting (Bock) cuts the record into segments
(:mod:`symdae.identification.segments`); each starts from its own state, an unknown beside
the parameters (from the data where the fitted outputs measure it), so no segment is long
enough to lose its phase. The continuity gaps d_k = x_end,k - x_start,k+1 (positions and
velocities) must vanish at the solution.

The formulation: scipy.optimize.least_squares (trf) on the stacked residuals

    F(x) = [ r_data(x) ; sqrt(mu) (g(x) + lambda / mu) ],   x = (p / scale, s_1, ..., s_K-1),

an augmented Lagrangian of the continuity constraints g = 0 (gaps scaled by the spread of
each coordinate and velocity over the segments' starts): after each solve lambda <- lambda
+ mu g, and mu grows a hundredfold when the largest gap has not fallen a hundredfold. Early
on the gaps are soft, so the segments follow their data while the parameters move (a first
weight a hundred times larger stalled the pendulum of models/pendulum_angle.py at p = 48.7
from p0 = 50, truth 10, where the soft start reaches the truth); the multiplier then closes
the gaps to round-off without an infinite weight. The Jacobian is exact and
block sparse: a segment's residuals depend on the parameters and its own start only, from
one tangent sweep along them (:func:`~symdae.identification.segments.run_segment`).

A segment restarts the HHT scheme from (q, v) with consistent accelerations, so at zero gaps
it still differs from the long run by a discretisation term; :func:`symdae.identify`
therefore finishes with single shooting from the result (in the basin: a few iterations),
and its answer is the single-shooting optimum.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from ..errors import InputError, SimulationError
from ..progress import report
from .experiment import experiment_labels, map_calls
from .residuals import least_squares_terms
from .segments import (
    continuity_rows,
    fit_segment_state,
    guess_from_run,
    measured_start,
    run_segment,
    segment_cuts,
    segments_of,
    start_jacobian,
    start_parameters,
)

__all__ = ["MultipleShooting", "ShootingProblem", "ShootingReport", "multiple_shooting",
           "STATE_SOURCES"]

STATE_SOURCES = ("auto", "data", "fit")


@dataclass(frozen=True)
class MultipleShooting:
    """Multiple shooting as the strategy of :func:`symdae.identify` (``shooting=``).

    Parameters
    ----------
    segment_length:
        Length of a segment in seconds (rounded to whole steps; the last segment takes the
        remainder). Short enough that a start value's frequency error cannot build up a
        phase error of half a period within one segment: about one period of the slowest
        motion the data show, less for starts far off.
    states:
        How the segments' start states are first guessed: ``"auto"`` (default: ``"data"``
        where the fitted outputs measure them, else ``"fit"``), ``"data"`` (positions from
        outputs that are coordinates, at each segment's start, velocities from outputs that
        are velocities or from a Savitzky-Golay derivative of the positions), ``"fit"``
        (each segment's start fitted to its own data at the start parameters, from a run at
        them), or the values: an array (segments - 1, unknowns per start) for one
        experiment, a list of them for several. The unknowns are (q, v) for a model without
        constraints, else the ``start_parameters``.
    start_parameters:
        The parameters that set a segment's start through the model's ``initial_state``
        expressions (a constrained model's starts must lie on its constraints: the model's
        expressions put them there); default: those that appear in the initial state and
        nowhere else. Not used for a model without constraints.
    gap_tolerance:
        Largest continuity gap (relative to the spread of its coordinate or velocity over the
        segments) at which multiple shooting has converged.
    gap_weight:
        The first weight of the gaps: a gap of one spread counts as much as this fraction of
        the data's variance shared among the gaps.
    max_rounds:
        Augmented-Lagrangian rounds (each a least-squares solve) at most.
    window:
        Samples of the Savitzky-Golay derivative (odd; cubic fit) for velocities from data.
    """

    segment_length: float
    states: Any = "auto"
    start_parameters: Sequence[str] | None = None
    gap_tolerance: float = 1e-10
    gap_weight: float = 1.0
    max_rounds: int = 30
    window: int = 11

    def __post_init__(self):
        for name in ("segment_length", "gap_tolerance", "gap_weight"):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, (int, float, np.floating)) or \
                    not math.isfinite(x) or not x > 0:
                raise InputError(f"MultipleShooting({name}={x!r}) must be a positive number")
        for name, least in (("max_rounds", 1), ("window", 5)):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < least:
                raise InputError(f"MultipleShooting({name}={x!r}) must be a whole number >= "
                                 f"{least}")
        if isinstance(self.states, str) and self.states not in STATE_SOURCES:
            raise InputError(f"MultipleShooting(states={self.states!r}) must be one of "
                             f"{list(STATE_SOURCES)} or arrays of start states")


@dataclass
class ShootingReport:
    """What the multiple-shooting stage of an identification did.

    ``values``: the parameters it ended at (single shooting polishes them);
    ``segments``: per experiment, how many; ``state_sources``: per experiment, where the
    first start states came from (``"data"``, ``"fit"`` or ``"given"``); ``gaps``: per
    experiment, the largest continuity gap at the end relative to its coordinate's spread;
    ``cost``: half the sum of squares of the segments' data residuals at the end.
    """

    values: dict
    segments: dict
    state_sources: dict
    gaps: dict
    cost: float
    rounds: int
    iterations: int
    evaluations: int
    jacobians: int
    wall_time: float
    success: bool
    message: str
    history: list = field(default_factory=list)

    @property
    def max_gap(self) -> float:
        """The largest relative gap over all experiments."""
        return max(self.gaps.values(), default=0.0)

    def to_dict(self) -> dict:
        """The report as plain values (the CLI's ``report.json``)."""
        return {"values": self.values, "segments": self.segments,
                "state_sources": self.state_sources, "gaps": self.gaps, "cost": self.cost,
                "rounds": self.rounds, "iterations": self.iterations,
                "evaluations": self.evaluations, "jacobians": self.jacobians,
                "wall_time_s": self.wall_time, "success": self.success,
                "message": self.message}

    def summary(self) -> str:
        """One line: segments, where their starts came from, the largest gap."""
        parts = [f"{k}: {self.segments[k]} segments, starts from {self.state_sources[k]}"
                 for k in self.segments]
        return (f"multiple shooting ({'; '.join(parts)}): {self.message}; largest gap "
                f"{self.max_gap:.1e} after {self.rounds} round(s), {self.iterations} "
                "iterations")


def _segment_call(seg, free_values, z, jacobian, trajectory):
    # module level, so that a process pool can pickle the call; the segment named in the
    # error's message itself (a note would not reach str(exc), which the CLI prints, and
    # Python 3.10 has none), the error's class and attributes (NewtonError's time) kept
    try:
        return run_segment(seg, free_values, z, jacobian=jacobian, trajectory=trajectory)
    except SimulationError as exc:
        where = f"multiple shooting, {seg.where()}"
        if exc.args and isinstance(exc.args[0], str):
            exc.args = (f"{where}: {exc.args[0]}", *exc.args[1:])
        elif hasattr(exc, "add_note"):
            exc.add_note(f"({where})")
        raise


class ShootingProblem:
    """The stacked residuals of multiple shooting and their exact Jacobian.

    Unknowns x = (free parameters / ``scales``, then per experiment the start unknowns of its
    segments 1 .. K-1, each divided by its spread over the segments). :meth:`residuals`
    gives (r, g): the weighted data residuals of every segment (the experiments'
    least-squares costs when the gaps vanish) and the scaled continuity gaps;
    :meth:`jacobian` their derivatives (dense; exact, by one tangent sweep per segment).
    """

    def __init__(self, experiments, free: Sequence[str], start: Mapping,
                 shooting: MultipleShooting, *, scales=None, executor: Executor | None = None):
        self.experiments = list(experiments)
        self.free = list(free)
        self.scales = np.ones(len(free)) if scales is None else np.asarray(scales, float)
        self.executor = executor
        self.shooting = shooting
        self.evaluations = 0
        self.jacobians = 0
        self.labels = experiment_labels(self.experiments)
        self._check_costs()
        self.segments = [self._cut(e, label) for e, label in zip(self.experiments, self.labels)]
        self.state_sources: dict = {}
        self._key: bytes | None = None
        self._runs: list | None = None
        self._jac: tuple = (None, None)
        starts = self._first_states(start)
        self.state_scales = [_spread(Z) for Z in starts]
        self.x0 = np.concatenate([np.array([start[k] for k in self.free]) / self.scales]
                                 + [(Z / s).ravel() for Z, s in zip(starts, self.state_scales)])
        runs = self._evaluate(self.x0)
        # per experiment: the spread of each entry of (q, v) over the segments' starts, and
        # per gap the entries it is measured in (continuity_rows)
        self.gap_scales, self.gap_rows = [], []
        offset = 0
        free_values = self.physical(self.x0)
        for segs, Z in zip(self.segments, starts):
            X = np.array([run.x_start for run in runs[offset:offset + len(segs)]]
                         + [runs[offset + len(segs) - 1].x_end])
            self.gap_scales.append(_spread(X))
            self.gap_rows.append([continuity_rows(start_jacobian(seg, free_values, z))
                                  for seg, z in zip(segs[1:], Z)])
            offset += len(segs)
        self.n_gaps = sum(rows.size for per in self.gap_rows for rows in per)

    # ------------------------------------------------------------------ set-up
    def _check_costs(self):
        for e, label in zip(self.experiments, self.labels):
            ls, other = least_squares_terms(e.cost)
            if other or not ls:
                kinds = sorted({type(c).__name__ for c in other}) or ["none"]
                raise InputError(
                    f"shooting=MultipleShooting(...) fits least-squares costs in the time "
                    f"domain (LeastSquares); experiment {label!r} has cost terms "
                    f"{', '.join(kinds)}: identify it with shooting=None")

    def _cut(self, e, label):
        model = e.system.model
        cuts = segment_cuts(e.scenario, self.shooting.segment_length, f"experiment {label!r}")
        if model.m == 0 and self.shooting.start_parameters is None:
            return segments_of(e, self.free, cuts, "states", label=label)
        names = start_parameters(model, self.shooting.start_parameters)
        need = 2 * (model.n - model.m)
        if len(names) < need:
            raise InputError(
                f"MultipleShooting: model {model.name!r} has {model.m} constraint(s), so a "
                f"segment's start must lie on them; it is set through initial_state "
                f"expressions in {need} parameters that appear nowhere else (like "
                f"four_bar_joints' phi0 and omega0), found {names or 'none'}: write the "
                "initial state so, or name them with start_parameters=[...]")
        return segments_of(e, self.free, cuts, "parameters", names, label=label)

    def _first_states(self, start: Mapping) -> list[np.ndarray]:
        """Per experiment: (K-1, unknowns) first start states, and where they came from."""
        given = self.shooting.states
        if not isinstance(given, str):
            arrays = [given] if len(self.experiments) == 1 and not (
                isinstance(given, (list, tuple)) and len(given) == 1
                and np.ndim(given[0]) == 2) else list(given)
            if len(arrays) != len(self.experiments):
                raise InputError(f"MultipleShooting(states=...): {len(arrays)} arrays of "
                                 f"start states for {len(self.experiments)} experiments")
        out = []
        free_values = {k: float(start[k]) for k in self.free}
        for k, (e, segs, label) in enumerate(zip(self.experiments, self.segments,
                                                 self.labels)):
            rest = segs[1:]
            nz = rest[0].n_state if rest else 0
            if not isinstance(given, str):
                user = np.asarray(arrays[k], dtype=float)
                if user.shape != (len(rest), nz):
                    raise InputError(
                        f"MultipleShooting(states=...): the start states of experiment "
                        f"{label!r} have shape {user.shape}, expected {(len(rest), nz)} (one "
                        f"row per segment after the first, {_unknowns(rest)})")
                if not np.isfinite(user).all():
                    raise InputError(f"MultipleShooting(states=...): the start states of "
                                     f"experiment {label!r} are not all finite")
                self.state_sources[label] = "given"
                out.append(user)
                continue
            Z: np.ndarray | None = None
            if given in ("auto", "data") and rest:
                Z = measured_start(e, segs, self.shooting.window)
                if Z is None and given == "data":
                    raise InputError(
                        f"MultipleShooting(states='data'): the fitted outputs of experiment "
                        f"{label!r} do not measure every start unknown "
                        f"({_unknowns(rest)}): fit outputs that are these coordinates, or use "
                        "states='fit'")
            if Z is not None:
                self.state_sources[label] = "data"
            elif not rest:
                Z = np.zeros((0, nz))
                self.state_sources[label] = "data"
            else:
                Z = self._fit_states(e, segs, label, free_values)
                self.state_sources[label] = "fit"
            out.append(Z)
        return out

    def _fit_states(self, e, segs, label, free_values) -> np.ndarray:
        rest = segs[1:]
        nz = rest[0].n_state
        thin = [s for s in rest if s.n_samples < nz]
        if thin:
            s = thin[0]
            raise InputError(
                f"MultipleShooting(segment_length={self.shooting.segment_length!r}): "
                f"{s.where()} has {s.n_samples} data sample(s), fewer than the {nz} start "
                "unknowns to fit to them: give longer segments, or the start states "
                "(states=...)")
        try:
            traj = e.simulate(free_values)
        except SimulationError as exc:
            raise SimulationError(f"MultipleShooting(states='fit'): the run of experiment "
                                  f"{label!r} at the start values, whose states start the "
                                  f"segments' fits, fails: {exc}") from exc
        Z0 = guess_from_run(segs, traj, free_values)
        scale = _spread(Z0)
        fitted = map_calls(fit_segment_state, [(s, free_values, z0, scale)
                                               for s, z0 in zip(rest, Z0)], self.executor)
        return np.array(fitted).reshape(len(rest), nz)

    # ------------------------------------------------------------------ unknowns
    def physical(self, x) -> dict:
        """{free parameter: value} of the unknowns ``x``."""
        return {k: float(v) for k, v in zip(self.free, np.asarray(x[:len(self.free)])
                                             * self.scales)}

    def states(self, x) -> list[np.ndarray]:
        """Per experiment, the (K-1, unknowns) start states in ``x``."""
        out, offset = [], len(self.free)
        for segs, s in zip(self.segments, self.state_scales):
            nz = segs[1].n_state if len(segs) > 1 else 0
            size = nz * (len(segs) - 1)
            out.append(np.asarray(x[offset:offset + size]).reshape(len(segs) - 1, nz) * s)
            offset += size
        return out

    def _calls(self, x, jacobian, trajectories=None):
        free_values = self.physical(x)
        calls, i = [], 0
        for segs, Z in zip(self.segments, self.states(x)):
            for k, seg in enumerate(segs):
                tr = None if trajectories is None else trajectories[i]
                calls.append((seg, free_values, Z[k - 1] if k else None, jacobian, tr))
                i += 1
        return calls

    def _evaluate(self, x):
        x = np.asarray(x, dtype=float)
        key = x.tobytes()
        if key != self._key:
            self._key, self._runs = None, None
            runs = map_calls(_segment_call, self._calls(x, False), self.executor)
            self.evaluations += 1
            self._key, self._runs = key, runs
        return self._runs

    # ------------------------------------------------------------------ residuals
    def residuals(self, x) -> tuple[np.ndarray, np.ndarray]:
        """(r, g) at ``x``: the segments' weighted data residuals and the scaled gaps."""
        runs = self._evaluate(x)
        r = np.concatenate([run.r for run in runs])
        gaps, offset = [], 0
        for segs, s, per in zip(self.segments, self.gap_scales, self.gap_rows):
            seg_runs = runs[offset:offset + len(segs)]
            gaps += [(a.x_end[rows] - b.x_start[rows]) / s[rows]
                     for a, b, rows in zip(seg_runs[:-1], seg_runs[1:], per)]
            offset += len(segs)
        return r, (np.concatenate(gaps) if gaps else np.zeros(0))

    def gaps(self, x) -> dict:
        """{experiment: largest magnitude of a scaled gap} at ``x``."""
        g = self.residuals(x)[1]
        out, offset = {}, 0
        for label, per in zip(self.labels, self.gap_rows):
            size = sum(rows.size for rows in per)
            out[label] = float(np.max(np.abs(g[offset:offset + size]), initial=0.0))
            offset += size
        return out

    def jacobian(self, x) -> tuple[np.ndarray, np.ndarray]:
        """(dr/dx, dg/dx) at ``x``, dense."""
        x = np.asarray(x, dtype=float)
        key = x.tobytes()
        if key == self._jac[0]:
            return self._jac[1]
        runs = self._evaluate(x)
        runs = map_calls(_segment_call, self._calls(x, True, [r.trajectory for r in runs]),
                         self.executor)
        self.jacobians += 1
        nf = len(self.free)
        rows_r = sum(run.r.size for run in runs)
        Jr = np.zeros((rows_r, x.size))
        Jg = np.zeros((self.n_gaps, x.size))
        row, grow, col, i = 0, 0, nf, 0
        for segs, zs, scale, per in zip(self.segments, self.state_scales, self.gap_scales,
                                        self.gap_rows):
            cols = []
            for k, seg in enumerate(segs):
                cols.append(slice(col, col + seg.n_state) if k else None)
                col += seg.n_state if k else 0
            seg_runs = runs[i:i + len(segs)]
            i += len(segs)
            for k, run in enumerate(seg_runs):
                m = run.r.size
                Jr[row:row + m, :nf] = run.J[:, :nf] * self.scales
                if k:
                    Jr[row:row + m, cols[k]] = run.J[:, nf:] * zs
                row += m
            for k, rows in enumerate(per):
                a, b = seg_runs[k], seg_runs[k + 1]
                gs = scale[rows][:, None]
                block = slice(grow, grow + rows.size)
                Jg[block, :nf] = (a.d_end[rows, :nf] - b.d_start[rows, :nf]) * self.scales / gs
                if k:
                    Jg[block, cols[k]] = a.d_end[rows, nf:] * zs / gs
                Jg[block, cols[k + 1]] = -b.d_start[rows, nf:] * zs / gs
                grow += rows.size
        self._jac = (key, (Jr, Jg))
        return Jr, Jg

    @property
    def data_energy(self) -> float:
        """sum of weight * (data - its mean)^2 over every fitted sample: twice the cost of a
        model that predicts each output's mean (the scale of the gap weight)."""
        total = 0.0
        for segs in self.segments:
            by_output: dict = {}
            for seg in segs:
                for s in seg.samples:
                    by_output.setdefault(s.output, []).append((s.values, s.sqrt_weight ** 2))
            for parts in by_output.values():
                y = np.concatenate([p[0] for p in parts])
                w = np.concatenate([p[1] for p in parts])
                total += float(np.sum(w * (y - np.mean(y)) ** 2))
        return total

    def segment_counts(self) -> dict:
        """{experiment: number of segments}."""
        return {label: len(segs) for label, segs in zip(self.labels, self.segments)}


def _spread(X: np.ndarray) -> np.ndarray:
    """Per column: the standard deviation over the rows, or where that vanishes the largest
    magnitude, or 1: the scale of a state over the segments."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    if X.size == 0:
        return np.ones(X.shape[1])
    s = np.std(X, axis=0)
    big = np.max(np.abs(X), axis=0)
    s = np.where(s > 1e-8 * np.maximum(big, 1e-300), s, big)
    return np.where(s > 0, s, 1.0)


def _unknowns(segs) -> str:
    if not segs:
        return "no unknowns"
    seg = segs[0]
    if seg.start == "states":
        names = seg.system.model.coordinate_names
        return "q then v of " + ", ".join(names)
    return "values of " + ", ".join(seg.state_parameters)


def _augmented(prob: ShootingProblem, mu: float, lam: np.ndarray, size: int, record):
    """(F, dF/dx) of one round: the data residuals and the gaps at weight mu, shifted by the
    multipliers lam / mu."""
    sqrt_mu, shift = math.sqrt(mu), lam / mu

    def fun(y):
        try:
            r, g = prob.residuals(y)
        except SimulationError:
            # a failed segment at a trial point: trf shrinks its trust region
            return np.full(size, np.inf)
        return np.concatenate([r, sqrt_mu * (g + shift)])

    def jac(y):
        Jr, Jg = prob.jacobian(y)
        record(y)
        return np.vstack([Jr, sqrt_mu * Jg])

    return fun, jac


def multiple_shooting(experiments, free: Sequence[str], start: Mapping,
                      shooting: MultipleShooting, *, scales=None, scaled_bounds=None,
                      max_iterations: int = 500, executor: Executor | None = None,
                      progress: bool | Callable = False) -> ShootingReport:
    """The multiple-shooting stage: from ``start``, the parameters at which the segments fit
    their data with continuity gaps below ``shooting.gap_tolerance`` (the module docstring
    has the method). ``scaled_bounds``: bounds on free / scales, as :func:`symdae.identify`
    makes them; ``max_iterations``: Jacobian evaluations at most, over all rounds."""
    t_start = time.perf_counter()
    prob = ShootingProblem(experiments, free, start, shooting, scales=scales,
                           executor=executor)
    nf = len(prob.free)
    lb = np.full(prob.x0.size, -np.inf)
    ub = np.full(prob.x0.size, np.inf)
    for j, (lo, hi) in enumerate(scaled_bounds or []):
        lb[j] = -np.inf if lo is None else lo
        ub[j] = np.inf if hi is None else hi
    x = np.clip(prob.x0, lb, ub)
    history: list = []
    mu = shooting.gap_weight * max(prob.data_energy, 1e-300) / max(prob.n_gaps, 1)
    lam = np.zeros(prob.n_gaps)
    rounds, iterations, success = 0, 0, False
    g_before = math.inf
    message = "no rounds"
    size = sum(part.size for part in prob.residuals(x))

    def record(y):
        # scipy asks for the Jacobian once per accepted iterate: one history line each
        r, g = prob.residuals(y)
        entry = {"iteration": len(history), "cost": 0.5 * float(r @ r),
                 "gap": float(np.max(np.abs(g), initial=0.0)),
                 "values": prob.physical(y), "scaled": np.asarray(y[:nf]).tolist(),
                 "stage": "multiple shooting"}
        history.append(entry)
        report(entry, progress)

    while rounds < shooting.max_rounds and iterations < max_iterations:
        rounds += 1
        fun, jac = _augmented(prob, mu, lam, size, record)
        out = optimize.least_squares(fun, x, jac=jac, bounds=(lb, ub), method="trf",
                                     ftol=1e-12, xtol=1e-12, gtol=1e-12,
                                     max_nfev=max(1, max_iterations - iterations))
        iterations += int(out.njev or 0)
        x = out.x
        g = prob.residuals(x)[1]
        g_max = float(np.max(np.abs(g), initial=0.0))
        if g_max <= shooting.gap_tolerance:
            success = True
            message = (f"converged: largest gap {g_max:.1e} <= gap_tolerance "
                       f"{shooting.gap_tolerance:g} (scipy: {out.message})")
            break
        lam = lam + mu * g
        if g_max > 0.01 * g_before:
            mu *= 100.0
        g_before = g_max
        message = (f"stopped after {rounds} round(s) and {iterations} iterations with the "
                   f"largest gap {g_max:.1e} above gap_tolerance {shooting.gap_tolerance:g}")
    r = prob.residuals(x)[0]
    return ShootingReport(
        values=prob.physical(x), segments=prob.segment_counts(),
        state_sources=dict(prob.state_sources), gaps=prob.gaps(x), cost=0.5 * float(r @ r),
        rounds=rounds, iterations=iterations, evaluations=prob.evaluations,
        jacobians=prob.jacobians, wall_time=time.perf_counter() - t_start, success=success,
        message=message, history=history)
