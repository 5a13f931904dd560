"""Non-smooth functions in models: derivatives almost everywhere, compilability checks and the
switching functions of a model.

sign, Abs, Max, Min, Heaviside and Piecewise make a model piecewise smooth. symdae
differentiates them almost everywhere: DiracDelta (the derivative of a jump) is 0, |x|' is
sign(x), Max' the derivative of the active argument (SymPy writes it with Heaviside, which is
1/2 at a tie: the mean of the one-sided derivatives), a Piecewise branch by branch. The
matrices are then exact on each smooth piece, which is what the discrete adjoint needs as long
as no switch falls exactly on a grid point (README, "Non-smooth forces").
"""
from __future__ import annotations

from collections.abc import Iterable

import sympy as sp
from sympy.core.function import AppliedUndef, ArgumentIndexError

from ..errors import ModelError
from .printer import printable_functions
from .walk import distinct_nodes

__all__ = ["almost_everywhere", "check_compilable", "switching_functions", "has_jumps",
           "NONSMOOTH"]

# the non-smooth functions a model may use (besides floor and ceiling, whose derivative is 0)
NONSMOOTH = (sp.sign, sp.Abs, sp.Max, sp.Min, sp.Heaviside, sp.Piecewise)

_ADVICE = ("use the elementary functions of C's math library (sin, exp, log, sqrt, atan, "
           "tanh, ...) or the non-smooth ones sign, Abs, Max, Min, Heaviside and Piecewise "
           "(with a default (value, True) branch); an impulse (DiracDelta) is no force: model "
           "an impact as a stiff contact such as k*Max(0, penetration)")
_ZERO_DERIVATIVE = (sp.floor, sp.ceiling, sp.sign, sp.Heaviside)


def almost_everywhere(e: sp.Expr) -> sp.Expr:
    """``e`` with every DiracDelta (and unevaluated derivative of a step function) replaced
    by 0: the derivative almost everywhere of a piecewise smooth expression."""
    if not e.has(sp.DiracDelta, sp.Derivative):
        return e
    e = e.replace(lambda x: isinstance(x, sp.DiracDelta), lambda x: sp.S.Zero)
    return e.replace(lambda x: isinstance(x, sp.Derivative)
                     and isinstance(x.expr, _ZERO_DERIVATIVE), lambda x: sp.S.Zero)


def _unprintable(e, allowed: set) -> sp.Expr | None:
    """The first derivative or function of ``e`` (an expression, or a list of its distinct
    subexpressions) that cannot be printed."""
    for f in (e if isinstance(e, list) else sp.preorder_traversal(e)):
        if isinstance(f, sp.Derivative):
            return f
        if isinstance(f, sp.Function) and not isinstance(f, AppliedUndef) \
                and type(f).__name__ not in allowed:
            return f
    return None


def check_compilable(expr: sp.Expr, where: str) -> None:
    """ModelError naming ``where``, the expression and what to use instead if ``expr`` holds a
    function that cannot be compiled or differentiated (almost everywhere), or a Piecewise
    without a default branch (the kernels would have no value outside its conditions)."""
    nodes = distinct_nodes(sp.sympify(expr))
    for pw in (x for x in nodes if isinstance(x, sp.Piecewise)):
        if pw.args[-1].cond != sp.true:
            raise ModelError(f"{where}: {pw} has no default branch: end the Piecewise with "
                             "(value, True) so that it has a value for every state")
    allowed = printable_functions()
    bad = _unprintable(nodes, allowed)
    if bad is not None:
        raise ModelError(f"{where}: {bad} cannot be compiled; {_ADVICE}")
    for f in (x for x in nodes if isinstance(x, sp.Function)):
        if isinstance(f, (AppliedUndef, sp.Piecewise) + _ZERO_DERIVATIVE):
            continue
        for i in (i for i, x in enumerate(f.args) if x.free_symbols):
            try:
                d = almost_everywhere(f.fdiff(i + 1))
            except (ArgumentIndexError, NotImplementedError, TypeError):
                d = None
            bad = d if d is None else _unprintable(d, allowed)
            if d is None or bad is not None:
                raise ModelError(f"{where}: {f} can be compiled but its derivative "
                                 f"{'' if d is None else f'({bad}) '}cannot, and every "
                                 f"gradient needs it; {_ADVICE}")


_JUMPS = (sp.sign, sp.Heaviside, sp.floor, sp.ceiling)


def _continuous(pw: sp.Piecewise) -> bool:
    """Is a Piecewise continuous where each condition's single relation holds with equality
    (consecutive branches equal there)? False when that cannot be shown."""
    for (e1, c1), (e2, _) in zip(pw.args, pw.args[1:]):
        rels = sp.sympify(c1).atoms(sp.core.relational.Relational)
        if len(rels) != 1:
            return False
        (r,) = rels
        d = r.lhs - r.rhs
        for s in sorted(d.free_symbols, key=str):
            try:
                roots = sp.solve(d, s)
            except (NotImplementedError, ValueError):
                continue
            if roots and all(sp.simplify((e1 - e2).subs(s, x)) == 0 for x in roots):
                break
        else:
            return False
    return True


def has_jumps(exprs: Iterable[sp.Expr]) -> bool:
    """Do the expressions hold a term that may jump (sign, Heaviside, floor, ceiling, a
    Piecewise not shown continuous)? Only then may a step have no root on either branch of a
    switch, and the Newton iteration search for the switching point (newton.pxd,
    switch_search); Abs, Max, Min and a ramp Piecewise((0, x < 0), (x**2, True)) are
    continuous."""
    # one walk over the distinct subexpressions of all rows (has() and atoms() walk each row
    # as a tree: seconds on a large model's rows, which share most of their subtrees)
    nodes = distinct_nodes(sp.Tuple(*map(sp.sympify, exprs)))
    return any(isinstance(e, _JUMPS) for e in nodes) or not all(
        _continuous(pw) for pw in nodes if isinstance(pw, sp.Piecewise))


def switching_functions(exprs: Iterable[sp.Expr]) -> list[sp.Expr]:
    """The functions whose sign change is a switch of a non-smooth term: the arguments of sign,
    Abs and Heaviside, the differences of Max's and Min's arguments, lhs - rhs of the
    conditions of a Piecewise. Deterministic order, no duplicates (up to sign)."""
    found: list[sp.Expr] = []
    for e in exprs:
        for f in sp.preorder_traversal(sp.sympify(e)):
            if isinstance(f, (sp.sign, sp.Abs, sp.Heaviside)):
                found.append(f.args[0])
            elif isinstance(f, (sp.Max, sp.Min)):
                args = list(sp.ordered(f.args))
                found += [a - b for a, b in zip(args, args[1:])]
            elif isinstance(f, sp.Piecewise):
                for c in f.args:
                    found += [r.lhs - r.rhs for r in
                              sp.sympify(c.cond).atoms(sp.core.relational.Relational)]
    out: list[sp.Expr] = []
    for s in found:
        if s.free_symbols and s not in out and -s not in out:
            out.append(s)
    return out
