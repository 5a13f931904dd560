"""Derivatives on the common-subexpression graph: straight-line programs and their tangents
and adjoints.

A large model's residual differentiated as expanded trees grows without bound (every
derivative copies the tree it differentiates; the Hessian-vector product copies the copies).
Here the expressions are first split once into a straight-line program

    z_1 = f_1(inputs),  z_2 = f_2(inputs, z_1),  ...,  outputs = r(inputs, z)

(SymPy's cse), and derivatives are formed by the chain rule along it: a tangent (forward
mode) along one direction adds one assignment per z that depends on the direction, an
adjoint (reverse mode) one per z that the weighted outputs depend on. Every new assignment
refers to the shared z, so the programs grow linearly with the graph. Partial derivatives of
each f_k are SymPy derivatives of that small expression, almost everywhere (nonsmooth.py).

A program is a list of assignments ``(symbol, expression)`` in evaluation order; the symbols
are Dummies, named after the program's role (printing gives them their kernel slots).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp
from sympy.core.relational import Relational
from sympy.logic.boolalg import Boolean

from .nonsmooth import almost_everywhere

__all__ = ["FreeSymbols", "Program", "straight_line", "tangent", "linearize", "adjoint",
           "needed_assignments", "split_wide", "dependence"]


class FreeSymbols:
    """Memoized free symbols of expressions (SymPy recomputes them on every call, which
    dominates walking a large graph): ``e.free_symbols``, in time linear in the distinct
    subexpressions."""

    def __init__(self):
        self._memo: dict = {}

    def __call__(self, e: sp.Basic) -> frozenset:
        out = self._memo.get(e)
        if out is None:
            if e.is_Symbol:
                out = frozenset((e,))
            elif not e.args:
                out = frozenset()
            elif getattr(e, "bound_symbols", None):   # an integral, a Lambda: SymPy's rule
                out = frozenset(e.free_symbols)
            else:
                out = frozenset().union(*[self(a) for a in e.args])
            self._memo[e] = out
        return out


# elementary functions of one argument, differentiated by their own fdiff
_SMOOTH = (sp.sin, sp.cos, sp.tan, sp.exp, sp.log, sp.sinh, sp.cosh, sp.tanh, sp.asin,
           sp.acos, sp.atan, sp.asinh, sp.acosh, sp.atanh)


@dataclass
class Program:
    """Assignments in evaluation order and caches of their free symbols and local partial
    derivatives."""

    assignments: list = field(default_factory=list)
    free: FreeSymbols = field(default_factory=FreeSymbols)
    _partials: dict = field(default_factory=dict)

    def extend(self, assignments) -> Program:
        """A program with ``assignments`` appended (the caches are shared)."""
        return Program(self.assignments + list(assignments), self.free, self._partials)

    def partial(self, e: sp.Expr, s: sp.Symbol) -> sp.Expr:
        """d e / d s almost everywhere, e one assignment's right-hand side (or an output)."""
        key = (e, s)
        d = self._partials.get(key)
        if d is None:
            d = self._partials[key] = self._diff(e, s, {})
        return d

    def _diff(self, e, s, memo):
        """The chain rule through sums, products, powers and the elementary functions
        directly (SymPy's diff builds and checks a Derivative at every node); anything else
        by SymPy, almost everywhere."""
        if e == s:
            return sp.S.One
        if s not in self.free(e) or isinstance(e, (Boolean, Relational)):
            # a condition (cse may share one) is piecewise constant: derivative 0 a.e.
            return sp.S.Zero
        out = memo.get(e)
        if out is not None:
            return out
        args = e.args
        if e.is_Add:
            out = sp.Add(*[self._diff(a, s, memo) for a in args])
        elif e.is_Mul:
            out = sp.Add(*[sp.Mul(*args[:i], self._diff(a, s, memo), *args[i + 1:])
                           for i, a in enumerate(args) if s in self.free(a)])
        elif e.is_Pow:
            b, x = args
            if s not in self.free(x):
                out = x * b ** (x - 1) * self._diff(b, s, memo)
            else:
                out = e * (self._diff(x, s, memo) * sp.log(b)
                           + x * self._diff(b, s, memo) / b)
        elif isinstance(e, _SMOOTH):
            out = e.fdiff(1) * self._diff(args[0], s, memo)
        else:
            out = almost_everywhere(e.diff(s))
        memo[e] = out
        return out


def _symbols(prefix: str):
    return sp.numbered_symbols(prefix, cls=sp.Dummy, real=True)


def straight_line(exprs: list, prefix: str = "z") -> tuple:
    """(Program, reduced expressions): ``exprs`` as assignments of their common
    subexpressions followed by the expressions in those."""
    repl, reduced = sp.cse([sp.sympify(e) for e in exprs], symbols=_symbols(prefix),
                           order="none")
    return Program(list(repl)), list(reduced)


def _forward(prog: Program, exprs: list, seed: dict, coef, prefix: str) -> tuple:
    """Forward mode along ``seed``: (new assignments, tangents of ``exprs``), the term of
    input s in assignment f being ``coef(f, s) * dot[s]``; assignments are made only for the
    z that depend on a seeded input. Inputs are taken in SymPy's sort order (not a set's
    hash order), so that what coef numbers is numbered the same in every process."""
    names = _symbols(prefix)
    dot = dict(seed)

    def terms(f):
        return sp.Add(*[coef(f, s) * dot[s] for s in sorted(
            (s for s in prog.free(f) if s in dot), key=sp.default_sort_key)])

    new = []
    for z, f in prog.assignments:
        t = terms(f)
        if t == 0:
            continue
        if t.is_Atom:
            dot[z] = t
        else:
            sym = next(names)
            new.append((sym, t))
            dot[z] = sym
    return new, [terms(e) for e in exprs]


def tangent(prog: Program, exprs: list, seed: dict, prefix: str = "d") -> tuple:
    """(new assignments, tangents of ``exprs``) along ``seed``: {input symbol: its tangent
    expression}. Assignments are made only for the z that depend on a seeded input."""
    return _forward(prog, exprs, seed, prog.partial, prefix)


def linearize(prog: Program, exprs: list, seed: dict, slot, prefix: str = "d") -> tuple:
    """The tangent of ``exprs`` along ``seed`` (as :func:`tangent`) split in two:
    (partials, new assignments, tangents). ``partials``: the local partial derivatives that
    are not numbers, each distinct one once, in the order ``slot(k)`` (a symbol) names them;
    the assignments and tangents combine them linearly with the seed, reading partial k as
    ``slot(k)``. Evaluating the partials once (they need the residual and its functions'
    derivatives) and the linear part once per direction is the vector mode of a Jacobian's
    columns: the columns share everything but the multiply-adds."""
    partials: list = []
    index: dict = {}

    def coef(f, s):
        d = prog.partial(f, s)
        if d.is_Number:
            return d
        sym = index.get(d)
        if sym is None:
            sym = index[d] = slot(len(partials))
            partials.append(d)
        return sym

    new, out = _forward(prog, exprs, seed, coef, prefix)
    return partials, new, out


def adjoint(prog: Program, exprs: list, weights: list, wrt: list, prefix: str = "b") -> tuple:
    """(new assignments, gradient of sum_i weights_i exprs_i with respect to each of ``wrt``)
    by reverse mode along the program."""
    names = _symbols(prefix)
    bar: dict = {}
    for e, w in zip(exprs, weights):
        if w == 0 or e == 0:
            continue
        for s in prog.free(e):
            d = prog.partial(e, s)
            if d != 0:
                bar.setdefault(s, []).append(w * d)
    new = []
    for z, f in reversed(prog.assignments):
        terms = bar.pop(z, None)
        if not terms:
            continue
        b = sp.Add(*terms)
        if b == 0:
            continue
        if not b.is_Atom:
            sym = next(names)
            new.append((sym, b))
            b = sym
        for s in prog.free(f):
            d = prog.partial(f, s)
            if d != 0:
                bar.setdefault(s, []).append(b * d)
    return new, [sp.Add(*bar.get(y, [])) for y in wrt]


def needed_assignments(assignments: list, exprs: list, free=None) -> list:
    """The assignments the expressions need (directly or through other assignments), in
    order; ``free``: a FreeSymbols to share."""
    free = free or FreeSymbols()
    need = set()
    for e in exprs:
        need |= free(e)
    out = []
    for z, f in reversed(assignments):
        if z in need:
            out.append((z, f))
            need |= free(f)
    out.reverse()
    return out


def dependence(assignments: list, exprs: list, inputs: list, free=None) -> list:
    """For each of ``exprs``: the set of positions in ``inputs`` (symbols) it depends on,
    directly or through the assignments, as a bit mask (bit k: ``inputs[k]``). A tangent
    program's outputs are linear in its direction, so on them this is the structure of the
    Jacobian the direction selects columns of."""
    free = free or FreeSymbols()
    mask = {x: 1 << k for k, x in enumerate(inputs)}

    def of(e) -> int:
        bits = 0
        for x in free(e):
            bits |= mask.get(x, 0)
        return bits

    for z, f in assignments:
        bits = of(f)
        if bits:
            mask[z] = bits
    return [of(e) for e in exprs]


def split_wide(assignments: list, exprs: list, limit: int = 64, prefix: str = "s") -> tuple:
    """(assignments, expressions) with every sum or product of more than ``limit`` terms
    computed in parts of at most ``limit`` by new assignments placed before their first use:
    Cython parses a sum as nested binary operations and overflows its recursion limit on a
    few hundred terms."""
    names = _symbols(prefix)
    memo: dict = {}
    pending: list = []

    def rebuild(e):
        if not e.args:
            return e
        out = memo.get(e)
        if out is not None:
            return out
        args = [rebuild(a) for a in e.args]
        while (e.is_Add or e.is_Mul) and len(args) > limit:
            parts = []
            for i in range(0, len(args), limit):
                sym = next(names)
                pending.append((sym, e.func(*args[i:i + limit])))
                parts.append(sym)
            args = parts
        out = e if all(a is b for a, b in zip(args, e.args)) and len(args) == len(e.args) \
            else e.func(*args)
        memo[e] = out
        return out

    out_assigns = []
    for z, f in assignments:
        f = rebuild(f)
        out_assigns += pending + [(z, f)]
        pending.clear()
    out_exprs = [rebuild(e) for e in exprs]
    return out_assigns + pending, out_exprs
