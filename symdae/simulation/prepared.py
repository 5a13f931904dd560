"""The parameter-free part of a run, worked out once for a system and a scenario.

An identification evaluates one experiment hundreds of times at new parameter values; its
time grid, the inputs on it and the memory the run needs do not change between those
evaluations. :class:`PreparedRun` holds them, :meth:`System.prepare
<symdae.simulation.system.System.prepare>` makes one, and :class:`~symdae.identification.
experiment.Experiment` keeps its own, so that an evaluation starts at the parameters.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .backends.base import Grid
from .scenario import Scenario

__all__ = ["PreparedRun"]


@dataclass(frozen=True)
class PreparedRun:
    """A scenario with its time grid ``t``, its inputs on the grid ``U`` (N+1, n_u; read-only:
    the inputs are read when the run is prepared, a later change to the caller's arrays is not
    seen), the sweep grid and ``start``, q0 and v0 validated where the scenario gives them as
    numbers or the model's expressions for them are numbers
    (:func:`~symdae.simulation.initial.given_start`; None where the model's expressions in
    the parameters, t or the inputs give them). ``fits`` records the memory checks that
    passed (keyed by what the run keeps): repeated runs reuse the arrays of the first (the
    backend's pool), so the machine's memory is asked once per kind of run."""

    scenario: Scenario
    t: np.ndarray
    U: np.ndarray
    grid: Grid
    start: tuple | None
    fits: set = field(default_factory=set, compare=False, repr=False)
