"""The segments of multiple shooting: where a record is cut, what each piece of it fits, and
one run of a piece from its own start state with its exact derivatives.

A segment is a stretch of an experiment's time grid, run as a simulation of its own: the
first from the experiment's start (the scenario's initial state at the parameters), every
other from a start state that is an unknown beside the parameters. That state is given in
one of two ways:

* ``"states"`` (a model without constraints): the coordinates and velocities themselves,
  (q, v), 2 n numbers;
* ``"parameters"``: values of the model's start parameters, those that appear only in its
  ``initial_state`` expressions (a four-bar's crank angle and speed): the model's own
  expressions then give a start on the constraints, C(q, t) = 0 and C_q v + C_t = 0, with
  their exact derivatives (:func:`~symdae.simulation.initial.init_tangent`), as they do for
  the experiment's own start.

A segment keeps the data samples that fall on its stretch of grid (each sample in exactly one
segment, with the weights of the whole record), so the segments' misfits add up to the
experiment's least-squares cost when their trajectories join.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy import optimize

from ..errors import InputError, SimulationError
from ..model.kernels import split
from ..simulation.backends.base import Grid
from ..simulation.initial import given_start, start_tangent
from ..simulation.prepared import PreparedRun
from ..simulation.sensitivity import singular, sweep_data
from ..simulation.system import System
from ..simulation.trajectory import Trajectory
from ..threads import one_blas_thread
from .residuals import least_squares_terms

__all__ = ["MIN_SEGMENT_STEPS", "segment_cuts", "start_parameters", "SegmentSamples", "Segment",
           "SegmentRun", "segments_of", "run_segment", "measured_start", "guess_from_run",
           "start_jacobian", "continuity_rows", "fit_segment_state"]

# a segment shorter than this is a restart every few steps: its start state would be fixed by
# the continuity of its neighbours rather than by its own data
MIN_SEGMENT_STEPS = 4


def segment_cuts(scenario, segment_length: float, what: str = "experiment") -> list[int]:
    """Grid indices 0 = i_0 < i_1 < ... < i_K = N where the record is cut: segments of
    ``segment_length`` (rounded to whole steps), the last one taking the remainder."""
    N, h = scenario.n_steps, scenario.h
    span = scenario.t_end - scenario.t0
    if segment_length > span * (1 + 1e-12):
        raise InputError(f"MultipleShooting(segment_length={segment_length!r}) is longer than "
                         f"the record of {what} ({span:g} s from t0 = {scenario.t0:g}): give "
                         "a shorter segment_length")
    steps = int(round(segment_length / h))
    if steps < MIN_SEGMENT_STEPS:
        raise InputError(f"MultipleShooting(segment_length={segment_length!r}) is {steps} "
                         f"step(s) of h = {h:g} in {what}; a segment needs at least "
                         f"{MIN_SEGMENT_STEPS} steps ({MIN_SEGMENT_STEPS * h:g} s)")
    K = max(N // steps, 1)
    return [k * steps for k in range(K)] + [N]


def start_parameters(model, names: Sequence[str] | None = None) -> list[str]:
    """The parameters that set a segment's start through the model's ``initial_state``:
    ``names`` checked, or those found in the initial-state expressions and nowhere else in
    the model (they then move the start only). A constrained model needs 2 (n - m) of them
    (its degrees of freedom, positions and velocities)."""
    params = list(model.parameters)
    pnames = [str(s) for s in params]
    start_syms = set().union(*(e.free_symbols for e in
                               model.initial_positions + model.initial_velocities))
    if names is not None:
        names = [str(k) for k in names]
        unknown = [k for k in names if k not in pnames]
        if unknown:
            raise InputError(f"MultipleShooting(start_parameters={names}): {unknown} are not "
                             f"parameters of model {model.name!r} ({pnames})")
        inert = [k for k in names if params[pnames.index(k)] not in start_syms]
        if inert:
            raise InputError(f"MultipleShooting(start_parameters={names}): {inert} do not "
                             f"appear in the initial_state of model {model.name!r}, so they "
                             "cannot move a segment's start")
        return names
    elsewhere = set()
    exprs = [model.forces, *model.constraints, *model.outputs.values()]
    exprs.append(model.mass_matrix if model.mass_matrix is not None else model.lagrangian)
    for e in exprs:
        elsewhere |= e.free_symbols
    return [k for k, s in zip(pnames, params) if s in start_syms and s not in elsewhere]


@dataclass(frozen=True)
class SegmentSamples:
    """The samples of one fitted output that lie on a segment: the model's value at sample j
    is ``(1 - theta_j) s[index_j] + theta_j s[index_j + 1]`` on the segment's grid rows
    (``theta`` None: on grid points), compared with ``values`` at weight ``sqrt_weight**2``."""

    output: str
    column: int
    index: np.ndarray
    theta: np.ndarray | None
    values: np.ndarray
    sqrt_weight: np.ndarray

    def at(self, grid_values: np.ndarray) -> np.ndarray:
        """The segment's values at these samples from its values on the grid (first axis)."""
        x = np.asarray(grid_values)
        if self.theta is None:
            return x[self.index]
        th = self.theta.reshape((-1,) + (1,) * (x.ndim - 1))
        return (1.0 - th) * x[self.index] + th * x[self.index + 1]


@dataclass(frozen=True)
class Segment:
    """Grid rows ``first`` .. ``last`` of experiment ``experiment`` run on their own.

    ``start``: ``"scenario"`` (the experiment's own start: the first segment), ``"states"``
    (its unknowns are q and v) or ``"parameters"`` (its unknowns are the values of
    ``state_parameters``, model parameter indices ``state_index``). ``free_index``: the model
    indices of the free parameters. ``params``: the experiment's fixed parameters.
    """

    experiment: str
    index: int
    system: System
    prepared: PreparedRun
    first: int
    last: int
    params: Mapping
    free: tuple
    free_index: tuple
    start: str
    state_parameters: tuple
    state_index: tuple
    samples: tuple

    @property
    def t0(self) -> float:
        """The segment's start time."""
        return float(self.prepared.t[0])

    @property
    def t_end(self) -> float:
        """The segment's end time."""
        return float(self.prepared.t[-1])

    @property
    def n_state(self) -> int:
        """How many unknowns its start state has (0 for the experiment's own start)."""
        if self.start == "scenario":
            return 0
        return 2 * self.system.model.n if self.start == "states" else len(self.state_index)

    @property
    def n_samples(self) -> int:
        """Fitted samples on this segment."""
        return sum(len(s.values) for s in self.samples)

    def where(self) -> str:
        """'segment k (t = a .. b s) of experiment e', for messages."""
        return (f"segment {self.index} (t = {self.t0:g} .. {self.t_end:g} s) of experiment "
                f"{self.experiment!r}")


@dataclass
class SegmentRun:
    """One run of a segment: weighted residuals ``r`` (its samples), start and end states
    (q, v) as 2 n vectors and, with the Jacobian, their derivatives with respect to
    (free parameters, own start unknowns): ``J`` (samples x nd), ``d_start``, ``d_end``
    (2 n x nd)."""

    r: np.ndarray
    x_start: np.ndarray
    x_end: np.ndarray
    trajectory: Trajectory
    J: np.ndarray | None = None
    d_start: np.ndarray | None = None
    d_end: np.ndarray | None = None


def _samples_on(full, weights, column, output, rows, first, last, final) -> SegmentSamples:
    grid_index = np.arange(rows)[full.index] if isinstance(full.index, slice) else \
        np.asarray(full.index)
    keep = (grid_index >= first) & ((grid_index < last) | (final & (grid_index == last)))
    theta = None if full.theta is None else np.asarray(full.theta)[keep]
    return SegmentSamples(output, column, grid_index[keep] - first, theta,
                          np.asarray(full.values)[keep], np.sqrt(np.asarray(weights)[keep]))


def segments_of(experiment, free: Sequence[str], cuts: Sequence[int], start: str,
                state_parameters: Sequence[str] = (), label: str | None = None
                ) -> list[Segment]:
    """The segments of ``experiment`` cut at grid indices ``cuts``, their unknown starts
    given as ``start`` (``"states"`` or ``"parameters"`` of ``state_parameters``)."""
    system, model = experiment.system, experiment.system.model
    prep = experiment.prepared()
    sc, t, U = prep.scenario, prep.t, prep.U
    names = model.parameter_names
    outputs = model.output_names
    label = experiment.name if label is None else label
    full = []
    for term in least_squares_terms(experiment.cost)[0]:
        for output in term.outputs:
            if output not in outputs:
                raise InputError(f"experiment {label!r}: the model has no output {output!r}; "
                                 f"its outputs are {outputs}")
            samples, w = term.compared(t, output)
            full.append((samples, w, outputs.index(output), output))
    segs = []
    for k, (first, last) in enumerate(zip(cuts[:-1], cuts[1:])):
        kind = "scenario" if k == 0 else start
        changes: dict[str, object] = {"t0": float(t[first]), "t_end": float(t[last])}
        if k:
            changes.update(q0=None, v0=None, inputs=None)
        seg_sc = sc.replace(**changes)
        grid = Grid(sc.t0, sc.h, last - first, sc.alpha, first, sc.scheme)
        seg_prep = PreparedRun(seg_sc, t[first:last + 1], U[first:last + 1], grid,
                               prep.start if k == 0 else None)
        samples = tuple(_samples_on(s, w, col, out, len(t), first, last,
                                    last == cuts[-1])
                        for s, w, col, out in full)
        segs.append(Segment(label, k, system, seg_prep, first, last, dict(experiment.params),
                            tuple(free), tuple(names.index(f) for f in free), kind,
                            tuple(state_parameters),
                            tuple(names.index(s) for s in state_parameters), samples))
    return segs


def _states(traj: Trajectory) -> tuple[np.ndarray, np.ndarray]:
    """(q, v) of a run that kept its states (every segment's run does)."""
    if traj.q is None or traj.v is None:
        raise SimulationError("a segment's run kept no states")
    return traj.q, traj.v


def _directions(seg: Segment, with_state: bool):
    """(D, dq, dv): the parameter directions and start-state moves of (free parameters, own
    start unknowns)."""
    n, n_p = seg.system.model.n, seg.system.sizes.n_p
    nz = seg.n_state if with_state else 0
    nd = len(seg.free_index) + nz
    D, dq, dv = np.zeros((n_p, nd)), np.zeros((n, nd)), np.zeros((n, nd))
    for j, i in enumerate(seg.free_index):
        # a free parameter that is one of this segment's start parameters is replaced by the
        # segment's own value: it does not move this segment
        if not (seg.start == "parameters" and i in seg.state_index):
            D[i, j] = 1.0
    nf = len(seg.free_index)
    if nz and seg.start == "states":
        dq[:, nf:nf + n] = np.eye(n)
        dv[:, nf + n:] = np.eye(n)
    elif nz:
        for j, i in enumerate(seg.state_index):
            D[i, nf + j] = 1.0
    return D, dq, dv


def run_segment(seg: Segment, free_values: Mapping, z: np.ndarray | None = None, *,
                jacobian: bool = False, trajectory: Trajectory | None = None,
                state_jacobian_only: bool = False) -> SegmentRun:
    """Run ``seg`` at the free parameters ``free_values`` from its start unknowns ``z``
    (ignored for the experiment's own start); with ``jacobian``, the exact derivatives by
    one tangent sweep (on ``trajectory`` when it is this run's). ``state_jacobian_only``:
    derivatives with respect to ``z`` alone (a segment's start fitted on its own)."""
    system, model = seg.system, seg.system.model
    n = model.n
    params = {**seg.params, **free_values}
    prep = seg.prepared
    if seg.start == "states":
        z = np.asarray(z, dtype=float)
        prep = dataclasses.replace(prep, start=given_start(model, z[:n], z[n:]))
    elif seg.start == "parameters":
        params.update(zip(seg.state_parameters, np.asarray(z, dtype=float).tolist()))
    with one_blas_thread():
        traj = trajectory if trajectory is not None else \
            system.run(prep, params, keep_time_terms=jacobian)
        r = np.concatenate([s.sqrt_weight * (s.at(traj.outputs[s.output]) - s.values)
                            for s in seg.samples]) if seg.samples else np.zeros(0)
        q, v = _states(traj)
        out = SegmentRun(r, np.concatenate([q[0], v[0]]), np.concatenate([q[-1], v[-1]]),
                         traj)
        if not jacobian:
            return out
        sw = sweep_data(system, traj)
        fwd = sw.forward
        D, dq, dv = _directions(seg, seg.start != "scenario")
        if state_jacobian_only:
            cols = slice(len(seg.free_index), None)
            D, dq, dv = D[:, cols], dq[:, cols], dv[:, cols]
        dx0 = start_tangent(system.backend, sw.x0, fwd.p, seg.t0, fwd.U[0], D, dq, dv)
        res = system.backend.tangent(fwd, D, tuple(x.T for x in dx0), states=False)
    singular(res.report, f"tangent sweep of {seg.where()}")
    ds = res.ds            # (rows, nd, n_s)
    out.J = (np.vstack([s.sqrt_weight[:, None] * s.at(ds[:, :, s.column])
                        for s in seg.samples]) if seg.samples else np.zeros((0, D.shape[1])))
    out.d_start = np.vstack([dx0[0], dx0[1]])
    end = res.end
    out.d_end = np.vstack([end[0].T, end[1].T])
    return out


# ------------------------------------------------------------------ start states
def _measured(model, outputs: Sequence[str]) -> tuple[dict, dict]:
    """{coordinate index: output} of fitted outputs that are a coordinate, and likewise of
    those that are a coordinate's velocity."""
    pos: dict[int, str] = {}
    vel: dict[int, str] = {}
    for name in outputs:
        expr = model.outputs[name]
        if expr in model.coordinates:
            pos.setdefault(model.coordinates.index(expr), name)
        elif expr in model.velocities:
            vel.setdefault(model.velocities.index(expr), name)
    return pos, vel


def _start_map(seg: Segment) -> list[tuple[str, int] | None]:
    """Per start unknown of ``seg``: ("q" or "v", coordinate index) of the state it is, or
    None for a start parameter that is not simply a coordinate's or velocity's start."""
    model = seg.system.model
    n = model.n
    out: list[tuple[str, int] | None] = []
    if seg.start == "states":
        out += [("q", j) for j in range(n)] + [("v", j) for j in range(n)]
        return out
    syms = {str(s): s for s in model.parameters}
    for name in seg.state_parameters:
        s = syms[name]
        where = None
        for j in range(n):
            if model.initial_positions[j] == s:
                where = ("q", j)
            elif model.initial_velocities[j] == s and where is None:
                where = ("v", j)
        out.append(where)
    return out


def measured_start(experiment, segs: Sequence[Segment], window: int = 11,
                   polyorder: int = 3) -> np.ndarray | None:
    """Start unknowns of ``segs`` (all but the first) from the data, where the fitted outputs
    determine them: positions from the samples of outputs that are coordinates at the
    segment's start time, velocities from outputs that are velocities or else from a
    Savitzky-Golay derivative (``window`` samples, ``polyorder``) of the position samples;
    None when some start unknown is not measured."""
    rest = [s for s in segs if s.start != "scenario"]
    if not rest:
        return np.zeros((0, 0))
    model = experiment.system.model
    t_grid = experiment.prepared().t
    fitted: dict = {}
    for term in least_squares_terms(experiment.cost)[0]:
        for output in term.outputs:
            fitted.setdefault(output, term.compared(t_grid, output)[0])
    pos, vel = _measured(model, list(fitted))
    where = [w for w in _start_map(rest[0]) if w is not None]
    if len(where) != rest[0].n_state or any(
            w[1] not in pos if w[0] == "q" else (w[1] not in vel and w[1] not in pos)
            for w in where):
        return None
    signals = {}
    for kind, j in where:
        if kind == "q":
            smp = fitted[pos[j]]
            signals[kind, j] = (smp.t, np.asarray(smp.values))
        elif j in vel:
            smp = fitted[vel[j]]
            signals[kind, j] = (smp.t, np.asarray(smp.values))
        else:
            smp = fitted[pos[j]]
            signals[kind, j] = (smp.t, _derivative(smp.t, np.asarray(smp.values), window,
                                                    polyorder))
    z = np.empty((len(rest), len(where)))
    for k, seg in enumerate(rest):
        for c, key in enumerate(where):
            ts, xs = signals[key]
            z[k, c] = np.interp(seg.t0, ts, xs)
    return z


def _derivative(t: np.ndarray, x: np.ndarray, window: int, polyorder: int) -> np.ndarray:
    """dx/dt of samples: a Savitzky-Golay derivative on evenly spaced samples (it smooths
    noise while it differentiates), numpy.gradient on uneven ones."""
    dt = np.diff(t)
    if len(x) > polyorder + 1 and np.ptp(dt) <= 1e-6 * np.mean(dt):
        from scipy.signal import savgol_filter  # only a shooting start needs it
        w = min(int(window), len(x) if len(x) % 2 else len(x) - 1)
        w = max(w, polyorder + 2 if polyorder % 2 else polyorder + 1)
        return savgol_filter(x, w, polyorder, deriv=1, delta=float(np.mean(dt)))
    return np.gradient(x, t)


def guess_from_run(segs: Sequence[Segment], traj: Trajectory, params: Mapping) -> np.ndarray:
    """Start unknowns of ``segs`` (all but the first) from a run of the whole record
    (``traj``, at ``params``): its states at each segment's start, or for start parameters
    the values whose initial-state expressions come closest to them (least squares with the
    model's exact initial-state Jacobian), from the run's parameter values."""
    rest = [s for s in segs if s.start != "scenario"]
    if not rest:
        return np.zeros((0, 0))
    out = []
    for seg in rest:
        q, v = _states(traj)
        x = np.concatenate([q[seg.first], v[seg.first]])
        out.append(x if seg.start == "states" else _parameters_for_state(seg, x, params))
    return np.array(out)


def _with_state(seg: Segment, params: Mapping, z) -> np.ndarray:
    """The parameter vector of ``seg`` at ``params`` with its start parameters at ``z``."""
    p = seg.system.parameter_vector({**seg.params, **params})
    p[list(seg.state_index)] = z
    return p


def start_jacobian(seg: Segment, params: Mapping, z: np.ndarray) -> np.ndarray:
    """d(q0, v0)/dz (2 n x unknowns) of a segment's start at its unknowns ``z``: the identity
    for (q, v), the model's exact initial-state Jacobian for start parameters."""
    system = seg.system
    n, sizes = system.model.n, system.sizes
    if seg.start == "states":
        return np.eye(2 * n)
    zero = np.zeros(n)
    flat = system.backend.evaluate("initial_state_jacobian", seg.t0, zero, zero, zero,
                                   np.zeros(sizes.m), _with_state(seg, params, z),
                                   seg.prepared.U[0])
    blocks = split("initial_state_jacobian", flat, sizes)
    return np.vstack([blocks["q0_p"], blocks["v0_p"]])[:, list(seg.state_index)]


def continuity_rows(A: np.ndarray) -> np.ndarray:
    """The entries of (q, v) in which a gap is measured at a start whose Jacobian with respect
    to its unknowns is ``A`` (2 n x unknowns): as many as A has rank, those that move most
    independently (QR with column pivoting of A^T). All of them without constraints; with
    constraints, a set of independent coordinates and velocities: the index-3 scheme keeps
    a run's positions on C = 0 but lets its velocities drift off C_q v + C_t = 0 by a
    discretisation error, so a gap in every velocity could not close."""
    R, piv = scipy.linalg.qr(A.T, mode="r", pivoting=True)
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > 1e-10 * d[0])) if d.size and d[0] > 0 else 0
    return np.sort(piv[:rank])


def _parameters_for_state(seg: Segment, x: np.ndarray, params: Mapping) -> np.ndarray:
    system = seg.system
    idx = list(seg.state_index)

    def fun(z):
        q0, v0 = system.backend.model_start(seg.t0, _with_state(seg, params, z),
                                            seg.prepared.U[0])
        return np.concatenate([q0, v0]) - x

    z0 = system.parameter_vector({**seg.params, **params})[idx]
    return optimize.least_squares(fun, z0, jac=lambda z: start_jacobian(seg, params, z),
                                  xtol=1e-12, ftol=1e-12, gtol=1e-12).x


def fit_segment_state(seg: Segment, free_values: Mapping, z0: np.ndarray,
                      scale: np.ndarray) -> np.ndarray:
    """The start unknowns of ``seg`` that fit its own data best at the parameters
    ``free_values`` (scipy.optimize.least_squares from ``z0``, unknowns scaled by
    ``scale``)."""
    size = [None]

    def fun(y):
        try:
            r = run_segment(seg, free_values, y * scale).r
        except SimulationError:
            if size[0] is None:
                raise
            return np.full(size[0], np.inf)
        size[0] = r.size
        return r

    def jac(y):
        return run_segment(seg, free_values, y * scale, jacobian=True,
                           state_jacobian_only=True).J * scale

    return optimize.least_squares(fun, z0 / scale, jac=jac, xtol=1e-10, ftol=1e-12,
                                  gtol=1e-12, max_nfev=100).x * scale
