"""The design cost Psi(U) of optimal input design and its exact gradient (input-design spec 3.5).

    Psi(U) = kappa Phi(W F(U) W) + P_end + P_path

* F = sum_i eta_i S_i^T R^-1 S_i: the Fisher information of the free parameters b from the
  measured outputs (symdae.identification.fisher), S_i = ds_i/db from the tangent sweep, W = diag(scales);
* Phi: a criterion of symdae.design.criteria ("trace", "A", "D", "E", "cond"), kappa =
  1/|Phi(U_start)| for trace, A and E (so the start has -1 or 1 and the penalty weights are
  dimensionless), 1 for the logarithmic D and cond;
* P_end = 1/2 gamma_end sum_k ((y_k(t_N) - target_k) / scale_k)^2: end conditions (the paper's
  "scrap function") on outputs or states, scales by default max_i |y_k(t_i)| of the start input;
* P_path = 1/2 gamma_path sum_i eta_i sum_k (max(0, |s_k(t_i)| - s_max,k) / s_max,k)^2: optional
  bounds on outputs along the path.

The gradient with respect to every input sample U_1..U_N is exact for the discrete scheme
(symdae.input_adjoint.design_gradient: the adjoint of the state-plus-sensitivity recursion).
The design is local: F is evaluated at ``params`` (the prior guess of b).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..analysis.quadrature import quadrature_weights
from ..errors import InputError, UnknownNameError
from ..identification.fisher import (
    FisherInformation,
    fisher_matrix,
    noise_covariance,
    parameter_scales,
)
from ..simulation.scenario import Scenario
from ..simulation.sensitivity import tangent
from ..simulation.trajectory import Trajectory
from .criteria import CRITERIA, criterion
from .gradients import design_gradient

__all__ = ["EndCondition", "DesignEvaluation", "DesignProblem", "DEFAULT_END_WEIGHT"]

DEFAULT_END_WEIGHT = 1e3           # gamma_end (spec 3.5 / 6.2)
_STATE_KINDS = {"q": 0, "v": 1, "a": 2}


@dataclass(frozen=True)
class EndCondition:
    """y(t_N) -> target for an output (``kind`` "output", ``index`` its column) or a state
    entry (``kind`` "state", ``index`` into x = (q, v, a, lam)); ``scale`` divides the
    residual."""

    name: str
    kind: str
    index: int
    target: float
    scale: float

    def value(self, traj) -> float:
        return float(constrained_series(self, traj)[-1])


def constrained_series(cond, traj) -> np.ndarray:
    """The time series of what ``cond`` constrains (a view: no copy of the states)."""
    if cond.kind == "output":
        return traj.S[:, cond.index]
    n = traj.q.shape[1]
    block, col = divmod(cond.index, n) if cond.index < 3 * n else (3, cond.index - 3 * n)
    return (traj.q, traj.v, traj.a, traj.lam)[block][:, col]


@dataclass
class DesignEvaluation:
    """Psi and its parts at one input: ``value`` = ``information`` + sum(``penalties``);
    ``criterion`` is Phi(W F W) itself (unnormalised); ``gradient`` (N+1, n_u) dPsi/dU (row 0
    zero), None if not asked for."""

    value: float
    information: float
    criterion: float
    penalties: dict
    fisher: FisherInformation
    terminal: dict
    gradient: np.ndarray | None = None
    trajectory: Trajectory | None = field(default=None, repr=False)


def _names(x, what: str) -> list:
    items = [x] if isinstance(x, str) else list(x)
    if not items or len(set(items)) != len(items):
        raise InputError(f"{what} must be a non-empty list of distinct names, got {items}")
    return items


class DesignProblem:
    """Psi(U) for one system, scenario, set of free parameters and measured outputs.

    Parameters
    ----------
    system, scenario:
        The compiled model and the experiment's time grid, alpha, initial state and the
        values of every input (the start input of a designed one, unless ``start_input``).
    free, outputs:
        The parameters b to be identified and the outputs measured.
    designed:
        The names of the inputs whose samples U_1..U_N are varied (default: all inputs).
    params:
        Parameter values at which F is evaluated (the prior guess; default nominal).
    start_input:
        ``{input: array | callable | constant}`` overriding the scenario's values.
    criterion, noise, quadrature, scaling:
        Phi (symdae.design.criteria), R per sample (symdae.identification.fisher.noise_covariance; default
        I), eta (default "sum", eq. 6), W (default "relative": ``|b|``).
    end, end_scale, end_weight:
        ``{output or state: target}``; a state is ``"q:NAME"``, ``"v:NAME"``, ``"a:NAME"`` or
        a bare coordinate name (its position) where no output has that name. Scales default to
        ``max |y|`` on the start input; gamma_end default 1e3.
    path, path_weight:
        ``{output: s_max}`` bounds along the path, and gamma_path (default 1e3).
    normalise:
        ``kappa = 1/|Phi(start)|`` for trace, A, E (default True); else kappa = 1.
    """

    def __init__(self, system, scenario: Scenario, free: Sequence[str] | str,
                 outputs: Sequence[str] | str, *, designed: Sequence[str] | None = None,
                 params: Mapping | None = None, start_input: Mapping | None = None,
                 criterion: str = "trace", noise=None, quadrature="sum", scaling="relative",
                 end: Mapping | None = None, end_scale: Mapping | None = None,
                 end_weight: float = DEFAULT_END_WEIGHT, path: Mapping | None = None,
                 path_weight: float = DEFAULT_END_WEIGHT, normalise: bool = True):
        model = system.model
        self.system = system
        self.free = _names(free, "free parameters")
        self.outputs = _names(outputs, "measured outputs")
        for name in self.free:
            if name not in model.parameter_names:
                raise UnknownNameError(f"model {model.name!r} has no parameter {name!r}; its "
                                       f"parameters are {model.parameter_names}")
        for name in self.outputs:
            if name not in model.output_names:
                raise UnknownNameError(f"model {model.name!r} has no output {name!r}; its "
                                       f"outputs are {model.output_names}")
        if not model.input_names:
            raise InputError(f"model {model.name!r} has no inputs to design")
        self.designed = list(model.input_names) if designed is None else \
            _names(designed, "designed inputs")
        for name in self.designed:
            if name not in model.input_names:
                raise UnknownNameError(f"model {model.name!r} has no input {name!r}; its "
                                       f"inputs are {model.input_names}")
        if criterion not in CRITERIA:
            raise InputError(f"unknown criterion {criterion!r}; criteria: {', '.join(CRITERIA)}")
        self.criterion = criterion
        self.params = dict(params or {})
        self.p = system.parameter_vector(self.params)
        sc = Scenario.make(scenario)
        merged = {**dict(sc.inputs or {}), **dict(start_input or {})}
        self.t = sc.times
        self.U_start = system.input_array(merged, self.t)
        self.scenario = sc.replace(inputs=None)
        self.columns = [model.input_names.index(k) for k in self.designed]
        self._out_cols = [model.output_names.index(k) for k in self.outputs]
        self.R = noise_covariance(self.outputs, noise)
        self.Rinv = np.linalg.inv(self.R)
        self.eta = quadrature_weights(self.t, quadrature)
        if np.any(~np.isfinite(self.eta)) or np.any(self.eta < 0):
            raise InputError("quadrature weights must be finite and >= 0")
        self.quadrature = quadrature if isinstance(quadrature, str) else "custom weights"
        values = np.array([self.p[model.parameter_names.index(k)] for k in self.free])
        self.values = values
        self.scales = parameter_scales(self.free, values, scaling)
        self.end_weight = _weight(end_weight, "end_weight")
        self.path_weight = _weight(path_weight, "path_weight")
        self._path = self._parse_path(path or {})
        self.kappa = 1.0
        start = self.evaluate(self.U_start, gradient=False, _start=True)
        self.end = self._parse_end(end or {}, dict(end_scale or {}), start.trajectory)
        phi0 = start.criterion
        if normalise and criterion in ("trace", "A", "E"):
            if not (math.isfinite(phi0) and phi0 != 0.0):
                raise InputError(f"the start input carries no information ({criterion} "
                                 f"criterion {phi0:g}): it is a stationary point of the "
                                 "design; start from a non-zero input that excites the "
                                 "measured outputs")
            self.kappa = 1.0 / abs(phi0)

    # ------------------------------------------------------------------ parsing
    def _parse_path(self, path: Mapping) -> list:
        names = self.system.model.output_names
        out = []
        for name, smax in path.items():
            if name not in names:
                raise UnknownNameError(f"path bound on {name!r}, which is not an output; the "
                                       f"outputs are {names}")
            smax = float(smax)
            if not (math.isfinite(smax) and smax > 0):
                raise InputError(f"path bound of {name!r} must be positive and finite, got "
                                 f"{smax!r}")
            out.append((names.index(name), smax))
        return out

    def _locate(self, name: str) -> tuple:
        model = self.system.model
        if name in model.output_names:
            return "output", model.output_names.index(name)
        kind, sep, coord = name.partition(":")
        if not sep:
            kind, coord = "q", name
        coords = model.coordinate_names
        if kind in _STATE_KINDS and coord in coords:
            return "state", _STATE_KINDS[kind] * model.n + coords.index(coord)
        raise UnknownNameError(
            f"end condition on {name!r}: not an output ({model.output_names}) nor a state "
            f"('q:NAME', 'v:NAME', 'a:NAME' or a bare coordinate name, coordinates {coords})")

    def _parse_end(self, end: Mapping, scales: Mapping, start_traj) -> list:
        unknown = [k for k in scales if k not in end]
        if unknown:
            raise UnknownNameError(f"end_scale given for {unknown}, which have no end "
                                   f"condition ({list(end)})")
        conds = []
        for name, target in end.items():
            kind, index = self._locate(name)
            target = float(target)
            if not math.isfinite(target):
                raise InputError(f"end condition target of {name!r} is not finite")
            probe = EndCondition(name, kind, index, target, 1.0)
            if name in scales:
                scale = float(scales[name])
            else:
                scale = float(np.max(np.abs(constrained_series(probe, start_traj))))
                if not scale > 0:
                    raise InputError(f"end condition on {name!r}: it is zero along the whole "
                                     "start trajectory, so its scale cannot default to its "
                                     "maximum there; pass end_scale={name: scale}")
            if not (math.isfinite(scale) and scale > 0):
                raise InputError(f"end_scale of {name!r} must be positive and finite")
            conds.append(EndCondition(name, kind, index, target, scale))
        return conds

    # ------------------------------------------------------------------ evaluation
    @property
    def N(self) -> int:
        """The number of time steps of the scenario's grid."""
        return self.t.size - 1

    def inputs_of(self, U: np.ndarray) -> dict:
        """``{input: samples}`` of the input samples ``U`` (one column per model input)."""
        return {name: U[:, k] for k, name in enumerate(self.system.model.input_names)}

    def simulate(self, U: np.ndarray, params: Mapping | None = None,
                 store_factorizations: bool = False):
        """The trajectory for input samples U (N+1, n_u) at the design point (or ``params``)."""
        p = self.params if params is None else params
        return self.system.simulate(self.scenario.replace(inputs=self.inputs_of(U)), params=p,
                                    store_factorizations=store_factorizations)

    def fisher(self, traj, S: np.ndarray) -> FisherInformation:
        """The Fisher information of the sensitivities ``S`` of the trajectory ``traj``."""
        F = fisher_matrix(S, self.R, self.eta)
        return FisherInformation(F, tuple(self.free), self.values.copy(), self.scales,
                                 tuple(self.outputs), self.R, self.quadrature,
                                 int(np.count_nonzero(self.eta)))

    def evaluate(self, U: np.ndarray, gradient: bool = True, _start: bool = False
                 ) -> DesignEvaluation:
        """Psi at input samples U (N+1, n_u) (or (N+1,) for one input), with its gradient
        dPsi/dU if asked for (row 0 of the gradient is 0: U_0 is not a design variable)."""
        U = np.asarray(U, dtype=float)
        if U.ndim == 1 and self.U_start.shape[1] == 1:
            U = U[:, None]
        if U.shape != self.U_start.shape:
            raise InputError(f"input samples have shape {U.shape}, expected "
                             f"{self.U_start.shape}")
        sz = self.system.sizes
        # the tangent and the design sweep both reuse stored factorisations; the tangent
        # alone refactorises for less than storing costs
        traj = self.simulate(U, store_factorizations=gradient)
        tg = tangent(self.system, traj, self.free)
        S = np.ascontiguousarray(tg.ds[:, self._out_cols, :])
        fisher = self.fisher(traj, S)
        W = self.scales
        crit = criterion(self.criterion, fisher.scaled)
        info = self.kappa * crit.value
        N = self.N
        dS = np.zeros((N + 1, sz.n_s, len(self.free)))
        ds = np.zeros((N + 1, sz.n_s))
        dx = np.zeros((N + 1, sz.nx))
        # dPhi/dS_i = 2 eta_i R^-1 S_i W G W
        WGW = crit.G * np.outer(W, W)
        dS[:, self._out_cols, :] = (2.0 * self.kappa) * self.eta[:, None, None] * \
            np.matmul(self.Rinv, S) @ WGW
        penalties: dict[str, float] = {}
        terminal: dict = {}
        if not _start:      # the start evaluation (in __init__) sets the end scales
            penalties["end"] = self._end_penalty(traj, ds, dx, terminal)
        if self._path:
            penalties["path"] = self._path_penalty(traj, ds)
        value = info + sum(penalties.values())
        grad = None
        if gradient:
            grad = design_gradient(self.system, traj, self.free, dS, ds, dx, tangents=tg)
        return DesignEvaluation(value, info, crit.value, penalties, fisher, terminal, grad, traj)

    def _end_penalty(self, traj, ds, dx, terminal) -> float:
        P = 0.0
        for c in self.end:
            y = c.value(traj)
            r = (y - c.target) / c.scale
            terminal[c.name] = {"value": y, "target": c.target, "scale": c.scale,
                                "relative_residual": r}
            P += 0.5 * self.end_weight * r * r
            d = self.end_weight * r / c.scale
            if c.kind == "output":
                ds[-1, c.index] += d
            else:
                dx[-1, c.index] += d
        return P

    def _path_penalty(self, traj, ds) -> float:
        P = 0.0
        S = traj.S
        for k, smax in self._path:
            excess = np.maximum(np.abs(S[:, k]) - smax, 0.0) / smax
            P += 0.5 * self.path_weight * float(np.sum(self.eta * excess ** 2))
            ds[:, k] += self.path_weight * self.eta * excess * np.sign(S[:, k]) / smax
        return P


def _weight(x, what: str) -> float:
    x = float(x)
    if not (math.isfinite(x) and x >= 0):
        raise InputError(f"{what} must be a finite number >= 0, got {x!r}")
    return x
