"""The result of a simulation: NumPy arrays with time on axis 0, plus counters."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..atomic import atomic_path, write_columns
from ..errors import InputError, UnknownNameError

if TYPE_CHECKING:
    from .scenario import Scenario

__all__ = ["Trajectory"]


@dataclass
class Trajectory:
    """x_i = (q_i, v_i, a_i, lam_i) at t_i = t0 + i h, i = 0..N, and the outputs.

    Attributes
    ----------
    t : (N+1,)            q, v, a : (N+1, n)         lam : (N+1, m)
    (q, v, a, lam are None for a run whose states were not kept: a checkpointed gradient)
    a is what the model's equations see as q'': with scheme hht-ga the physical acceleration
    at t_i, with hht-paper the scheme's algorithmic acceleration (see ``w``).
    outputs : {name: (N+1,)}
    counters : steps, newton_iterations, factorizations, jacobian_refreshes, newton_restarts
        (repeated solves of a step: from the last state's a and lambda where the
        extrapolated start failed or led far from itself, hht.pyx) and switches, on_switch for a model with non-smooth terms
        (symdae/simulation/switches.py)
    params : {name: value} used for this run
    scenario : the :class:`~symdae.simulation.scenario.Scenario` it ran (h, alpha, t0, ...)
    sweep : what the forward sweep left for the tangent and adjoint sweeps of this run
        (:class:`~symdae.simulation.system.SweepData`: ``forward``, the backend's
        ``ForwardResult``, and ``x0``, the initial state), None for a trajectory made
        without a sweep
    """

    t: np.ndarray
    q: np.ndarray | None
    v: np.ndarray | None
    a: np.ndarray | None
    lam: np.ndarray | None
    outputs: dict
    counters: dict
    params: dict
    scenario: Scenario
    coordinate_names: list
    wall_time: float = 0.0
    multiplier_names: list | None = None   # the model's names (lambda_0, ... if None)
    sweep: Any = field(default=None, repr=False)  # SweepData (system.py imports this module)

    @property
    def w(self) -> np.ndarray | None:
        """The scheme's algorithmic accelerations (N+1, n) (symdae/simulation/core/scheme.pxd):
        an approximation of q'' at t_i + alpha h; for hht-paper the same array as ``a``."""
        fwd = getattr(self.sweep, "forward", None)
        if fwd is None:
            return None
        return fwd.a if fwd.w is None else fwd.w

    @property
    def h(self) -> float:
        """The run's time step [s]."""
        return self.scenario.h

    @property
    def alpha(self) -> float:
        """The HHT parameter alpha of the run."""
        return self.scenario.alpha

    @property
    def S(self) -> np.ndarray:
        """Outputs as one (N+1, n_s) array, columns in the model's output order."""
        if not self.outputs:
            return np.zeros((len(self.t), 0))
        return np.column_stack(list(self.outputs.values()))

    def coordinate(self, name: str, which: str = "q") -> np.ndarray:
        """Column of q (or v, a) for the coordinate called ``name``."""
        try:
            k = self.coordinate_names.index(name)
        except ValueError:
            raise UnknownNameError(f"no coordinate {name!r}; coordinates: "
                                   f"{self.coordinate_names}") from None
        if which not in ("q", "v", "a"):
            raise InputError(f"which must be 'q', 'v' or 'a', got {which!r}")
        return self._states()[("q", "v", "a").index(which)][:, k]

    def _states(self) -> tuple:
        if self.q is None:
            raise InputError("this trajectory kept its outputs only (its states were "
                             "checkpointed, symdae.simulation.checkpoint): simulate the scenario with "
                             "System.simulate for q, v, a and lambda")
        return self.q, self.v, self.a, self.lam

    def summary(self) -> str:
        """A readable report: steps, Newton counters, switches and each output's range."""
        c = self.counters
        steps = max(c["steps"], 1)
        lines = [
            f"{c['steps']} steps of h = {self.h:g} s (alpha = {self.alpha:g}, scheme {self.scenario.scheme}), "
            f"t = {self.t[0]:g} .. {self.t[-1]:g} s, wall time {self.wall_time * 1e3:.2f} ms",
            f"Newton iterations: {c['newton_iterations']} ({c['newton_iterations'] / steps:.2f}"
            f" per step), factorizations: {c['factorizations']}, "
            f"Jacobian refreshes: {c['jacobian_refreshes']}"
            + (f", steps solved again: {c['newton_restarts']}"
               if c.get("newton_restarts") else ""),
        ]
        if "switches" in c:
            lines.append(f"switches of non-smooth terms between grid points: {c['switches']}, "
                         f"grid points on a switch: {c['on_switch']}")
        for name, s in self.outputs.items():
            lines.append(f"output {name}: min {s.min():.6g}, max {s.max():.6g}, "
                         f"rms {np.sqrt(np.mean(s ** 2)):.6g}")
        return "\n".join(lines)

    def columns(self, every: int = 1) -> tuple[list, list]:
        """(names, arrays) of t, the states and the outputs, every ``every``-th time step.

        States are named by kind and name, ``q:x``, ``v:x``, ``a:x`` and ``lambda:<multiplier>``,
        outputs by their names alone: every column is unambiguous and an output may be named
        like a coordinate."""
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise InputError(f"every must be a whole number >= 1, got {every!r}")
        names = ["t"]
        cols = [self.t]
        q, v, a, lam = self._states()
        for arr, kind in ((q, "q"), (v, "v"), (a, "a")):
            for k, nm in enumerate(self.coordinate_names):
                names.append(f"{kind}:{nm}")
                cols.append(arr[:, k])
        mults = self.multiplier_names or [f"lambda_{k}" for k in range(lam.shape[1])]
        for k in range(lam.shape[1]):
            names.append(f"lambda:{mults[k]}")
            cols.append(lam[:, k])
        for nm, s in self.outputs.items():
            names.append(nm)
            cols.append(s)
        return names, [c[::every] for c in cols]

    def to_csv(self, path, every: int = 1) -> Path:
        """Write t, the states and the outputs (:meth:`columns`) as columns of a CSV file,
        every ``every``-th time step; it reads back as data (``--data``), its outputs found
        by name. Written atomically: the file appears when it is complete."""
        names, cols = self.columns(every)
        return write_columns(path, names, cols)

    def to_npz(self, path, every: int = 1) -> Path:
        """The columns of :meth:`to_csv` in a NumPy ``.npz`` archive (binary, 8 bytes a value
        instead of about 24 characters; ``np.load(path)["q:x"]``), written atomically."""
        names, cols = self.columns(every)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:        # a file object: savez keeps the name as given
                np.savez(fh, **dict(zip(names, cols)))
        return Path(path)
