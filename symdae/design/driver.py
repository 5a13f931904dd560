"""Optimal input design (Oberpeilsteiner et al. 2017): the input that maximises the information
the measured outputs carry about the free parameters, under bounds on the input and end
conditions on the states.

:func:`design_input` minimises Psi(U) of :class:`symdae.design.problem.DesignProblem` over the
samples U_1..U_N of the designed inputs, written as U = psi(B c) with a bound map psi
(symdae.input_maps: the paper's arctan, the logistic map, or plain box bounds) and a basis B
(the grid, knots, or a user basis). The gradient is exact for the discrete scheme (reverse over
tangent, symdae.input_adjoint). The optimiser is scipy's L-BFGS-B (default) or the paper's
steepest descent with Armijo backtracking (``optimizer="gradient"``); one progress line per
iteration. Saturating designs make L-BFGS-B end with a line-search failure ("ABNORMAL") or
crawl: the run stops when Psi changes by less than ``stall[1]`` (relative) over ``stall[0]``
iterations, and an abnormal end after such a stall counts as converged (spec 3.6).
"""
from __future__ import annotations

import csv
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import optimize

from ..atomic import atomic_open
from ..errors import InputError, UnknownNameError
from ..identification.fisher import FisherInformation
from ..simulation.memory import MemoryEstimate, forward_bytes, tangent_bytes
from ..simulation.scenario import Scenario
from ..threads import one_blas_thread
from .input_maps import BoundMap, InputBasis, bound_map, input_basis
from .problem import DEFAULT_END_WEIGHT, DesignEvaluation, DesignProblem

__all__ = ["OPTIMIZERS", "DesignVariables", "InputDesign", "DesignSnapshot", "design_input",
           "design_estimate"]

OPTIMIZERS = ("L-BFGS-B", "gradient")
SATURATION = 0.005          # a sample is saturated within this fraction of (u+ - u-) of a bound


class DesignVariables:
    """The map from the optimiser's variables z to the input samples U (N+1, n_u)."""

    def __init__(self, problem: DesignProblem, bounds: Mapping, kind: str = "arctan",
                 parameterisation=None):
        self.problem = problem
        model = problem.system.model
        unknown = [k for k in bounds if k not in model.input_names]
        if unknown:
            raise UnknownNameError(f"bounds given for {unknown}, which are not inputs of "
                                   f"{model.name!r} ({model.input_names})")
        missing = [k for k in problem.designed if k not in bounds]
        if missing:
            raise InputError(f"no bounds for the designed input(s) {missing}: pass "
                             "inputs={name: (lower, upper)}")
        t1 = problem.t[1:]
        specs = parameterisation if isinstance(parameterisation, Mapping) and \
            set(parameterisation) <= set(problem.designed) and \
            not set(parameterisation) & {"knots", "basis"} else \
            {k: parameterisation for k in problem.designed}
        self.maps: dict[str, BoundMap] = {}
        self.bases: dict[str, InputBasis] = {}
        for name in problem.designed:
            lo_hi = bounds[name]
            if not isinstance(lo_hi, (tuple, list)) or len(lo_hi) != 2:
                raise InputError(f"bounds of input {name!r} must be (lower, upper), got "
                                 f"{lo_hi!r}")
            self.maps[name] = bound_map(kind, lo_hi[0], lo_hi[1], name)
            self.bases[name] = input_basis(specs.get(name), t1, name)
            if kind == "box" and not self.bases[name].partition_of_unity:
                raise InputError(f"input {name!r}: box bounds on the coefficients of a general "
                                 "basis do not bound the input; use the arctan or logistic map")
        self.kind = kind
        self.sizes = [self.bases[k].size(problem.N) for k in problem.designed]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def _parts(self, z):
        for j, name in enumerate(self.problem.designed):
            yield j, name, self.problem.columns[j], z[self.offsets[j]:self.offsets[j + 1]]

    def to_U(self, z: np.ndarray) -> np.ndarray:
        U = self.problem.U_start.copy()
        for _, name, col, zj in self._parts(z):
            U[1:, col] = self.maps[name].value(self.bases[name].expand(zj))
        return U

    def pullback(self, z: np.ndarray, gU: np.ndarray) -> np.ndarray:
        """dPsi/dz from dPsi/dU (N+1, n_u)."""
        g = np.empty(self.size)
        for j, name, col, zj in self._parts(z):
            y = self.bases[name].expand(zj)
            g[self.offsets[j]:self.offsets[j + 1]] = \
                self.bases[name].pullback(self.maps[name].derivative(y) * gU[1:, col])
        return g

    def start(self) -> np.ndarray:
        """z of the start input (InputError if it leaves its bounds)."""
        z = np.empty(self.size)
        U = self.problem.U_start
        for j, name, col, _ in self._parts(np.zeros(self.size)):
            bm = self.maps[name]
            if not bm.lower <= U[0, col] <= bm.upper:
                raise InputError(f"the initial input {name!r} is {U[0, col]:.6g} at t0 (sample "
                                 f"0), outside its bounds [{bm.lower:g}, {bm.upper:g}]")
            y = bm.inverse(U[1:, col], name)
            c = self.bases[name].fit(y)
            z[self.offsets[j]:self.offsets[j + 1]] = c
        return z

    def box_bounds(self):
        if self.kind != "box":
            return None
        out = []
        for j, name, _, _ in self._parts(np.zeros(self.size)):
            out += [(self.maps[name].lower, self.maps[name].upper)] * self.sizes[j]
        return out

    def saturation(self, U: np.ndarray) -> dict:
        """{input: fraction of U_1..U_N within SATURATION (u+ - u-) of a bound}."""
        out = {}
        for name, col in zip(self.problem.designed, self.problem.columns):
            bm = self.maps[name]
            tol = SATURATION * (bm.upper - bm.lower)
            u = U[1:, col]
            out[name] = float(np.mean((u - bm.lower < tol) | (bm.upper - u < tol)))
        return out


@dataclass(frozen=True)
class DesignSnapshot:
    """An input and what the design cost says about it."""

    label: str
    U: np.ndarray
    value: float
    information: float
    criterion: float
    penalties: dict
    fisher: FisherInformation
    terminal: dict
    output_max: dict

    @classmethod
    def of(cls, label: str, U: np.ndarray, ev: DesignEvaluation, problem: DesignProblem):
        traj = ev.trajectory
        assert traj is not None         # DesignProblem.evaluate returns the run
        omax = {k: float(np.max(np.abs(traj.outputs[k]))) for k in traj.outputs}
        return cls(label, U, ev.value, ev.information, ev.criterion, dict(ev.penalties),
                   ev.fisher, dict(ev.terminal), omax)

    def to_dict(self) -> dict:
        F = self.fisher
        st = F.statistics()
        return {"label": self.label, "value": self.value, "information_term": self.information,
                "criterion": self.criterion, "penalties": self.penalties,
                "trace_scaled": float(np.trace(F.scaled)), "fisher": F.to_dict(),
                "statistics": st.to_dict(), "terminal": self.terminal,
                "output_max_abs": self.output_max}


@dataclass
class InputDesign:
    """The result of :func:`design_input`.

    ``U`` (N+1, n_u) is the optimal input on the grid ``t`` (all inputs; the designed ones in
    ``inputs``), ``variables`` the optimiser's z. ``start`` and ``optimal`` are
    :class:`DesignSnapshot` records (Fisher information, criterion, penalties, terminal
    residuals), ``comparisons`` the same for other inputs. ``history``: one entry per
    iteration (value, criterion, penalties, evaluations so far).
    """

    model: str
    inputs: list
    t: np.ndarray
    U: np.ndarray
    variables: np.ndarray
    criterion: str
    bound_map: str
    parameterisation: dict
    optimizer: str
    start: DesignSnapshot
    optimal: DesignSnapshot
    comparisons: dict
    saturation: dict
    history: list
    n_iterations: int
    n_evaluations: int
    wall_time: float
    message: str
    success: bool
    settings: dict = field(default_factory=dict)
    problem: DesignProblem | None = field(default=None, repr=False)

    def input(self, name: str) -> np.ndarray:
        """The designed samples of input ``name`` on the time grid."""
        names = self.problem.system.model.input_names if self.problem else self.inputs
        if name not in names:
            raise UnknownNameError(f"no input {name!r}; inputs are {names}")
        return self.U[:, names.index(name)]

    def scenario_inputs(self) -> dict:
        """{input: samples} of the optimal input, for Scenario(inputs=...)."""
        names = self.problem.system.model.input_names if self.problem else self.inputs
        return {name: self.U[:, k] for k, name in enumerate(names)}

    def gain(self, reference: str = "start") -> float:
        """tr(W F W) of the optimal input over that of ``reference`` (start or a comparison)."""
        ref = self.start if reference == "start" else self.comparisons[reference]
        return float(np.trace(self.optimal.fisher.scaled) / np.trace(ref.fisher.scaled))

    def to_csv(self, path) -> Path:
        """Write the optimal input on the grid (``t`` and one column per input); returns the
        path."""
        path = Path(path)
        names = self.problem.system.model.input_names if self.problem else self.inputs
        with atomic_open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["t"] + names)
            for i, ti in enumerate(self.t):
                w.writerow([repr(float(ti))] + [repr(float(x)) for x in self.U[i]])
        return path

    def to_dict(self) -> dict:
        """The design, its settings and its evaluations as plain values (for JSON reports)."""
        return {"model": self.model, "designed_inputs": self.inputs,
                "criterion": self.criterion, "bound_map": self.bound_map,
                "parameterisation": self.parameterisation, "optimizer": self.optimizer,
                "settings": self.settings, "start": self.start.to_dict(),
                "optimal": self.optimal.to_dict(),
                "comparisons": {k: v.to_dict() for k, v in self.comparisons.items()},
                "gain_trace_over_start": self.gain(),
                "saturated_fraction": self.saturation, "n_iterations": self.n_iterations,
                "n_evaluations": self.n_evaluations, "wall_time_s": self.wall_time,
                "message": self.message, "success": self.success,
                "history": self.history, "variables": self.variables.tolist()}

    def summary(self) -> str:
        """A readable report: criterion, gains over the start and comparison inputs, end
        conditions."""
        s, o = self.start, self.optimal
        crit = {"trace": "trace criterion (the paper's 'A-optimality': maximise tr F~)",
                "A": "classical A criterion (minimise tr F~^-1)", "D": "D criterion "
                "(maximise ln det F~)", "E": "E criterion (maximise lambda_min F~)",
                "cond": "condition criterion (minimise ln cond F~)"}[self.criterion]
        lines = [f"optimal input design of {self.model}: {crit}; parameters "
                 f"{list(o.fisher.parameters)} from outputs {list(o.fisher.outputs)} "
                 f"(F~ = W F W, W = {o.fisher.scales.tolist()}, eta {o.fisher.quadrature})",
                 f"  {self.optimizer}: {self.n_iterations} iterations, {self.n_evaluations} "
                 f"evaluations, {self.wall_time:.2f} s; {self.message}",
                 f"  {'input':>10s} {'Psi':>13s} {'criterion':>13s} {'tr F~':>13s} "
                 f"{'penalties':>11s}"]
        for snap in [s, o] + list(self.comparisons.values()):
            pen = sum(snap.penalties.values())
            lines.append(f"  {snap.label:>10s} {snap.value:13.6g} {snap.criterion:13.6g} "
                         f"{np.trace(snap.fisher.scaled):13.6g} {pen:11.4g}")
        lines.append(f"  gain tr F~ (optimal / start): {self.gain():.4g}" + "".join(
            f", over {k}: {self.gain(k):.4g}" for k in self.comparisons))
        for name, r in o.terminal.items():
            lines.append(f"  end condition {name}: {r['value']:.4g} (target {r['target']:g}, "
                         f"{r['relative_residual']:+.3e} of its scale {r['scale']:.4g})")
        lines.append("  saturated samples: " + ", ".join(
            f"{k} {100 * v:.1f} %" for k, v in self.saturation.items()))
        return "\n".join(lines)


def _evaluator(problem: DesignProblem, variables: DesignVariables, history: list,
               progress) -> tuple:
    """fun(z) -> (Psi, dPsi/dz) with a memory of the evaluations (the callback reports the
    point the line search accepted, which is always the last one evaluated or a cached one)."""
    cache: dict = {}
    counter = {"evaluations": 0}

    def fun(z):
        key = z.tobytes()
        if key not in cache:
            U = variables.to_U(z)
            ev = problem.evaluate(U)
            counter["evaluations"] += 1
            cache.clear()
            cache[key] = (ev, variables.pullback(z, ev.gradient))
        ev, g = cache[key]
        return ev.value, g

    def record(z):
        ev, g = cache.get(z.tobytes()) or (None, None)
        if ev is None:
            fun(z)
            ev, g = cache[z.tobytes()]
        entry = {"iteration": len(history), "value": ev.value, "information": ev.information,
                 "criterion": ev.criterion, "penalties": dict(ev.penalties),
                 "gradient_norm": float(np.linalg.norm(g)),
                 "evaluations": counter["evaluations"]}
        history.append(entry)
        if progress is True:
            pen = "  ".join(f"{k} {v:.4e}" for k, v in entry["penalties"].items())
            print(f"iter {entry['iteration']:4d}  Psi = {entry['value']:+.8e}  "
                  f"{problem.criterion} = {entry['criterion']:+.6e}  {pen}  "
                  f"|grad| = {entry['gradient_norm']:.3e}  evals {entry['evaluations']}",
                  file=sys.stderr)
        elif callable(progress):
            progress(entry)
        return entry

    return fun, record, counter


def _stalled(history: list, window: int, tol: float) -> bool:
    if len(history) <= window:
        return False
    a, b = history[-1]["value"], history[-1 - window]["value"]
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-300)


def _lbfgsb(fun, record, z0, bounds, max_iterations, stall, options):
    window, tol = stall
    history_ref = {"stalled": False}
    hist = []

    def callback(intermediate_result):
        hist.append(record(np.asarray(intermediate_result.x)))
        if _stalled(hist, window, tol):
            history_ref["stalled"] = True
            raise StopIteration

    opts = {"maxiter": int(max_iterations), "maxcor": LBFGS_MEMORY, "ftol": 0.0, "gtol": 1e-12,
            "maxfun": 4 * int(max_iterations) + 20, **dict(options or {})}
    with one_blas_thread():     # see symdae/threads.py
        res = optimize.minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=bounds,
                                callback=callback, options=opts)
    if history_ref["stalled"]:
        return res.x, (f"stalled: Psi changed by less than {tol:g} (relative) over the last "
                       f"{window} iterations"), True
    msg = str(res.message)
    if "ABNORMAL" in msg.upper() and _stalled(hist, min(10, window), tol):
        return res.x, f"converged (line search ended, Psi settled): {msg}", True
    return res.x, msg, bool(res.success)


def _steepest_descent(fun, record, z0, max_iterations, stall, options):
    """The paper's eq. (16): z <- z - kappa grad, kappa by Armijo backtracking, doubled after
    every accepted step (scipy has no plain gradient method)."""
    window, tol = stall
    opts = {"armijo": 1e-4, "backtracks": 40, **dict(options or {})}
    z = np.asarray(z0, dtype=float).copy()
    f, g = fun(z)
    hist = [record(z)]
    kappa = opts.get("step", 0.1 / max(float(np.max(np.abs(g))), 1e-300))
    for _ in range(int(max_iterations)):
        gg = float(g @ g)
        if gg == 0.0:
            return z, "the gradient vanished", True
        for _ in range(int(opts["backtracks"])):
            zt = z - kappa * g
            ft, gt = fun(zt)
            if ft <= f - opts["armijo"] * kappa * gg:
                break
            kappa *= 0.5
        else:
            return z, "line search failed: no step lowers Psi", _stalled(hist, 10, tol)
        z, f, g = zt, ft, gt
        kappa *= 2.0
        hist.append(record(z))
        if _stalled(hist, window, tol):
            return z, (f"stalled: Psi changed by less than {tol:g} (relative) over the last "
                       f"{window} iterations"), True
    return z, f"iteration limit {max_iterations} reached", False


LBFGS_MEMORY = 20          # corrections L-BFGS-B keeps (its maxcor)


def design_estimate(system, scenario, free: Sequence[str] | str,
                    inputs: int | None = None, outputs: int | None = None) -> MemoryEstimate:
    """The memory of :func:`design_input` on ``scenario`` for the parameters ``free``, with
    ``inputs`` inputs designed on the grid (default: every input) and ``outputs`` measured
    outputs (default: every output).

    Per grid point: two forward runs with their stored factorisations (the evaluation and
    the one the line search keeps), the tangents along the free parameters, the output
    sensitivities S and dPsi/dS (and the sweep's transposed copy), dPsi/ds, dPsi/dx and the
    input gradient; per designed sample, L-BFGS-B's 2 x LBFGS_MEMORY correction vectors, its
    five work vectors and the variables' own copies (z, bounds, gradient, pullback: six).
    """
    sc = Scenario.make(scenario)
    sz = system.sizes
    nd = 1 if isinstance(free, str) else len(free)
    n_in = sz.n_u if inputs is None else inputs
    n_out = sz.n_s if outputs is None else outputs
    sweep = (2 * forward_bytes(sz, sc.scheme, store=True) + tangent_bytes(sz, sc.scheme, nd)
             + 8 * (nd * (n_out + 2 * sz.n_s) + sz.n_s + sz.nx + max(sz.n_u, 1)
                    + (1 + nd if sz.m == 0 else 0)))
    optimiser = 8 * n_in * (2 * LBFGS_MEMORY + 5 + 6)
    return MemoryEstimate("the input design", sc.n_steps + 1, sweep + optimiser,
                          shrink="a larger h or a shorter t_end (--h, --t-end), or fewer free "
                          "parameters")


def design_input(system, scenario, free: Sequence[str] | str, outputs: Sequence[str] | str, *,
                 inputs: Mapping, params: Mapping | None = None,
                 start_input: Mapping | None = None, criterion: str = "trace", noise=None,
                 quadrature="sum", scaling="relative", end: Mapping | None = None,
                 end_scale: Mapping | None = None, end_weight: float = DEFAULT_END_WEIGHT,
                 path: Mapping | None = None, path_weight: float = DEFAULT_END_WEIGHT,
                 bound_map: str = "arctan", parameterisation="grid",
                 optimizer: str = "L-BFGS-B", max_iterations: int = 300,
                 stall: tuple = (20, 1e-6), options: Mapping | None = None,
                 compare: Mapping | None = None,
                 progress: bool | Callable = True) -> InputDesign:
    """Design the inputs ``inputs`` ({name: (lower, upper)}) of ``system`` so that the
    ``outputs`` measured over ``scenario`` carry the most information about ``free``.

    ``params``: the design point (the prior guess of the free parameters; default nominal).
    ``start_input``: {input: values} to start from (default: the scenario's inputs), strictly
    inside the bounds for the smooth maps. ``criterion``: "trace" (default, the paper's: the
    trace of W F W is maximised), "A" (classical: tr (W F W)^-1 minimised), "D", "E", "cond".
    ``end``: {output or state: target} end conditions as a penalty ("scrap function");
    ``end_scale``, ``end_weight`` (gamma_end, default 1e3). ``path``: {output: bound}.
    ``bound_map``: "arctan" (default, the paper's eq. 18), "logistic" (eq. 17) or "box".
    ``parameterisation``: "grid" (default), {"knots": times}, {"basis": B} (N x K), or
    {input: one of those}. ``optimizer``: "L-BFGS-B" or "gradient" (the paper's steepest
    descent). ``stall`` = (window, tol): stop when Psi changes by less than tol (relative)
    over window iterations. ``compare``: {label: {input: values}} inputs to report beside the
    start and the optimum (e.g. the paper's comparison sine). ``progress``: True prints one
    line per iteration to stderr; a callable receives each history entry.
    """
    t_start = time.perf_counter()
    if optimizer not in OPTIMIZERS:
        raise InputError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    if not isinstance(inputs, Mapping) or not inputs:
        raise InputError("inputs must map each designed input to its bounds: "
                         "{name: (lower, upper)}")
    window, tol = stall
    if int(window) < 1 or not float(tol) >= 0:
        raise InputError(f"stall must be (window >= 1, tolerance >= 0), got {stall!r}")
    sc = Scenario.make(scenario)
    design_estimate(system, sc, free, len(inputs),
                    1 if isinstance(outputs, str) else len(outputs)).check()
    problem = DesignProblem(system, scenario, free, outputs, designed=list(inputs),
                            params=params, start_input=start_input, criterion=criterion,
                            noise=noise, quadrature=quadrature, scaling=scaling, end=end,
                            end_scale=end_scale, end_weight=end_weight, path=path,
                            path_weight=path_weight)
    variables = DesignVariables(problem, inputs, bound_map, parameterisation)
    z0 = variables.start()
    history: list = []
    fun, record, counter = _evaluator(problem, variables, history, progress)
    if optimizer == "L-BFGS-B":
        record(z0)
        z, message, success = _lbfgsb(fun, record, z0, variables.box_bounds(),
                                      max_iterations, (int(window), float(tol)), options)
    else:
        z, message, success = _steepest_descent(fun, record, z0, max_iterations,
                                                (int(window), float(tol)), options)
    U = variables.to_U(z)
    start = DesignSnapshot.of("start", problem.U_start,
                              problem.evaluate(problem.U_start, gradient=False), problem)
    optimal = DesignSnapshot.of("optimal", U, problem.evaluate(U, gradient=False), problem)
    comparisons = {}
    for label, values in (compare or {}).items():
        merged = {**problem.inputs_of(problem.U_start), **dict(values)}
        Uc = system.input_array(merged, problem.t)
        comparisons[label] = DesignSnapshot.of(label, Uc, problem.evaluate(Uc, gradient=False),
                                               problem)
    params_used = dict(zip(system.model.parameter_names, problem.p.tolist()))
    return InputDesign(
        model=system.model.name, inputs=list(problem.designed), t=problem.t.copy(), U=U,
        variables=z, criterion=criterion, bound_map=bound_map,
        parameterisation={k: b.kind for k, b in variables.bases.items()}, optimizer=optimizer,
        start=start, optimal=optimal, comparisons=comparisons,
        saturation=variables.saturation(U), history=history,
        n_iterations=max(len(history) - 1, 0), n_evaluations=counter["evaluations"],
        wall_time=time.perf_counter() - t_start, message=message, success=success,
        settings={"bounds": {k: list(v) for k, v in inputs.items()}, "params": params_used,
                  "free": list(problem.free), "outputs": list(problem.outputs),
                  "end": {c.name: {"target": c.target, "scale": c.scale} for c in problem.end},
                  "end_weight": problem.end_weight, "kappa": problem.kappa,
                  "quadrature": problem.quadrature, "noise_covariance": problem.R.tolist(),
                  "max_iterations": int(max_iterations), "stall": [int(window), float(tol)],
                  "h": problem.scenario.h, "t_end": problem.scenario.t_end,
                  "alpha": problem.scenario.alpha},
        problem=problem)
