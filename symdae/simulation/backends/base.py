"""The backend contract: what the rest of symdae asks of a backend, and the records it returns.

A backend holds one model's kernels and runs the three sweeps of the HHT scheme (the
discrete-adjoint paper's eq. 15; ``symdae/simulation/core/scheme.pxd`` has the coefficient table) on them.
Two implement it: ``compiled`` (the Cython core over the generated kernels, the fast path) and
``numpy`` (lambdified kernels and the sweeps in NumPy: the test oracle and the fallback where
no C compiler exists). Both run exactly the same discrete scheme; only the Newton policy differs
(the compiled sweep uses simplified Newton, the NumPy one full Newton), so their trajectories
agree to round-off, not bitwise.

Attributes
----------
name : str
    ``"compiled"`` or ``"numpy"``.
sizes : :class:`symdae.model.kernels.Sizes`
    n, m, n_p, n_u, n_s and n_tau (hoisted time terms; 0 for the NumPy backend).

Methods
-------
evaluate(kernel, t, q, v, a, lam, p, u, w=None) -> ndarray
    One kernel of the spec (:mod:`symdae.model.kernels`) at one state: its flat output
    (``kernels.split`` names the blocks); accumulating kernels start from zero. ``w`` must have
    the kernel's weight size (``kernels.pack_weights`` builds it).
at(t, q, v, a, lam, p, u) -> callable(kernel, w=None) -> ndarray
    ``evaluate`` at one state for several kernels: the state is checked once, each call
    then checks only ``w`` (the initial state evaluates five to nine kernels at one state).
model_start(t0, p, u0) -> (q0, v0)
    The model's initial positions and velocities (its ``initial_state`` expressions in p, t0
    and u0: the kernel of that name at a zero state), with only p and u0 checked.
consistent_start(t0, q0, v0, p, u0, tol) -> (a0, lam0) or None
    The consistent initial accelerations and multipliers in one call where nothing needs the
    general path of :func:`symdae.simulation.initial.initial_state` (constraints met within
    ``tol``, no massless rows, a regular initialisation matrix), else None: that path then
    computes them or names what failed. The NumPy backend always returns None.
initial_adjoint(t0, q0, v0, a0, lam0, p, u0, xbar0, from_model) -> ndarray or None
    dJ/dp contributed through a consistent initial state without massless rows, given the
    adjoint xbar0 of (q0, v0, a0, lam0), in one call (``from_model`` (2n): 1 where q0, v0
    come from the model's expressions in p); None where its matrix is singular, or always
    (the NumPy backend): :func:`symdae.simulation.initial.init_adjoint` then computes it.
initial_tangent(t0, q0, v0, a0, lam0, p, u0, D, from_model) -> tuple or None
    The sensitivities (dq0, dv0, da0, dlam0), each (size, nd), of a consistent initial state
    without massless rows along the parameter directions D (n_p x nd), in one call; None
    where its matrix is singular, or always (the NumPy backend):
    :func:`symdae.simulation.initial.init_tangent` then computes them.
forward(grid, p, U, x0, rtol, max_iter, store, restart=None, time_terms=False,
        continues=False) -> ForwardResult
    Takes the grid (t0, h, N, alpha, the index i0 of its first step: times t0 + (i0 + j) h, and
    the scheme, one of ``SCHEMES``), parameters p (n_p,), inputs U (N+1, n_u), the consistent
    state x0 = (q, v, a, lam[, w]) at step i0 (w: the algorithmic acceleration, a at the start
    of a run), the Newton tolerance and iteration cap, whether to keep what the derivative sweeps would
    otherwise recompute (factorisations, time terms), and for a run continued from a checkpoint
    a :class:`Restart` (what makes the continuation take the very steps of one long run).
    ``time_terms``: keep only the hoisted time terms and state terms of every step (``store``
    keeps them too), which an adjoint would otherwise evaluate again at every step, at the
    price of n_tau + n_st doubles per step (a backend without hoisted terms keeps nothing).
    A backend may also read the time terms from a table an earlier run with the same grid
    and the same values of what they read left behind, and hand it on as kept (``saved``,
    even where neither was asked for); the numbers are the same.
    Returns the states (N+1 rows each), the outputs S (N+1, n_s), a :class:`SweepReport` (status
    and :class:`Counters`: steps, Newton iterations, factorisations, refreshes), ``saved`` and,
    with ``continues`` (a run whose next segment starts where this one ends), the Restart at
    its last step (None otherwise: it is a copy of two rows, kept past the arrays it came
    from). A failed sweep is a report with status other than ``ok``, never an exception: the
    caller (``System``) names the failure.
tangent(fwd, D, dx0, states=True) -> TangentArrays
    Forward sensitivities along the columns of D (n_p, nd) from the sensitivities at the first
    row, dx0 = (dq, dv, da, dlam[, dw]), each (nd, size) (dw = da at the start of a run): the
    Jacobian blocks once per state, one linear solve per direction and step. With
    ``states=False`` only the output sensitivities are kept for every row, the states' of the
    last row only (what the next segment starts from).
adjoint(fwd, dPhi, carry=None, last=True, first=True) -> AdjointResult
    dJ/dp without the initial-state term for a cost whose derivative with respect to the
    output samples is dPhi (N+1, n_s), by one backward sweep. In segments: ``carry`` is what
    the segment after this one left (ignored with ``last``: the run ends here); with
    ``first`` the segment starts the run. The result's carry starts the segment before; of the
    first segment it holds the adjoint of x0 (``xbar0``).

Both derivative sweeps raise nothing either: their status says whether a Newton matrix was
singular.

The compiled backend also has ``lapack_threads()``: the context its sweeps (and the design
sweep of :mod:`symdae.simulation.backends.design`) run in, one BLAS thread where the core
calls LAPACK.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ...errors import Interrupted

__all__ = ["Grid", "Restart", "Counters", "SweepReport", "ForwardResult", "TangentArrays",
           "AdjointResult", "STATUSES", "INTERRUPTED", "raise_if_interrupted", "SCHEMES",
           "DEFAULT_SCHEME", "scheme_code", "start_w", "state_fields"]

STATUSES = ("ok", "newton_failed", "singular", "not_finite", "interrupted")
INTERRUPTED = STATUSES.index("interrupted")    # core/interrupt.pxd: Ctrl-C stopped a sweep
# the schemes of the HHT family (symdae/simulation/core/scheme.pxd) and their codes in the core:
# hht-ga, the generalized-alpha form with HHT's parameters (second order for any M(q)); and
# hht-paper, the discrete-adjoint paper's eq. (15) (first order when M depends on q and
# alpha < 0; the same numbers as hht-ga when M is constant)
SCHEMES = {"hht-ga": 1, "hht-paper": 0}
DEFAULT_SCHEME = "hht-ga"


def state_fields(sizes, q, v, a, lam, p, u) -> tuple:
    """(value, expected length, label) of each vector of a kernel's state, for a backend's
    ``at`` to check."""
    return ((q, sizes.n, "q"), (v, sizes.n, "v"), (a, sizes.n, "a"), (lam, sizes.m, "lam"),
            (p, sizes.n_p, "p"), (u, sizes.n_u, "u"))


def start_w(x0):
    """The algorithmic acceleration of a start state (q, v, a, lam[, w]) or of its tangents:
    its w, or a at the start of a run (w_0 = a_0)."""
    return x0[4] if len(x0) > 4 else x0[2]


def scheme_code(name: str) -> int:
    """The core's code of a scheme name (the Scenario has checked it)."""
    return SCHEMES[name]


class Grid(NamedTuple):
    """The time grid of a sweep: t_j = t0 + (i0 + j) h, j = 0..N, HHT parameter alpha (a
    segment of a longer run has i0 > 0; its times are the same numbers as in the long run)."""

    t0: float
    h: float
    N: int
    alpha: float
    i0: int = 0
    scheme: str = DEFAULT_SCHEME


def raise_if_interrupted(rep: dict, grid: Grid, sweep: str) -> None:
    """Raise ``Interrupted`` (a KeyboardInterrupt) if Ctrl-C stopped the sweep that returned the
    core's report ``rep`` (its ``step`` is where it stood)."""
    if rep["status"] == INTERRUPTED:
        raise Interrupted.at(grid.t0 + int(rep["step"]) * grid.h,
                             grid.t0 + (grid.i0 + grid.N) * grid.h, sweep)


@dataclass(frozen=True)
class Restart:
    """What continues a forward run at step i0 exactly as one long run would: (a, lam) of up
    to two previous steps (rows i0-k .. i0-1, k = min(i0, 2): the Newton start values), the
    round-off levels the last step left (2 nm + 1, see newton.pxd) and the orders of the
    sparse LU (2 nm, see sparse.pxd; None for a backend without one)."""

    history: np.ndarray
    noise: np.ndarray
    order: np.ndarray | None = None


@dataclass(frozen=True)
class Counters:
    steps: int = 0
    newton_iterations: int = 0       # residual evaluations
    factorizations: int = 0          # LU of the (n+m) x (n+m) Newton matrix
    jacobian_refreshes: int = 0      # factorisations at a later Newton iterate
    newton_restarts: int = 0         # repeated solves of a step (hht.pyx's forward loop)
    compiled_steps: int = 0          # of the steps, those the model module's compiled steps
                                     # took (compiled_steps.h), the rest the core's generic
                                     # step; a tangent sweep's: those taken with the module's
                                     # written-out products (tangent_products.py)

    def as_dict(self) -> dict:
        return dict(steps=self.steps, newton_iterations=self.newton_iterations,
                    factorizations=self.factorizations,
                    jacobian_refreshes=self.jacobian_refreshes,
                    newton_restarts=self.newton_restarts, compiled_steps=self.compiled_steps)

    def __add__(self, other: Counters) -> Counters:
        """The counts of two runs one after the other (segments of a checkpointed run)."""
        return Counters(*(a + b for a, b in zip(self.as_dict().values(),
                                                other.as_dict().values())))


@dataclass(frozen=True)
class SweepReport:
    """How a sweep ended. For a failure: the state that could not be computed (``step``,
    ``time``), the Newton iterations there, the residual max-norms at the first and last
    iterate, the last residual over its round-off level (``noise_ratio``) and the pivot that
    vanished (-1 if none)."""

    status: str
    counters: Counters = Counters()
    time: float = float("nan")
    step: int = -1
    iterations: int = 0
    residual_norm: float = float("nan")
    first_residual_norm: float = float("nan")
    noise_ratio: float = float("nan")
    pivot: int = -1

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class ForwardResult:
    """A forward sweep: states and outputs on the grid, its report, and what it saved."""

    grid: Grid
    p: np.ndarray
    U: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    S: np.ndarray
    report: SweepReport
    saved: Any = None        # backend-specific (stored factorisations, time terms), or None
    restart: Restart | None = None     # continues the run after its last row (if asked)
    order: np.ndarray | None = None    # the sparse LU's orders (the derivative sweeps reuse them)
    w: np.ndarray | None = None        # algorithmic accelerations (hht-paper: a itself)

    @property
    def state_end(self) -> tuple:
        """(q, v, a, lam, w) of the last row: the start state of the segment after it."""
        w = self.a if self.w is None else self.w
        return tuple(x[-1].copy() for x in (self.q, self.v, self.a, self.lam, w))


@dataclass(frozen=True)
class TangentArrays:
    """Sensitivities along nd directions, (N+1, nd, size) each (dq, dv, da, dlam, dw: the last
    row only when the sweep kept no states)."""

    dq: np.ndarray
    dv: np.ndarray
    da: np.ndarray
    dlam: np.ndarray
    ds: np.ndarray
    report: SweepReport
    dw: np.ndarray | None = None      # of the algorithmic accelerations (hht-paper: da)

    @property
    def end(self) -> tuple:
        """(dq, dv, da, dlam, dw) of the last row: the start of the segment after it."""
        dw = self.da if self.dw is None else self.dw
        return tuple(x[-1] for x in (self.dq, self.dv, self.da, self.dlam, dw))


@dataclass(frozen=True)
class AdjointResult:
    """``grad`` (n_p,): dJ/dp of the segment's steps (initial state excluded); ``xbar0``
    (3n + m,): the adjoint of its first row's state (of x0 for the first segment, where the
    algorithmic acceleration's adjoint is added to a0's); ``carry``: what the segment before
    needs (xbar0, the adjoint of w at the first row, the r_d of the first step, the parameter
    adjoint)."""

    grad: np.ndarray
    xbar0: np.ndarray
    carry: np.ndarray
    report: SweepReport
