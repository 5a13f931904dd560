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

__all__ = ["magnitude"]


def magnitude(e: sp.Expr) -> sp.Expr:
    """An expression for the size of the terms whose rounding makes up the error of ``e``.

    Sums and products of terms: sums and products of their magnitudes; f(x): |f(x)| plus
    |f'(x)| times the magnitude of x (first-order propagation of x's rounding); x^r: |x^r|
    (1 + |r| mag(x) / |x| + |log|x|| mag(r)).
    """
    e = sp.sympify(e)
    if e.is_Number or isinstance(e, sp.NumberSymbol):
        return sp.Abs(e)
    if e.is_Symbol or isinstance(e, sp.Indexed):
        return sp.Abs(e)
    if e.is_Add:
        return sp.Add(*[magnitude(x) for x in e.args])
    if e.is_Mul:
        return sp.Mul(*[magnitude(x) for x in e.args])
    if e.is_Pow:
        b, x = e.args
        if x.is_Integer and x > 0:
            return magnitude(b) ** x
        rel = sp.Abs(x) * magnitude(b) / sp.Abs(b)
        if not x.is_Number:
            rel += sp.Abs(sp.log(sp.Abs(b))) * magnitude(x)
        return sp.Abs(e) * (1 + rel)
    if isinstance(e, sp.Function) and e.args:
        terms = [sp.Abs(e)]
        for i, x in enumerate(e.args):
            try:
                d = e.fdiff(i + 1)
            except (ArgumentIndexError, NotImplementedError, TypeError):
                d = sp.Derivative(e, x)
            # not differentiable (sign, floor, ...): count x's rounding once
            terms.append((1 if d.has(sp.Derivative) else sp.Abs(d)) * magnitude(x))
        return sp.Add(*terms)
    return sp.Abs(e)
