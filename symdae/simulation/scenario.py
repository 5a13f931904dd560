"""The scenario of a simulation: time grid, HHT alpha, inputs, initial state, Newton options.

One record, shared by :meth:`System.simulate`, :class:`~symdae.identification.experiment.Experiment`, the command
line and the bundled model files (``SCENARIO = Scenario(...)``). It is validated once, when it is
made, so that nothing downstream re-checks a time step or an iteration cap.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from .backends.base import DEFAULT_SCHEME, SCHEMES, Grid

__all__ = ["Scenario", "DEFAULT_ALPHA", "physical_memory"]

DEFAULT_ALPHA = -0.1
MAX_STEPS = 2**40  # beyond any memory: refused before the grid is even counted in detail


@functools.lru_cache(maxsize=1)
def physical_memory() -> int:
    """Bytes of RAM of this machine (64 GiB where the OS does not say); asked once (every
    gradient's memory plan reads it)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 64 * 2**30


def _finite(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
        raise InputError(f"{name} must be a finite number, got {x!r}")
    return float(x)


@dataclass(frozen=True)
class Scenario:
    """What a simulation runs: ``[t0, t_end]`` in fixed steps ``h`` with HHT ``alpha``.

    Attributes
    ----------
    t_end, h, t0:
        Time span and fixed step; ``t_end - t0`` must be a whole multiple of ``h``.
    alpha:
        HHT parameter in [-1/3, 0]; beta = (1 - alpha)^2 / 4, gamma = (1 - 2 alpha) / 2.
        0 is the trapezoidal rule; use alpha < 0 for constrained models.
    inputs:
        ``{input name: values on the grid (N+1,), callable f(t) or constant}``.
    q0, v0:
        Initial positions and velocities: one value per coordinate, or ``{coordinate: value}``
        (by name or the coordinate itself; the others from the model's ``initial_state``);
        default: the model's ``initial_state``.
    rtol, max_iter:
        Newton: relative tolerance on (a, lambda) (a round-off floor is added by the core) and
        the iteration cap per step.
    init_tol, project:
        q0, v0 must satisfy the constraints to ``init_tol``, unless ``project`` projects them
        (minimum-norm correction; no sensitivities through a projection).
    scheme:
        ``"hht-ga"`` (default): the generalized-alpha form with HHT's parameters (alpha_m = 0,
        alpha_f = -alpha), second order also when the mass matrix depends on q;
        ``"hht-paper"``: the discrete-adjoint paper's eq. (15), which reproduces the papers'
        numbers (symdae/simulation/core/scheme.pxd).
    """

    t_end: float
    h: float
    alpha: float = DEFAULT_ALPHA
    t0: float = 0.0
    inputs: Mapping | None = None
    q0: Any = None
    v0: Any = None
    rtol: float = 1e-12
    max_iter: int = 20
    init_tol: float = 1e-9
    project: bool = False
    scheme: str = DEFAULT_SCHEME

    def __post_init__(self):
        h = _finite("time step h", self.h)
        t_end, t0 = _finite("t_end", self.t_end), _finite("t0", self.t0)
        alpha = self.alpha
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or \
                not (-1.0 / 3.0 - 1e-12 <= alpha <= 0.0):
            raise InputError(f"alpha must lie in [-1/3, 0], got {self.alpha!r}")
        alpha = float(alpha)
        if not h > 0:
            raise InputError(f"time step h must be positive, got {self.h!r}")
        span = t_end - t0
        if not span > 0:
            raise InputError(f"t_end ({t_end!r}) must be greater than t0 ({t0!r})")
        steps = span / h
        if not steps <= MAX_STEPS:
            raise InputError(f"t_end - t0 = {span!r} in steps of h = {h!r} makes {steps:.3g} "
                             "steps, more than any trajectory can hold: raise h")
        N = int(round(steps))
        if N < 1 or abs(N * h - span) > 1e-9 * max(abs(span), abs(h)):
            raise InputError(f"t_end - t0 = {span!r} is not a whole multiple of h = {h!r}")
        rtol = _finite("rtol", self.rtol)
        if not 0 < rtol < 1:
            raise InputError(f"rtol must lie in (0, 1), got {self.rtol!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral) \
                or self.max_iter < 1:
            raise InputError(f"max_iter must be a whole number >= 1, got {self.max_iter!r}")
        init_tol = _finite("init_tol", self.init_tol)
        if not init_tol > 0:
            raise InputError(f"init_tol must be positive, got {self.init_tol!r}")
        if self.scheme not in SCHEMES:
            raise InputError(f"scheme must be one of {sorted(SCHEMES)}, got {self.scheme!r}")
        if self.inputs is not None and not isinstance(self.inputs, Mapping):
            raise InputError("inputs must be a mapping {input name: array, callable or "
                             f"constant}}, got {type(self.inputs).__name__}")
        for name, val in (("t_end", t_end), ("h", h), ("t0", t0), ("alpha", alpha),
                          ("rtol", rtol), ("max_iter", int(self.max_iter)),
                          ("init_tol", init_tol), ("project", bool(self.project))):
            object.__setattr__(self, name, val)

    # ------------------------------------------------------------------ grid
    @property
    def n_steps(self) -> int:
        """N, the number of steps: the grid has N + 1 times t0, t0 + h, ..., t_end."""
        return int(round((self.t_end - self.t0) / self.h))

    @functools.cached_property
    def times(self) -> np.ndarray:
        """The time grid t_i = t0 + i h, i = 0..N: one read-only array, which every run of
        this scenario shares (its trajectories' ``t``), so that a cost can tell the grid it
        compared on before by identity."""
        t = self.t0 + self.h * np.arange(self.n_steps + 1)
        t.setflags(write=False)
        return t

    def __getstate__(self):
        # the cached grid stays behind: a pickle would bring it back writeable
        state = dict(self.__dict__)
        state.pop("times", None)
        return state

    def grid(self, steps: int | None = None, i0: int = 0) -> Grid:
        """The sweep grid of ``steps`` steps (default: all) from step ``i0``, with this run's
        alpha and scheme."""
        return Grid(self.t0, self.h, self.n_steps if steps is None else steps, self.alpha, i0,
                    self.scheme)

    # ------------------------------------------------------------------ making one
    def replace(self, **changes) -> Scenario:
        """A copy with some fields changed (validated again)."""
        return Scenario.make(self, **changes)

    @classmethod
    def make(cls, scenario: Scenario | Mapping | None = None, **changes) -> Scenario:
        """A Scenario from a Scenario, a mapping of its fields (a model file's ``SCENARIO``) or
        nothing, with ``changes`` (fields) applied on top."""
        if isinstance(scenario, Scenario) and not changes:
            return scenario     # validated when made, and frozen: every evaluation passes here
        if scenario is not None and not isinstance(scenario, (Scenario, Mapping)):
            raise InputError(f"a scenario must be a Scenario or a mapping of its fields, got "
                             f"{type(scenario).__name__}")
        base = dict(scenario) if isinstance(scenario, Mapping) else {}
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted((set(base) | set(changes)) - fields)
        if unknown:
            raise InputError(f"unknown scenario field(s) {unknown}; the fields are "
                             f"{sorted(fields)}")
        if isinstance(scenario, Scenario):
            return dataclasses.replace(scenario, **changes) if changes else scenario
        missing = sorted({"t_end", "h"} - set(base) - set(changes))
        if missing:
            raise InputError(f"a scenario needs {' and '.join(missing)} (time span and step)")
        return cls(**{**base, **changes})
