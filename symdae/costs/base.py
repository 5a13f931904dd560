"""The cost interface: a cost maps the output trajectory S (samples x outputs) to J and dJ/dS.

Every cost returns its value J and dJ/dS, the derivative with respect to every output sample;
the discrete adjoint takes dJ/dS as its source term, so any cost built on outputs gets an exact
gradient (:func:`symdae.simulation.sensitivity.adjoint_gradient`). Costs add with ``+``.
"""
from __future__ import annotations

import numpy as np

from ..errors import UnknownNameError

__all__ = ["Cost", "CostSum"]

class Cost:
    """Base class: ``evaluate(system, traj) -> (J, dJ/dS)`` with dJ/dS of shape (N+1, n_s)."""

    def evaluate(self, system, traj):  # pragma: no cover - interface
        """The cost J of a trajectory and dJ/dS, its derivative with respect to every output
        sample ``(N+1, n_s)``: the adjoint sweep's source term."""
        raise NotImplementedError

    def value(self, system, traj) -> float:
        """J alone (an evaluation without gradient): :meth:`evaluate`'s J, the same number.
        A cost that can leave out dJ/dS, an array of the trajectory's size, overrides this."""
        return self.evaluate(system, traj)[0]

    def memory(self, sizes, scenario) -> tuple[int, int]:
        """(bytes per grid point, bytes in all) of the arrays one evaluation on ``scenario``
        allocates beside the trajectory: dJ/dS here; costs that build more say so."""
        return 8 * sizes.n_s, 0

    def __add__(self, other: Cost) -> CostSum:
        return CostSum([self, other])

    def __radd__(self, other):
        # lets sum([cost1, cost2]) start from 0
        if isinstance(other, (int, float)) and other == 0:
            return self
        return NotImplemented

    @staticmethod
    def _column(system, name: str) -> int:
        names = system.model.output_names
        if name not in names:
            raise UnknownNameError(f"the model has no output {name!r}; its outputs are {names}")
        return names.index(name)


class CostSum(Cost):
    """The sum of several costs on the same trajectory."""

    def __init__(self, costs):
        self.costs = []
        for c in costs:
            self.costs.extend(c.costs if isinstance(c, CostSum) else [c])

    def memory(self, sizes, scenario) -> tuple[int, int]:
        """The sum's dJ/dS beside the largest term's (the terms are evaluated in turn)."""
        parts = [c.memory(sizes, scenario) for c in self.costs]
        return 8 * sizes.n_s + max(p[0] for p in parts), sum(p[1] for p in parts)

    def evaluate(self, system, traj):
        """The sum of the terms' costs and of their derivatives dJ/dS."""
        J, dS = 0.0, np.zeros((len(traj.t), system.sizes.n_s))
        for c in self.costs:
            j, d = c.evaluate(system, traj)
            J += j
            dS += d
        return J, dS

    def value(self, system, traj) -> float:
        """The sum of the terms' costs (each term's :meth:`~Cost.value`)."""
        J = 0.0
        for c in self.costs:
            J += c.value(system, traj)
        return J


