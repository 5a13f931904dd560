"""Walking large expressions once per distinct subexpression.

Equations of motion formed from mechanics objects share their subexpressions (a rotation's
entries reappear in every body further down the chain); SymPy's traversals (``atoms``,
``free_symbols``, ``xreplace``) visit a shared subexpression once per occurrence, which for a
20-link chain is millions of visits. These visit it once.
"""
from __future__ import annotations

import sympy as sp

__all__ = ["distinct_nodes", "replace_all"]


def distinct_nodes(expr: sp.Basic) -> list:
    """Every distinct subexpression of ``expr`` (itself included), each once, in no set
    order."""
    seen = {expr}
    stack = [expr]
    while stack:
        e = stack.pop()
        for a in e.args:
            if a not in seen:
                seen.add(a)
                stack.append(a)
    return list(seen)


def replace_all(expr: sp.Basic, rule: dict, memo: dict | None = None) -> sp.Basic:
    """``expr.xreplace(rule)``, each distinct subexpression rebuilt once (``memo``: a dict to
    share between calls with the same rule)."""
    memo = {} if memo is None else memo

    def rep(e):
        out = memo.get(e)
        if out is not None:
            return out
        if e in rule:
            out = rule[e]
        elif not e.args:
            out = e
        else:
            args = [rep(a) for a in e.args]
            out = e if all(a is b for a, b in zip(args, e.args)) else e.func(*args)
        memo[e] = out
        return out

    return rep(expr)
