"""The residuals behind least-squares costs, and their exact Jacobian.

A :class:`~symdae.costs.LeastSquares` cost is J = 1/2 sum_k sum_i w_k eta_i (s_ik - sbar_ik)^2.
Written as J = 1/2 |r|^2 with r_ik = sqrt(w_k eta_i) (s_ik - sbar_ik), it is what Gauss-Newton
and the statistics of an identification need: r, and dr/dp = sqrt(w_k eta_i) ds_ik/dp from
the tangent-linear sweep. Each (experiment, fitted output) pair gives one
:class:`ResidualBlock`: its samples, weights omega_ik = w_k eta_i and s - sbar there.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..costs.base import CostSum
from ..costs.time_domain import LeastSquares
from ..data.measurement import GridSamples
from ..errors import InputError, UnknownNameError
from ..simulation.sensitivity import tangent

__all__ = ["ResidualBlock", "ExperimentResiduals", "least_squares_terms", "residual_blocks",
           "experiment_residuals", "check_least_squares_costs"]


@dataclass(frozen=True)
class ResidualBlock:
    """One fitted output of one experiment: its data ``samples`` (times, values and where they
    lie on the grid), cost weights ``weight`` = w_k eta_i per sample, ``residual`` = s - sbar
    there, model output column ``column`` and, when asked, ``sensitivity`` = ds/dp there,
    (samples, n_free)."""

    experiment: str
    output: str
    column: int
    samples: GridSamples
    weight: np.ndarray
    residual: np.ndarray
    sensitivity: np.ndarray | None = None

    @property
    def weighted_residual(self) -> np.ndarray:
        return np.sqrt(self.weight) * self.residual

    @property
    def weighted_jacobian(self) -> np.ndarray:
        return np.sqrt(self.weight)[:, None] * self.sensitivity


def least_squares_terms(cost) -> tuple[list, list]:
    """(the LeastSquares terms of a cost, every other term) with sums flattened."""
    parts = cost.costs if isinstance(cost, CostSum) else [cost]
    ls = [c for c in parts if isinstance(c, LeastSquares)]
    return ls, [c for c in parts if not isinstance(c, LeastSquares)]


def check_least_squares_costs(experiments) -> None:
    """Raise InputError unless every experiment's cost is a sum of LeastSquares terms."""
    for e in experiments:
        ls, other = least_squares_terms(e.cost)
        if other:
            kinds = sorted({type(c).__name__ for c in other})
            raise InputError(f"experiment {e.name!r}: its cost has terms that are not least "
                             f"squares ({', '.join(kinds)}); a sum-of-squares method needs "
                             "LeastSquares costs only")
        if not ls:
            raise InputError(f"experiment {e.name!r} has no LeastSquares cost")


def residual_blocks(system, traj, cost, name: str = "experiment",
                    sensitivities: np.ndarray | None = None) -> list[ResidualBlock]:
    """The residual blocks of the LeastSquares terms of ``cost`` on ``traj``.

    ``sensitivities``: the tangent sweep's ds (N+1, n_s, n_free) to attach to each block.
    Terms that are not least squares are left out (see :func:`least_squares_terms`).
    """
    names = system.model.output_names
    blocks = []
    for term in least_squares_terms(cost)[0]:
        for output in term.outputs:
            if output not in names:
                raise UnknownNameError(f"experiment {name!r}: the model has no output "
                                       f"{output!r}; its outputs are {names}")
            col = names.index(output)
            samples, w = term.compared(traj.t, output)     # exactly those of the cost
            r = samples.at(traj.outputs[output]) - samples.values
            sens = None if sensitivities is None else samples.at(sensitivities[:, col, :])
            blocks.append(ResidualBlock(name, output, col, samples, w, r, sens))
    return blocks


@dataclass(frozen=True)
class ExperimentResiduals:
    """Residual blocks of one experiment at one parameter point, and its trajectory."""

    blocks: list
    trajectory: object

    @property
    def r(self) -> np.ndarray:
        """sqrt(w eta) (s - sbar), all blocks stacked."""
        if not self.blocks:
            return np.zeros(0)
        return np.concatenate([b.weighted_residual for b in self.blocks])

    def jacobian(self) -> np.ndarray:
        """dr/d(free parameters), all blocks stacked (physical units)."""
        return np.vstack([b.weighted_jacobian for b in self.blocks])


def experiment_residuals(experiment, params: Mapping, free: Sequence[str] | None = None,
                         *, strict: bool = True, trajectory=None,
                         store_factorizations: bool = False) -> ExperimentResiduals:
    """Residuals of ``experiment`` at ``params`` and, with ``free``, their exact Jacobian
    along the free parameters (one tangent sweep).

    ``strict``: refuse a cost with terms that are not least squares (Gauss-Newton needs the
    whole cost as a sum of squares). ``trajectory``: reuse one simulated at ``params``.
    The tangent sweep refactorises each step's Newton matrix from the states (bit for bit
    the forward sweep's), or reuses the factorisations of a trajectory simulated with
    ``store_factorizations=True`` (which costs more than refactorising on the models
    measured, and (n+m)^2 doubles per step of memory).
    """
    if strict:
        check_least_squares_costs([experiment])
    # the tangent sweep reads the time terms the forward sweep keeps (engine mount, 4
    # directions: sensitivities 1.99 -> 1.83 forward sweeps)
    traj = trajectory if trajectory is not None else \
        experiment.simulate(params, gradient=store_factorizations, time_terms=free is not None)
    ds = None if free is None else tangent(experiment.system, traj, list(free),
                                              states=False).ds
    return ExperimentResiduals(residual_blocks(experiment.system, traj, experiment.cost,
                                               experiment.name, ds), traj)
