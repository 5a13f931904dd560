"""Round-off models: how large are the terms whose rounding makes up the error of an expression?

``magnitude(e)`` builds, symbolically, an expression for the size of e's terms: the rounding
error of evaluating e in floating point is about eps times it, however small e itself is (a
constraint x^2 + (y - y0)^2 - L^2 is zero on the solution, its terms are L^2). The Newton
stopping test of the HHT sweep compares each residual row with the rounding of its own terms
(the ``residual_magnitude`` kernel), and the kernel tests use it to bound what finite
differences can resolve.
"""
from __future__ import annotations

import sympy as sp
from sympy.core.function import ArgumentIndexError

from .graph import FreeSymbols

__all__ = ["magnitude"]


def magnitude(e: sp.Expr, sizes: dict | None = None, exact=frozenset(),
              switch: sp.Expr = sp.S.One) -> sp.Expr:
    """An expression for the size of the terms whose rounding makes up the error of ``e``.

    Sums and products of terms: sums and products of their magnitudes; f(x): |f(x)| plus
    |f'(x)| times the magnitude of x (first-order propagation of x's rounding); x^r: |x^r|
    (1 + |r| mag(x) / |x| + |log|x|| mag(r)). A symbol's magnitude is |x|, or ``sizes[x]``
    where given: the size of the terms x itself was computed from (q_{i+1} = q_i + h v_i + ...
    carries the rounding of those terms, not of its value). A subexpression in the ``exact``
    symbols only counts as |e|: its inputs carry no rounding that varies (time, parameters and
    inputs are the same at every Newton iterate), so only its own size enters a sum's
    rounding, not the propagation through it.

    Switches (sign, Heaviside, a Piecewise's conditions): exact away from the switch, but
    undetermined by their jump while the switching argument is within its own rounding of
    zero; the magnitude then gains jump / eps, so a residual row that holds a switch is at
    round-off there (what lets the Newton iteration accept a step that ends on a switch).
    That term is multiplied by ``switch`` (a kernel weight: 1 only while the Newton iteration
    searches a switching point, newton.pxd, so that no other iterate is accepted by it).
    Max and Min round like the larger of their arguments.
    """
    sizes = sizes or {}
    exact = frozenset(exact)
    # once per distinct subexpression: equations formed from mechanics objects share theirs
    # (walk.py), which as trees are visited millions of times
    memo: dict = {}
    free = FreeSymbols()

    def mag(e):
        out = memo.get(e)
        if out is None:
            out = memo[e] = _mag(e)
        return out

    def _mag(e):
        if e.is_Number or isinstance(e, sp.NumberSymbol) or (exact and free(e) <= exact):
            return sp.Abs(e)
        if e.is_Symbol or isinstance(e, sp.Indexed):
            return sizes.get(e, sp.Abs(e))
        if e.is_Add:
            return sp.Add(*[mag(x) for x in e.args])
        if e.is_Mul:
            return sp.Mul(*[mag(x) for x in e.args])
        if e.is_Pow:
            b, x = e.args
            if x.is_Integer and x > 0:
                return mag(b) ** x
            rel = sp.Abs(x) * mag(b) / sp.Abs(b)
            if not x.is_Number:
                rel += sp.Abs(sp.log(sp.Abs(b))) * mag(x)
            return sp.Abs(e) * (1 + rel)
        if isinstance(e, (sp.sign, sp.Heaviside, sp.Piecewise, sp.Max, sp.Min)):
            return _nonsmooth(e, mag, switch)
        if isinstance(e, sp.Function) and e.args:
            return _function(e, mag)
        return sp.Abs(e)

    return mag(sp.sympify(e))


def _function(e, mag):
    terms = [sp.Abs(e)]
    for i, x in enumerate(e.args):
        try:
            d = e.fdiff(i + 1)
        except (ArgumentIndexError, NotImplementedError, TypeError):
            d = sp.Derivative(e, x)
        # not differentiable (sign, floor, ...): count x's rounding once
        terms.append((1 if d.has(sp.Derivative) else sp.Abs(d)) * mag(x))
    return sp.Add(*terms)


_EPS = sp.Float(2.0 ** -52)
_SWITCH_FACTOR = 4      # an argument within this many times its rounding of 0 may switch


def _ambiguous(args, jump, mag, switch):
    """switch * jump / eps where one of ``args`` is within its rounding of zero, else 0."""
    near = sp.Or(*[sp.Abs(x) <= _SWITCH_FACTOR * _EPS * mag(x) for x in args])
    if near == sp.false or switch == 0:
        return sp.S.Zero
    return sp.Piecewise((switch * jump / _EPS, near), (0, True))


def _nonsmooth(e, mag, switch):
    if isinstance(e, (sp.Max, sp.Min)):
        return sp.Max(*[mag(x) for x in e.args])
    if isinstance(e, (sp.sign, sp.Heaviside)):
        return sp.Abs(e) + _ambiguous([e.args[0]], sp.S.One, mag, switch)
    branches = sp.Piecewise(*[(mag(x), c) for x, c in e.args])
    rels = [r.lhs - r.rhs for _, c in e.args
            for r in sp.sympify(c).atoms(sp.core.relational.Relational)]
    return branches + _ambiguous(rels, sp.Add(*[sp.Abs(x) for x, _ in e.args]), mag, switch)
