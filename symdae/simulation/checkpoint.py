"""Memory-bounded gradients: run the forward sweep in segments, keep a checkpoint at the start
of each, recompute each segment once for the adjoint (or the tangent) sweep.

A gradient needs the states of every step (the adjoint runs backwards over them). When they fit
in the memory budget, one segment holds the whole run and nothing is recomputed. When they do
not (a run-up of 10^6 steps of a 42 x 42 model), the run is cut into segments of L steps: the
forward pass keeps only the outputs and, per segment, a checkpoint (the state at its first step
plus the Newton start values and round-off levels that make a restart take the very steps of
the long run); the backward pass recomputes one segment at a time from its checkpoint and runs
the adjoint over it, carrying the adjoint state from segment to segment. The extra memory is
about L rows of states plus the checkpoints; the price is one more forward sweep. The
gradient equals the one-segment gradient to round-off (the same trajectory, bit for bit; only
the summation order of the parameter adjoint differs between segments).

Segments rather than a binomial (revolve) schedule: with one recomputation per step they
already bound memory to O(sqrt(N)) rows, which suffices for every run that fits the outputs
themselves; revolve would trade more recomputation for less memory than that.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, SimulationError
from ..threads import one_blas_thread
from .backends.base import Counters, Restart
from .initial import init_adjoint, init_tangent, initial_state
from .memory import format_bytes
from .prepared import PreparedRun
from .scenario import Scenario, physical_memory
from .sensitivity import (
    adjoint_gradient,
    check_dphi,
    directions,
    refuse_projected,
    singular,
)
from .trajectory import Trajectory

__all__ = ["MemoryPlan", "plan", "GradientRun", "cost_and_gradient", "DEFAULT_MEMORY_FRACTION",
           "checkpointed_sensitivities", "simulate_segments"]

DEFAULT_MEMORY_FRACTION = 0.25   # of the machine's memory, for the states a gradient keeps


@dataclass(frozen=True)
class MemoryPlan:
    """How a gradient run keeps its states: ``segment`` steps per segment (N: all of them,
    nothing recomputed), ``segments`` of them, and the bytes this takes."""

    steps: int
    segment: int
    segments: int
    state_bytes: int          # the states of one segment
    checkpoint_bytes: int     # all checkpoints
    budget: int

    @property
    def recomputes(self) -> bool:
        """Whether the run is split into segments (all but the last recomputed for the adjoint)."""
        return self.segments > 1


def _checkpoint_bytes(sizes) -> int:
    # state (3n + m), two rows of (a, lam), round-off levels (2 nm + 1), sparse LU orders
    # (2 nm int)
    return 8 * (sizes.nx + 2 * sizes.nm + 2 * sizes.nm + 1) + 4 * 2 * sizes.nm


@functools.lru_cache(maxsize=256)
def plan(sizes, steps: int, budget: int | None = None) -> MemoryPlan:
    """The segment length for ``steps`` steps of a model of these sizes in ``budget`` bytes
    (default: DEFAULT_MEMORY_FRACTION of this machine's memory); kept for the next run of the
    same length (an identification asks for it at every evaluation)."""
    budget = int(DEFAULT_MEMORY_FRACTION * physical_memory()) if budget is None else budget
    if not isinstance(budget, (int, np.integer)) or budget <= 0:
        raise InputError(f"memory budget must be a positive number of bytes, got {budget!r}")
    row, ck = sizes.gradient_row_bytes, _checkpoint_bytes(sizes)
    if (steps + 1) * row <= budget:
        return MemoryPlan(steps, steps, 1, (steps + 1) * row, 0, budget)
    # half the budget for one segment's states, half for the checkpoints
    length = max(1, budget // (2 * row) - 1)
    segments = math.ceil(steps / length)
    if segments * ck > budget // 2:
        least = 4 * math.sqrt(steps * row * ck)
        raise InputError(f"a gradient over {steps} steps needs a memory budget of at least "
                         f"about {format_bytes(least)} for its states and checkpoints, it is "
                         f"{format_bytes(budget)}: raise memory_budget")
    return MemoryPlan(steps, length, segments, (length + 1) * row, segments * ck, budget)


@dataclass(frozen=True)
class _Checkpoint:
    step: int
    state: tuple
    restart: Restart | None


@dataclass
class GradientRun:
    """J, dJ/dp (every model parameter) and how they were computed."""

    cost: float
    gradient: np.ndarray | None
    trajectory: Trajectory
    plan: MemoryPlan
    recomputed_steps: int


def _segments(system, sc: Scenario, p, U, x0, mplan: MemoryPlan, gradient: bool = False):
    """Forward pass: yield (checkpoint, forward result) per segment; with ``gradient`` the
    last segment (where the adjoint starts, without recomputing it) keeps its time terms."""
    state, restart, i0 = (x0.q, x0.v, x0.a, x0.lam, x0.a), None, 0
    while i0 < mplan.steps:
        length = min(mplan.segment, mplan.steps - i0)
        grid = sc.grid(length, i0)
        last = i0 + length == mplan.steps
        fwd = system.backend.forward(grid, p, U[i0:i0 + length + 1], state, sc.rtol,
                                     sc.max_iter, False, restart, time_terms=gradient and last,
                                     continues=not last)
        if not fwd.report.ok:
            system.raise_for_report(fwd.report, sc.grid())
        yield _Checkpoint(i0, state, restart), fwd
        state = fwd.state_end
        restart, i0 = fwd.restart, i0 + length


def _recompute(system, sc: Scenario, p, U, ck: _Checkpoint, length: int,
               time_terms: bool = False):
    grid = sc.grid(length, ck.step)
    fwd = system.backend.forward(grid, p, U[ck.step:ck.step + length + 1], ck.state, sc.rtol,
                                 sc.max_iter, False, ck.restart, time_terms=time_terms)
    if not fwd.report.ok:     # it ran before: only a non-deterministic model gets here
        raise SimulationError(f"recomputing the segment from step {ck.step} failed: "
                              f"{fwd.report}")
    return fwd


def simulate_segments(system, scenario, params=None, *, memory_budget: int | None = None):
    """A run too long to hold, in segments that keep at most ``memory_budget`` bytes of
    states: (the plan, an iterator of one :class:`Trajectory` per segment). Segment k covers
    its steps i0 .. i0 + L (its first row repeats the last of the one before); together they
    are the one long run, bit for bit. For writing a long run as it goes. ``scenario``: a
    Scenario, its fields, or a :class:`~symdae.simulation.prepared.PreparedRun` of
    ``system``."""
    prep = system.prepare(scenario)
    sc, t, U = prep.scenario, prep.t, prep.U
    mplan = plan(system.sizes, sc.n_steps, memory_budget)
    p = system.parameter_vector(params)
    x0 = initial_state(system.backend, system.model, p, sc.t0, U[0], sc.q0, sc.v0,
                       tol=sc.init_tol, project=sc.project, given=prep.start)

    def pieces():
        for ck, fwd in _segments(system, sc, p, U, x0, mplan):
            ts = t[ck.step:ck.step + fwd.grid.N + 1]
            system.check_outputs(fwd.S, ts)
            yield system.trajectory(ts, fwd.S, sc, p, fwd.report.counters.as_dict(),
                                    (fwd.q, fwd.v, fwd.a, fwd.lam))

    return mplan, pieces()


def cost_and_gradient(system, scenario, cost, params=None, *, gradient: bool = True,
                      memory_budget: int | None = None) -> GradientRun:
    """J of ``cost`` on the run ``scenario`` (a Scenario, its fields, or a
    :class:`~symdae.simulation.prepared.PreparedRun` of ``system``) and, with ``gradient``,
    dJ/dp by the discrete adjoint, keeping at most ``memory_budget`` bytes of states
    (checkpointed segments when the whole trajectory does not fit; see the module docstring).
    The sweeps run with one BLAS thread (:func:`symdae.threads.one_blas_thread`).

    The returned trajectory has the outputs on the whole grid; its states are those of the
    last segment only when the run was segmented (q, v, a, lam are None then).
    """
    with one_blas_thread():
        return _cost_and_gradient(system, system.prepare(scenario), cost, params, gradient,
                                  memory_budget)


def _cost_and_gradient(system, prep: PreparedRun, cost, params, gradient: bool,
                       memory_budget: int | None) -> GradientRun:
    sc = prep.scenario
    sz = system.sizes
    mplan = plan(sz, sc.n_steps, memory_budget)
    if not mplan.recomputes:
        # the adjoint reads the time terms and state terms the forward sweep keeps (plan
        # counts them) and factorises the Newton matrix at each state again: storing the
        # factorisations instead made J + gradient 4-6 % slower on the small models where
        # they take no more memory than the states (engine mount, pendulum, oscillator,
        # Cartesian four-bar; the same within 2 % on the double pendulum and four-bar in
        # joints), since the refactorisation overlaps the adjoint's chain of dependent
        # solves and the stored matrices were memory traffic in both sweeps
        traj = system.run(prep, params, False, keep_time_terms=gradient)
        if not gradient:    # J alone: no dJ/dS, an array of the trajectory's size
            return GradientRun(float(cost.value(system, traj)), None, traj, mplan, 0)
        J, dS = cost.evaluate(system, traj)
        grad = adjoint_gradient(system, traj, dS)
        return GradientRun(float(J), grad, traj, mplan, 0)
    p = system.parameter_vector(params)
    t, U = prep.t, prep.U
    x0 = initial_state(system.backend, system.model, p, sc.t0, U[0], sc.q0, sc.v0,
                       tol=sc.init_tol, project=sc.project, given=prep.start)
    if gradient:
        refuse_projected(x0)
    S = np.empty((sc.n_steps + 1, sz.n_s))
    checkpoints, counters = [], Counters()
    for ck, fwd in _segments(system, sc, p, U, x0, mplan, gradient):
        checkpoints.append(ck)
        S[ck.step:ck.step + fwd.grid.N + 1] = fwd.S
        counters = counters + fwd.report.counters
    last = fwd                    # the last segment's states: the adjoint starts on them
    system.check_outputs(S, t)
    traj = system.trajectory(t, S, sc, p, counters.as_dict())
    if not gradient:
        return GradientRun(float(cost.value(system, traj)), None, traj, mplan, 0)
    J, dS = cost.evaluate(system, traj)
    dS = check_dphi(system, dS, t)
    carry, recomputed = None, 0
    bounds = [ck.step for ck in checkpoints[1:]] + [sc.n_steps]
    for k in range(len(checkpoints) - 1, -1, -1):
        ck = checkpoints[k]
        length = bounds[k] - ck.step
        if k == len(checkpoints) - 1:
            fwd = last
        else:
            fwd = _recompute(system, sc, p, U, ck, length, time_terms=True)
            recomputed += length
        res = system.backend.adjoint(fwd, dS[ck.step:ck.step + length + 1], carry,
                                     last=k == len(checkpoints) - 1, first=k == 0)
        singular(res.report, "adjoint")
        carry = res.carry         # the adjoint state, parameter part included: one sum
    grad = res.grad + init_adjoint(system.backend, x0, p, sc.t0, U[0], res.xbar0)
    return GradientRun(float(J), grad, traj, mplan, recomputed)


def checkpointed_sensitivities(system, scenario, which, params=None, *,
                               memory_budget: int | None = None) -> np.ndarray:
    """ds/dp (N+1, n_s, nd) along parameter directions ``which`` (names or an (n_p, nd)
    matrix) by the tangent sweep, keeping at most ``memory_budget`` bytes of states: the
    forward run in segments, the tangent over each with the sensitivities carried across.
    ``scenario`` as :func:`simulate_segments` takes it."""
    prep = system.prepare(scenario)
    sc, U = prep.scenario, prep.U
    sz = system.sizes
    D = directions(system, which)
    p = system.parameter_vector(params)
    x0 = initial_state(system.backend, system.model, p, sc.t0, U[0], sc.q0, sc.v0,
                       tol=sc.init_tol, project=sc.project, given=prep.start)
    refuse_projected(x0)
    mplan = plan(sz, sc.n_steps, memory_budget)
    dS = np.empty((sc.n_steps + 1, sz.n_s, D.shape[1]))
    dx = tuple(x.T for x in init_tangent(system.backend, x0, p, sc.t0, U[0], D))
    for ck, fwd in _segments(system, sc, p, U, x0, mplan):
        res = system.backend.tangent(fwd, D, dx, states=False)
        singular(res.report, "tangent")
        dS[ck.step:ck.step + fwd.grid.N + 1] = res.ds.transpose(0, 2, 1)
        dx = res.end
    return dS

