"""The user-facing model: coordinates, mass matrix or Lagrangian, forces, constraints, parameters.

A :class:`Model` only checks and stores what the user wrote. It maps the user's objects (dynamic
symbols, their derivatives, parameter symbols, inputs, multipliers) onto internal symbols that
name kernel arguments (``q[0]``, ``p[3]``, ...); :mod:`symdae.derivation` works on those.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import sympy as sp
from sympy.core.function import AppliedUndef
from sympy.physics.mechanics import dynamicsymbols

from ..errors import InputError, ModelError, UndeclaredSymbolError, UnknownNameError
from .nonsmooth import check_compilable
from .walk import distinct_nodes, replace_all, serialize

__all__ = ["Model", "KernelSymbols", "parameter_name", "by_parameter_name"]

_RESERVED = re.compile(r"^(q|v|a|lam|p|u|w)\[\d+\]$")


@dataclass(frozen=True)
class KernelSymbols:
    """Internal symbols, one per kernel argument slot (printed as ``q[i]``, ``p[k]``, ...)."""

    t: sp.Symbol
    q: tuple
    v: tuple
    a: tuple
    lam: tuple
    p: tuple
    u: tuple

    @staticmethod
    def make(n: int, m: int, n_p: int, n_u: int) -> KernelSymbols:
        # every slot is real (so is time): SymPy then keeps |exp(x)|, |x|' and the like free
        # of re() and im(), which no kernel can compute
        def vec(name, k):
            return tuple(sp.Symbol(f"{name}[{i}]", real=True) for i in range(k))

        return KernelSymbols(sp.Symbol("t", real=True), vec("q", n), vec("v", n), vec("a", n),
                             vec("lam", m), vec("p", n_p), vec("u", n_u))


def parameter_name(key) -> str:
    """The name of a parameter given by its name or by its SymPy Symbol (both work wherever
    parameters are named at run time)."""
    return key if isinstance(key, str) else getattr(key, "name", str(key))


def by_parameter_name(mapping):
    """``mapping`` ({parameter name or Symbol: value}) keyed by names; None stays None."""
    if mapping is None:
        return None
    out = {}
    for key, val in dict(mapping).items():
        name = parameter_name(key)
        if name in out:
            raise InputError(f"parameter {name!r} is given twice (by name and by Symbol)")
        out[name] = val
    return out


def _as_expr(x, what: str) -> sp.Expr:
    try:
        e = sp.sympify(x)
    except (sp.SympifyError, TypeError) as exc:
        raise ModelError(f"{what} is not a SymPy expression: {x!r}") from exc
    if not isinstance(e, sp.Expr):
        raise ModelError(f"{what} must be a scalar SymPy expression, got {type(e).__name__}")
    return e


def _is_dynamic(obj, t) -> bool:
    return isinstance(obj, AppliedUndef) and obj.args == (t,)


class Model:
    """A mechanical system in descriptor form, written in SymPy.

        M(q, p) q'' + C_q(q, t, p)^T lam = Q(q, q', t, p, u)
        C(q, t, p) = 0

    Parameters
    ----------
    name:
        A label; used (sanitised) in the name of the compiled module and its cache folder.
    coordinates:
        Generalized coordinates, ``sympy.physics.mechanics.dynamicsymbols`` functions of time.
    mass_matrix:
        n x n mass matrix M(q, t, p). May be singular where the constraints make the augmented
        matrix regular. Give this or ``lagrangian``, not both.
    lagrangian:
        L = T - V in q, q', t, p. symdae derives M = d2L/dq'dq' and the forces
        dL/dq - (d2L/dq'dq) q' - d2L/dq'dt.
    forces:
        Generalized (non-conservative) forces Q(q, q', t, p, u), n entries; zero if omitted.
    constraints:
        Holonomic constraints C(q, t, p) = 0 (rheonomic allowed, parameters allowed).
    parameters:
        ``{symbol: nominal value}``. The order is the order of the parameter vector.
    inputs:
        Excitation signals u(t) (symbols or functions of t) whose values are given at run time
        on the time grid; they may appear in forces and outputs.
    outputs:
        ``{name: expression}`` in q, q', q'', multipliers, t, p, u.
    multipliers:
        Symbols for the Lagrange multipliers (one per constraint) for use in outputs;
        ``lambda_0, lambda_1, ...`` if omitted.
    initial_state:
        ``{coordinate or its derivative: expression in parameters}``; unspecified entries are 0.
        Initial states that depend on parameters (a pendulum whose length is a parameter)
        are differentiated exactly by the gradient.
    time:
        The time symbol (default: the one of ``dynamicsymbols``).
    units:
        ``{name or symbol: unit}`` of outputs, coordinates, parameters and inputs (e.g.
        ``{"a1": "m/s^2", x1: "m", cE1: "N/m"}``), for figure axes and reports; names without
        one are shown bare. Not part of the generated code.
    """

    def __init__(self, name: str, coordinates: Iterable, *, mass_matrix=None, lagrangian=None,
                 forces=None, constraints: Iterable = (), parameters: Mapping | None = None,
                 inputs: Iterable = (), outputs: Mapping | None = None,
                 multipliers: Iterable | None = None, initial_state: Mapping | None = None,
                 time: sp.Symbol | None = None, units: Mapping | None = None):
        if not isinstance(name, str) or not name.strip():
            raise ModelError("model name must be a non-empty string")
        self.name = name
        t = dynamicsymbols._t if time is None else time
        if not isinstance(t, sp.Symbol):
            raise ModelError(f"time must be a SymPy Symbol, got {t!r}")
        self.time = t

        coords = tuple(coordinates)
        if not coords:
            raise ModelError("a model needs at least one coordinate")
        for c in coords:
            if not _is_dynamic(c, t):
                raise ModelError(f"coordinate {c!r} is not a function of time {t} "
                                 "(use sympy.physics.mechanics.dynamicsymbols)")
        if len(set(coords)) != len(coords):
            raise ModelError("coordinates must be distinct")
        self.coordinates = coords
        n = len(coords)
        self.velocities = tuple(c.diff(t) for c in coords)
        self.accelerations = tuple(c.diff(t, 2) for c in coords)

        if (mass_matrix is None) == (lagrangian is None):
            raise ModelError("give exactly one of mass_matrix= and lagrangian=")
        if mass_matrix is not None:
            M = sp.ImmutableMatrix(mass_matrix) if not isinstance(mass_matrix, sp.MatrixBase) \
                else sp.ImmutableMatrix(mass_matrix)
            if M.shape != (n, n):
                raise ModelError(f"mass_matrix has shape {M.shape}, expected ({n}, {n}) for "
                                 f"{n} coordinates")
            self.mass_matrix = M
            self.lagrangian = None
        else:
            self.mass_matrix = None
            self.lagrangian = _as_expr(lagrangian, "lagrangian")

        if forces is None:
            F = sp.ImmutableMatrix.zeros(n, 1)
        else:
            F = sp.ImmutableMatrix(list(forces) if not isinstance(forces, sp.MatrixBase)
                                   else forces)
            if F.shape not in ((n, 1), (1, n)):
                raise ModelError(f"forces has {len(F)} entries, expected {n} (one per coordinate)")
            F = F.reshape(n, 1)
        self.forces = F

        cons = constraints if not isinstance(constraints, sp.MatrixBase) else list(constraints)
        self.constraints = tuple(_as_expr(c, f"constraint {k}") for k, c in enumerate(cons))
        m = len(self.constraints)

        params = dict(parameters or {})
        self.parameters: dict = {}
        for sym, val in params.items():
            if not isinstance(sym, sp.Symbol):
                raise ModelError(f"parameter keys must be SymPy Symbols, got {sym!r}")
            if sym == t:
                raise ModelError(f"parameter {sym} is the time symbol")
            try:
                fval = float(val)
            except (TypeError, ValueError) as exc:
                raise ModelError(f"nominal value of parameter {sym} is not a number: {val!r}") \
                    from exc
            if not math.isfinite(fval):
                raise ModelError(f"nominal value of parameter {sym} is not finite: {val!r}")
            self.parameters[sym] = fval

        ins = tuple(inputs)
        for u in ins:
            if not (isinstance(u, sp.Symbol) or _is_dynamic(u, t)):
                raise ModelError(f"input {u!r} must be a Symbol or a function of time {t}")
        self.inputs = ins

        if multipliers is None:
            mults = tuple(sp.Symbol(f"lambda_{k}") for k in range(m))
        else:
            mults = tuple(multipliers)
            if len(mults) != m:
                raise ModelError(f"{len(mults)} multipliers given for {m} constraints")
            for s in mults:
                if not isinstance(s, sp.Symbol):
                    raise ModelError(f"multiplier {s!r} must be a Symbol")
        self.multipliers = mults

        outs = dict(outputs or {})
        self.outputs: dict = {}
        for key, expr in outs.items():
            if not isinstance(key, str) or not key:
                raise ModelError(f"output names must be non-empty strings, got {key!r}")
            self.outputs[key] = _as_expr(expr, f"output {key!r}")

        init = dict(initial_state or {})
        q0 = [sp.S.Zero] * n
        v0 = [sp.S.Zero] * n
        for key, expr in init.items():
            if key in coords:
                q0[coords.index(key)] = _as_expr(expr, f"initial value of {key}")
            elif key in self.velocities:
                v0[self.velocities.index(key)] = _as_expr(expr, f"initial value of {key}")
            else:
                raise ModelError(f"initial_state key {key!r} is neither a coordinate nor the "
                                 "time derivative of one")
        self.initial_positions = tuple(q0)
        self.initial_velocities = tuple(v0)

        self._check_names()
        self.symbols = KernelSymbols.make(n, m, len(self.parameters), len(self.inputs))
        self._replacements = self._make_replacements()
        self._check_expressions()
        self.units = self._units(units or {})

    # ------------------------------------------------------------------ sizes and names
    @property
    def n(self) -> int:
        """Number of coordinates."""
        return len(self.coordinates)

    @property
    def m(self) -> int:
        """Number of constraints."""
        return len(self.constraints)

    @property
    def coordinate_names(self) -> list[str]:
        """The coordinates' names, in order."""
        return [c.func.__name__ for c in self.coordinates]

    @property
    def multiplier_names(self) -> list[str]:
        """The multipliers' names, in order."""
        # a Symbol's name is its str (a printer call, microseconds), a Dummy's not
        return [str(s) if isinstance(s, sp.Dummy) else s.name for s in self.multipliers]

    @property
    def parameter_names(self) -> list[str]:
        """The parameters' names, in order."""
        return [s.name for s in self.parameters]

    @property
    def input_names(self) -> list[str]:
        """The inputs' names, in order."""
        return [u.name if isinstance(u, sp.Symbol) else u.func.__name__ for u in self.inputs]

    @property
    def output_names(self) -> list[str]:
        """The outputs' names, in order."""
        return list(self.outputs)

    @property
    def nominal_values(self) -> list[float]:
        """The parameters' nominal values, in the order of :attr:`parameter_names`."""
        return list(self.parameters.values())

    def _check_names(self) -> None:
        pn = self.parameter_names
        dup = {x for x in pn if pn.count(x) > 1}
        if dup:
            raise ModelError(f"parameter names must be unique: {sorted(dup)}")
        declared = list(self.parameters) + [u for u in self.inputs if isinstance(u, sp.Symbol)] \
            + list(self.multipliers)
        if len(set(declared)) != len(declared):
            both = [s for s in declared if declared.count(s) > 1]
            raise ModelError(f"symbol(s) {sorted(set(map(str, both)))} declared twice (as "
                             "parameter, input or multiplier); pass multipliers= explicitly if "
                             "a default multiplier name collides")
        in_names = self.input_names
        if len(set(in_names)) != len(in_names):
            raise ModelError(f"input names must be unique: {in_names}")
        cn = self.coordinate_names
        if len(set(cn)) != len(cn):
            raise ModelError(f"coordinate names must be unique: {cn}")
        for s in declared:
            if _RESERVED.match(s.name):
                raise ModelError(f"symbol name {s.name!r} is reserved for kernel arguments")

    def _units(self, units: Mapping) -> dict:
        known = (self.output_names + self.coordinate_names + self.parameter_names
                 + self.input_names)
        out = {}
        for key, unit in dict(units).items():
            name = key if isinstance(key, str) else (
                key.func.__name__ if _is_dynamic(key, self.time) else parameter_name(key))
            if name not in known:
                raise UnknownNameError(f"units: {key!r} is not an output, coordinate, "
                                       f"parameter or input of the model; those are {known}")
            if not isinstance(unit, str):
                raise ModelError(f"units: the unit of {name!r} must be a string, got {unit!r}")
            out[name] = unit
        return out

    def unit(self, name: str) -> str:
        """The declared unit of an output, coordinate, parameter or input ('' if none)."""
        return self.units.get(name, "")

    # ------------------------------------------------------------------ symbol mapping
    def _make_replacements(self) -> dict:
        S = self.symbols
        rep = {}
        for k, c in enumerate(self.coordinates):
            rep[self.accelerations[k]] = S.a[k]
            rep[self.velocities[k]] = S.v[k]
            rep[c] = S.q[k]
        for k, s in enumerate(self.multipliers):
            rep[s] = S.lam[k]
        for k, s in enumerate(self.parameters):
            rep[s] = S.p[k]
        for k, s in enumerate(self.inputs):
            rep[s] = S.u[k]
        rep[self.time] = S.t
        return rep

    def to_kernel(self, expr: sp.Expr, memo: dict | None = None) -> sp.Expr:
        """Rewrite a user expression in the internal kernel symbols (``q[i]``, ``p[k]``, ...);
        ``memo``: a dict shared by calls that rewrite expressions with common parts."""
        return replace_all(sp.sympify(expr), self._replacements, memo)

    def _check_one(self, expr: sp.Expr, where: str, allowed: set) -> None:
        # Inspect the user's expression before substitution: replacing x(t) inside an
        # unsupported derivative such as x''' would silently turn it into 0.
        rep = self._replacements
        expr = sp.sympify(expr)
        nodes = distinct_nodes(expr)
        for d in (x for x in nodes if isinstance(x, sp.Derivative)):
            if d not in rep:
                raise ModelError(f"{where} contains {d}; only first and second time "
                                 "derivatives of coordinates are supported")
        undeclared = [f for f in nodes if isinstance(f, AppliedUndef) and f not in rep]
        undeclared += [s for s in nodes if s.is_Symbol and s != self.time and s not in rep]
        if undeclared:
            raise UndeclaredSymbolError(undeclared, where)
        kernel = self.to_kernel(expr)
        check_compilable(kernel, where)
        free = {s for s in distinct_nodes(kernel) if s.is_Symbol} - {self.symbols.t}
        bad = sorted((s for s in free if s not in allowed), key=str)
        if bad:
            inverse = {v: k for k, v in self._replacements.items()}
            names = ", ".join(str(inverse[s]) for s in bad)
            raise ModelError(f"{where} may not depend on {names}")

    def _check_expressions(self) -> None:
        S = self.symbols
        q, v, a, lam, p, u = (set(x) for x in (S.q, S.v, S.a, S.lam, S.p, S.u))
        if self.mass_matrix is not None:
            for (i, j), e in zip(((i, j) for i in range(self.n) for j in range(self.n)),
                                 self.mass_matrix):
                self._check_one(e, f"mass_matrix[{i}, {j}]", q | p)
        else:
            self._check_one(self.lagrangian, "lagrangian", q | v | p)
        for k, e in enumerate(self.forces):
            self._check_one(e, f"force {k} ({self.coordinate_names[k]})", q | v | p | u)
        for k, e in enumerate(self.constraints):
            self._check_one(e, f"constraint {k}", q | p)
        for name, e in self.outputs.items():
            self._check_one(e, f"output {name!r}", q | v | a | lam | p | u)
        for k, e in enumerate(self.initial_positions + self.initial_velocities):
            which = self.coordinates[k % self.n]
            kind = "position" if k < self.n else "velocity"
            self._check_one(e, f"initial {kind} of {which}", p)

    # ------------------------------------------------------------------ identity and stages
    def definition(self) -> str:
        """A canonical serialisation of everything that shapes the generated code.

        Parameter values are not part of it (they are run-time data); their order and names are.
        """
        parts = (
            self.name, self.time, self.coordinates, self.mass_matrix, self.lagrangian,
            self.forces, self.constraints, tuple(self.parameters), self.inputs, self.multipliers,
            tuple(self.outputs.items()), self.initial_positions, self.initial_velocities,
        )
        text = self.__dict__.get("_definition")
        if text is None:
            text = self.__dict__["_definition"] = serialize(parts)
        return text

    def definition_hash(self) -> str:
        """SHA-256 of the model's definition (part of the compile cache's key)."""
        return hashlib.sha256(self.definition().encode()).hexdigest()

    def __getstate__(self) -> dict:
        # the definition text is remade on demand: a large model's runs to megabytes
        state = dict(self.__dict__)
        state.pop("_definition", None)
        return state

    def __repr__(self) -> str:
        return (f"Model({self.name!r}, n={self.n}, m={self.m}, parameters={len(self.parameters)},"
                f" inputs={len(self.inputs)}, outputs={len(self.outputs)})")
