"""Walking large expressions once per distinct subexpression.

Equations of motion formed from mechanics objects share their subexpressions (a rotation's
entries reappear in every body further down the chain); SymPy's traversals (``atoms``,
``free_symbols``, ``xreplace``) visit a shared subexpression once per occurrence, which for a
20-link chain is millions of visits. These visit it once.
"""
from __future__ import annotations

import sympy as sp

__all__ = ["distinct_nodes", "replace_all", "serialize"]


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


def serialize(obj) -> str:
    """A canonical text of ``obj`` (SymPy expressions and matrices in tuples, lists and
    strings) that writes each distinct subexpression once: one line per node, ``#k = head(ids)``
    with the ids of its arguments' lines, atoms as ``srepr``. Equal objects give equal text
    and the text determines the object (as ``srepr`` does), but its length grows with the
    distinct subexpressions, not with the expanded trees (``srepr`` of a 20-link chain's
    equations runs to hundreds of megabytes)."""
    from sympy.core.function import AppliedUndef
    from sympy.matrices import MatrixBase

    ids: dict = {}       # (type, node) -> its line: equal values of two types (1 and 1.0 in
    lines: list = []     # older SymPy) stay two nodes

    def head(e) -> str:
        # an undefined function's class carries its name (and assumptions): srepr names it
        return sp.srepr(e.func) if isinstance(e, AppliedUndef) else e.func.__name__

    def node(root) -> str:
        """The id of a SymPy object, its subexpressions numbered first (iteratively: the
        trees are deep)."""
        stack = [(root, False)]
        while stack:
            e, expanded = stack.pop()
            key = (type(e), e)
            if key in ids:
                continue
            if not e.args:
                ids[key] = len(lines)
                lines.append(sp.srepr(e))
            elif expanded:
                ids[key] = len(lines)
                lines.append(f"{head(e)}({','.join(str(ids[type(a), a]) for a in e.args)})")
            else:
                stack.append((e, True))
                stack.extend((a, False) for a in reversed(e.args) if (type(a), a) not in ids)
        return f"#{ids[type(root), root]}"

    def value(x) -> str:
        if isinstance(x, MatrixBase):
            return f"Matrix({x.rows},{x.cols},[{','.join(node(sp.sympify(v)) for v in x)}])"
        if isinstance(x, sp.Basic):
            return node(x)
        if isinstance(x, (tuple, list)):
            return f"{type(x).__name__}({','.join(value(v) for v in x)})"
        if isinstance(x, str) or x is None:
            return repr(x)
        return node(sp.sympify(x))

    top = value(obj)
    return "\n".join(f"#{k} = {line}" for k, line in enumerate(lines)) + "\n" + top
