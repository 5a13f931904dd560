"""A compiled model: its backend (kernels and sweeps) plus validated entry points."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import (
    InputError,
    ModelError,
    NewtonError,
    SimulationError,
    SingularMatrixError,
    UnknownNameError,
)
from ..model.definition import parameter_name
from ..model.kernels import Sizes
from ..threads import one_blas_thread
from .backends.base import ForwardResult, Grid, SweepReport
from .initial import InitialState, given_start, initial_state
from .memory import MemoryEstimate, forward_bytes
from .prepared import PreparedRun
from .reductions import first_nonfinite
from .scenario import Scenario
from .switches import SwitchCounter
from .trajectory import Trajectory

__all__ = ["System", "SweepData"]


@dataclass
class SweepData:
    """What a forward sweep leaves for the tangent and adjoint sweeps."""

    forward: ForwardResult
    x0: InitialState


def _call_on_grid(f, t: np.ndarray, name: str) -> np.ndarray:
    """f on the whole grid; a scalar function (math.sin) is called sample by sample."""
    try:
        x = np.asarray(f(t), dtype=float)
    except (TypeError, ValueError):       # math.sin, or an `if` on the time
        x = None
    if x is None or x.shape != t.shape:
        try:
            x = np.array([float(f(float(ti))) for ti in t])
        except (TypeError, ValueError) as exc:
            raise InputError(f"input {name!r}: the callable accepts neither the time grid "
                             f"(an array) nor a single time: {exc}") from None
    return x


class System:
    """A model with its kernels compiled (or lambdified) and loaded. Made by
    :func:`symdae.compile_model`.

    Attributes: ``model``, ``backend`` (the kernels and sweeps, see
    :mod:`symdae.simulation.backends.base`), ``sizes``, ``build_info`` (cache key, folder,
    whether the cache was hit, timings of a cold build). ``restore(model, backend name,
    folder)`` remakes the System where it is unpickled; the maker passes it, so that this
    module need not import the stage that makes it.
    """

    def __init__(self, model, backend, build_info: dict | None = None, *,
                 restore: Callable | None = None):
        self.model = model
        self.backend = backend
        self.build_info = dict(build_info or {})
        self.restore = restore
        self._switch_counter: SwitchCounter | None = None
        self.sizes: Sizes = backend.sizes
        # the names every run reads, worked out once (the model's name lists are properties
        # that build new lists from its symbols)
        self._parameter_index = {name: i for i, name in enumerate(model.parameter_names)}
        self._names = {"parameters": model.parameter_names, "outputs": model.output_names,
                       "coordinates": model.coordinate_names,
                       "multipliers": model.multiplier_names}
        k = self.sizes
        expected = (model.n, model.m, len(model.parameters), len(model.inputs),
                    len(model.outputs))
        if (k.n, k.m, k.n_p, k.n_u, k.n_s) != expected:
            raise ModelError(f"the kernels of {model.name!r} have sizes "
                             f"{(k.n, k.m, k.n_p, k.n_u, k.n_s)}, the model {expected}")

    @property
    def switch_counter(self) -> SwitchCounter:
        """The model's switching functions (none for a smooth model), made on first use."""
        if self._switch_counter is None:
            self._switch_counter = SwitchCounter(self.model)
        return self._switch_counter

    # ------------------------------------------------------------------ run-time data
    def parameter_vector(self, params: Mapping | None = None) -> np.ndarray:
        """Nominal values overridden by ``params`` ({name or Symbol: value}), in model order."""
        p = np.array(self.model.nominal_values, dtype=float)
        if not params:
            return p
        index = self._parameter_index
        for key, val in params.items():
            name = parameter_name(key)
            i = index.get(name)
            if i is None:
                raise UnknownNameError(f"unknown parameter {name!r}; the model's parameters "
                                       f"are {self._names['parameters']}")
            try:
                x = float(val)
            except (TypeError, ValueError):
                raise InputError(f"value of parameter {name!r} is not a number: {val!r}") \
                    from None
            if not math.isfinite(x):
                raise InputError(f"value of parameter {name!r} is not finite: {val!r}")
            p[i] = x
        return p

    def input_array(self, inputs: Mapping | None, t: np.ndarray) -> np.ndarray:
        """(N+1, n_u) input values on the grid from {name: array | callable | number}."""
        names = self.model.input_names
        U = np.zeros((len(t), len(names)))
        given = dict(inputs or {})
        for key in given:
            if key not in names:
                raise UnknownNameError(f"unknown input {key!r}; the model's inputs are {names}")
        for k, name in enumerate(names):
            if name not in given:
                raise InputError(f"no values for input {name!r}: pass inputs={{{name!r}: "
                                 "array on the time grid, callable f(t) or constant}")
            val = given[name]
            x = np.asarray(_call_on_grid(val, t, name) if callable(val) else val, dtype=float)
            x = np.broadcast_to(x, t.shape) if x.ndim == 0 else x
            if x.shape != t.shape:
                raise InputError(f"input {name!r} has shape {x.shape}, expected {t.shape} "
                                 "(one value per time step, t0..t_end)")
            bad = np.flatnonzero(~np.isfinite(x))
            if bad.size:
                raise InputError(f"input {name!r} is NaN or infinite at t = {t[bad[0]]:g} "
                                 f"(step {bad[0]})")
            U[:, k] = x
        return U

    def prepare(self, scenario: Scenario | Mapping | PreparedRun | None = None,
                **fields) -> PreparedRun:
        """The parameter-free part of runs of ``scenario`` (its grid and inputs), worked out once
        for runs at many parameter values (:class:`~symdae.simulation.prepared.PreparedRun`).
        A PreparedRun of this system passes through; with ``fields`` its scenario is prepared
        again with them."""
        if isinstance(scenario, PreparedRun):
            if not fields:
                return scenario
            scenario = scenario.scenario
        sc = Scenario.make(scenario, **fields)
        # the grid's arrays: t and the inputs (a run's own are checked when it runs)
        MemoryEstimate("the time grid and the inputs on it", sc.n_steps + 1,
                       8 * (1 + self.sizes.n_u)).check()
        t = sc.times
        U = self.input_array(sc.inputs, t)
        U.setflags(write=False)
        start = given_start(self.model, sc.q0, sc.v0,
                            lambda: self.backend.model_start(sc.t0, self.parameter_vector(), U[0]))
        return PreparedRun(sc, t, U, sc.grid(), start)

    def _check_memory(self, sc: Scenario, store_factorizations: bool,
                      keep_time_terms: bool) -> None:
        """Refuse a run of ``sc`` whose trajectory (and what it keeps) would not fit."""
        MemoryEstimate("the trajectory" + (" and its stored factorisations"
                                           if store_factorizations else ""),
                       sc.n_steps + 1, forward_bytes(self.sizes, sc.scheme, store_factorizations,
                                                     keep_time_terms)
                       ).check()

    # ------------------------------------------------------------------ forward
    def simulate(self, scenario: Scenario | Mapping | None = None, *,
                 params: Mapping | None = None, store_factorizations: bool = False,
                 keep_time_terms: bool = False, **fields) -> Trajectory:
        """Integrate with the HHT scheme of the discrete-adjoint paper, eq. (15).

        Parameters
        ----------
        scenario:
            A :class:`Scenario` (time grid, alpha, inputs, initial state, Newton options);
            its fields may also be given, or overridden, as keywords:
            ``simulate(t_end=1.0, h=1e-4, alpha=-0.1)``.
        params:
            {name: value} overriding the nominal values. Never triggers a recompile.
        store_factorizations:
            Keep the factorised Newton matrix of every step for tangent/adjoint sweeps.
        keep_time_terms:
            Keep only the hoisted time terms (excitations and their derivatives, functions
            of t and p) and state terms (sin, cos, exp, ... of the coordinates) of every step:
            an adjoint or tangent sweep that follows reads them instead of evaluating them
            again (what :func:`~symdae.simulation.checkpoint.cost_and_gradient`
            does). Implied by ``store_factorizations``.

        Returns a Trajectory. Raises InconsistentInitialStateError, SingularMatrixError,
        NewtonError or SimulationError with the time step and residual.
        """
        sc = Scenario.make(scenario, **fields)
        kept = (store_factorizations, keep_time_terms)
        self._check_memory(sc, *kept)         # before any of the run's arrays is made
        prepared = self.prepare(sc)
        prepared.fits.add(kept)
        with one_blas_thread():
            return self.run(prepared, params, *kept)

    def run(self, prepared: PreparedRun, params, store_factorizations: bool = False,
            keep_time_terms: bool = False) -> Trajectory:
        """:meth:`simulate` of a prepared scenario (:meth:`prepare`), in the caller's BLAS
        thread count (:func:`symdae.threads.one_blas_thread` is the sweeps' choice)."""
        t_start = time.perf_counter()
        model, sc, t, U = self.model, prepared.scenario, prepared.t, prepared.U
        kept = (store_factorizations, keep_time_terms)
        if kept not in prepared.fits:
            self._check_memory(sc, *kept)
            prepared.fits.add(kept)
        p = self.parameter_vector(params)
        x0 = initial_state(self.backend, model, p, sc.t0, U[0], sc.q0, sc.v0,
                           tol=sc.init_tol, project=sc.project, given=prepared.start)
        grid = prepared.grid
        fwd = self.backend.forward(grid, p, U, (x0.q, x0.v, x0.a, x0.lam), sc.rtol,
                                   sc.max_iter, store_factorizations,
                                   time_terms=keep_time_terms)
        if not fwd.report.ok:
            self.raise_for_report(fwd.report, grid)
        self.check_outputs(fwd.S, t)
        counters = fwd.report.counters.as_dict()
        if self.switch_counter.functions:             # a non-smooth model
            counters["switches"], counters["on_switch"] = self.switch_counter.count(
                t, fwd.q, fwd.v, fwd.a, fwd.lam, p, U)
        return self.trajectory(t, fwd.S, sc, p, counters, (fwd.q, fwd.v, fwd.a, fwd.lam),
                               wall_time=time.perf_counter() - t_start,
                               sweep=SweepData(fwd, x0))

    def trajectory(self, t: np.ndarray, S: np.ndarray, scenario: Scenario,
                   params: np.ndarray | Mapping, counters: dict, states: tuple | None = None,
                   *, wall_time: float = 0.0, sweep: SweepData | None = None) -> Trajectory:
        """A :class:`Trajectory` with this model's names: the outputs ``S`` (rows of ``t``),
        the states (q, v, a, lam), or None for a run that kept its outputs only, the
        parameters (a vector in model order, or {name: value}) and the run's counters."""
        names = self._names
        # a run's own vector first: it skips the abstract Mapping's slower isinstance check
        if isinstance(params, np.ndarray) or not isinstance(params, Mapping):
            params = dict(zip(names["parameters"], np.asarray(params).tolist()))
        else:
            params = dict(params)
        q, v, a, lam = (None,) * 4 if states is None else states
        return Trajectory(
            t=t, q=q, v=v, a=a, lam=lam,
            outputs={name: S[:, j] for j, name in enumerate(names["outputs"])},
            counters=counters, params=params, scenario=scenario,
            coordinate_names=list(names["coordinates"]),
            multiplier_names=list(names["multipliers"]), wall_time=wall_time, sweep=sweep)

    def check_outputs(self, S: np.ndarray, t: np.ndarray) -> None:
        """Raise a SimulationError naming the output, the time and the step of the first
        non-finite sample of ``S`` (``(len(t), n_s)``); the states are finite (the sweep
        checks them), an output expression may not be."""
        bad = first_nonfinite(S)
        if bad is not None:
            i, j = bad
            raise SimulationError(
                f"output {self.model.output_names[j]!r} is {S[i, j]} at t = {t[i]:.9g} (step "
                f"{i}), its first non-finite sample: check its expression (a square root or "
                "logarithm of a negative value, a division by zero)")

    def raise_for_report(self, rep: SweepReport, grid: Grid):
        """Raise the error a failed forward sweep's report describes (a Newton failure, a
        singular Newton matrix, ...), with the time, the step and what to try."""
        # rep.step counts from the record's start, also in a run of a stretch of it (a
        # segment of multiple shooting: grid.i0 > 0)
        steps = f"of {grid.N}" if not grid.i0 else \
            f"of the record, in this run's steps {grid.i0} .. {grid.i0 + grid.N}"
        where = f"t = {rep.time:.9g} (step {rep.step} {steps}, h = {grid.h:g})"
        if rep.status == "newton_failed":
            norms = (f"residual max-norm {rep.first_residual_norm:.3e} at the first iterate, "
                     f"{rep.residual_norm:.3e} at the last ({rep.noise_ratio:.3g} times its "
                     "round-off level)")
            if rep.pivot >= 0 or rep.residual_norm > 1e3 * rep.first_residual_norm:
                how = "diverged" + (" (the Newton matrix became singular at an iterate far "
                                    "from the solution)" if rep.pivot >= 0 else "")
                advice = ("The step starts too far from its solution: reduce h, or check the "
                          "parameter values and the initial state.")
            elif rep.residual_norm < 1e-3 * rep.first_residual_norm:
                how = "was still converging"
                advice = (f"It ran out of iterations: raise max_iter (now {rep.iterations}), or "
                          "reduce h so that each step starts closer to its solution.")
            else:
                how = "stalled"
                advice = ("The Newton matrix does not match the residual (a force that is not "
                          "smooth, or one whose derivative is wrong?), or the step is too large "
                          "for the nonlinearity: reduce h or smooth the model.")
                if self.switch_counter.functions:
                    advice += (" This model has non-smooth terms: a single-valued law that "
                               "has to stay at its switch (friction that sticks: sign(z) "
                               "with z = 0) has no solution within a step; regularise it, "
                               "e.g. tanh(z / z_eps) (README, 'Non-smooth forces').")
            raise NewtonError(
                f"Newton's method {how} at {where} after {rep.iterations} iterations; {norms}. "
                f"{advice}", time=rep.time, step=rep.step, iterations=rep.iterations,
                residual_norm=rep.residual_norm, noise_ratio=rep.noise_ratio)
        if rep.status == "singular":
            names = self.model.coordinate_names + [f"constraint {j}" for j in range(self.model.m)]
            j = rep.pivot
            what = names[j] if 0 <= j < len(names) else f"row {j}"
            raise SingularMatrixError(
                f"the Newton matrix of eq. (16) is singular at {where}: pivot {j} (about "
                f"{what}) vanished; a zero mass or redundant constraints make the augmented "
                "matrix singular")
        raise SimulationError(f"NaN or infinity in the residual or Newton matrix at {where} "
                              f"(residual max-norm {rep.residual_norm:.3e}); check the model's "
                              "expressions (division by zero, overflow) and the step h")

    # ------------------------------------------------------------------ kernels
    def evaluate(self, kernel: str, t: float, q, v, a, lam, params: Mapping | None = None,
                 u=None, w=None) -> np.ndarray:
        """Evaluate one kernel at one state (flat output; ``symdae.model.kernels.split`` names its
        blocks, ``symdae.model.kernels.pack_weights`` builds ``w``)."""
        p = self.parameter_vector(params)
        u = np.zeros(self.sizes.n_u) if u is None else u
        return self.backend.evaluate(kernel, float(t), q, v, a, lam, p, u, w=w)

    def __reduce__(self):
        """A System pickles as its model and the cache folder of its kernels: unpickling (in a
        process pool, on a Dask worker) loads the extension from that cache by key and
        compiles nothing when it is there."""
        if self.restore is None:
            raise TypeError("this System was made without a restore function (use "
                            "symdae.compile_model), so it cannot be pickled")
        return (self.restore, (self.model, self.backend.name, self.build_info.get("folder")))

    def __repr__(self) -> str:
        return (f"System({self.model!r}, backend={self.backend.name!r}, "
                f"folder={self.build_info.get('folder')!r})")

