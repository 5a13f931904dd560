"""Experiments: a system, a scenario and a cost; and their evaluation, serially or in parallel.

An :class:`Experiment` is everything one measurement run needs: the compiled system, the
:class:`~symdae.simulation.scenario.Scenario` it ran (inputs, initial state, time grid), the parameters
fixed for it and the cost that compares its outputs with the data. :func:`evaluate_many`
evaluates a list of them at one parameter point, on any ``concurrent.futures.Executor``
(the compiled sweeps release the GIL, so a thread pool runs experiments concurrently).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..costs.base import Cost
from ..errors import InputError
from ..simulation.checkpoint import cost_and_gradient
from ..simulation.prepared import PreparedRun
from ..simulation.scenario import Scenario
from ..simulation.trajectory import Trajectory
from ..threads import gather, one_blas_thread

if TYPE_CHECKING:
    from ..simulation.system import System

__all__ = ["Experiment", "Evaluation", "evaluate_many", "experiment_labels"]


@dataclass(frozen=True)
class Evaluation:
    """The cost of one experiment at one parameter point.

    ``gradient`` is dJ/dp for every model parameter (model order), or None when not asked.
    """

    cost: float
    gradient: np.ndarray | None
    trajectory: Trajectory


@dataclass
class Experiment:
    """One experiment: a system, the scenario it ran and a cost on its outputs.

    ``params`` fixes parameter values for this experiment (e.g. its excitation amplitude);
    the parameters passed to :meth:`evaluate` (the free ones of an identification) override
    them. ``memory_budget``: bytes of states a gradient may keep (default: a quarter of the
    machine's memory); a longer run is checkpointed (:mod:`symdae.simulation.checkpoint`).

    The scenario's grid and inputs are worked out at the first evaluation and kept
    (:meth:`prepared`): a later change to the input arrays it was given is not seen; assign a
    new scenario (``experiment.scenario = scenario.replace(inputs=...)``) instead.
    """

    system: System
    cost: Cost
    scenario: Scenario
    params: Mapping = field(default_factory=dict)
    name: str = "experiment"
    memory_budget: int | None = None
    _prepared: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.cost, Cost):
            raise InputError(f"experiment {self.name!r}: cost must be a symdae Cost, got "
                             f"{type(self.cost).__name__}")
        self.scenario = Scenario.make(self.scenario)
        self.params = dict(self.params)

    def __getstate__(self):
        # the prepared run stays behind (a process pool pickles the experiment with every
        # call; its arrays would come back writeable)
        return {**self.__dict__, "_prepared": None}

    def prepared(self) -> PreparedRun:
        """The scenario prepared for the system (:meth:`System.prepare
        <symdae.simulation.system.System.prepare>`), made at the first use and again when
        either attribute is replaced."""
        kept = self._prepared
        if kept is None or kept[0] is not self.system or kept[1].scenario is not self.scenario:
            kept = (self.system, self.system.prepare(self.scenario))
            self._prepared = kept
        return kept[1]

    def simulate(self, params: Mapping | None = None, *, gradient: bool = False,
                 time_terms: bool = False) -> Trajectory:
        """Simulate this experiment with ``params`` on top of its fixed parameters; with
        ``gradient``, keep every step's factorisation for derivative sweeps that follow (the
        tangent along several directions reuses them); with ``time_terms`` only the time
        terms (System.simulate's keep_time_terms)."""
        merged = {**self.params, **dict(params or {})}
        with one_blas_thread():
            return self.system.run(self.prepared(), merged, store_factorizations=gradient,
                                   keep_time_terms=time_terms)

    def evaluate(self, params: Mapping | None = None, *, gradient: bool = False) -> Evaluation:
        """Cost (and, with ``gradient``, its exact gradient by the discrete adjoint), within
        the memory budget (the forward sweep keeps the states, time terms and state terms
        the adjoint reads; runs too long to keep are checkpointed)."""
        merged = {**self.params, **dict(params or {})} if params else self.params
        run = cost_and_gradient(self.system, self.prepared(), self.cost, merged,
                                gradient=gradient, memory_budget=self.memory_budget)
        return Evaluation(run.cost, run.gradient, run.trajectory)


def evaluate_many(experiments: Sequence[Experiment], params: Mapping | Sequence[Mapping],
                  executor: Executor | None = None, *, gradient: bool = True
                  ) -> list[Evaluation]:
    """Evaluate every experiment at ``params`` (one mapping for all, or one per experiment).

    ``executor``: any ``concurrent.futures.Executor`` (a ThreadPoolExecutor runs the compiled
    sweeps concurrently; a process pool or a Dask client's executor needs picklable
    experiments); None evaluates serially. Results come back in the experiments' order; the
    first failure is raised.
    """
    exps = list(experiments)
    if isinstance(params, Mapping):
        plist = [params] * len(exps)
    else:
        plist = list(params)
        if len(plist) != len(exps):
            raise InputError(f"{len(plist)} parameter sets for {len(exps)} experiments")
    return map_calls(_evaluate, [(e, p, gradient) for e, p in zip(exps, plist)], executor)


def experiment_labels(experiments: Sequence) -> list[str]:
    """Each experiment's name, made unique where two share one (``name[k]``, k its place):
    the keys of per-experiment costs, gaps and verdicts."""
    names = [e.name for e in experiments]
    return [n if names.count(n) == 1 else f"{n}[{k}]" for k, n in enumerate(names)]


def map_calls(fn, calls: Sequence[tuple], executor: Executor | None = None) -> list:
    """``[fn(*args) for args in calls]``, on ``executor`` when given (``fn`` must then be a
    module-level function, or a partial of one, for process pools); results in order, the
    first failure raised."""
    if executor is None:
        return [fn(*args) for args in calls]
    return gather(executor.submit(fn, *args) for args in calls)


def _evaluate(experiment: Experiment, params: Mapping, gradient: bool) -> Evaluation:
    # a module-level function, so that process pools can pickle the call
    return experiment.evaluate(params, gradient=gradient)
