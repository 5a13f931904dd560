"""A SymPy code printer whose output is C (the kernel functions are C, compiled inside the
generated Cython module's verbatim ``cdef extern from *`` block).

Indexing lives here: every symbol must be in the printer's ``slots`` mapping (``q[2]`` ->
``"q[2]"``, a CSE temporary -> ``"_t7"``); a symbol outside it is an error, so a symbol's name
can never reach the generated source.
"""
from __future__ import annotations

import sympy as sp
from sympy.printing.c import C99CodePrinter
from sympy.printing.precedence import precedence

__all__ = ["CPrinter", "UnprintableError", "c_block", "printable_functions"]


def c_block(c_lines: list, declarations: list) -> list:
    """Lines of a Cython ``cdef extern from *`` block holding C code verbatim and declaring
    the functions the Cython code refers to. Generated kernels are C rather than Cython
    statements: Cython turns each statement into several lines of C with its source quoted,
    which made a large model's module ten times the size of its kernels and half its build
    time."""
    return (["cdef extern from *:", '    """'] + ["    " + ln if ln else "" for ln in c_lines]
            + ['    """'] + ["    " + d for d in declarations])


def printable_functions() -> set:
    """Names of the SymPy functions a kernel can compute (C99's math functions, plus the
    non-smooth ones printed here: sign, Heaviside and Piecewise as ternaries)."""
    return set(CPrinter({}).known_functions) | {"sign", "Heaviside", "Piecewise", "ITE"}


class UnprintableError(ValueError):
    """An expression cannot be turned into kernel code (unknown symbol or function)."""


class CPrinter(C99CodePrinter):
    """Prints SymPy expressions as C expressions over doubles."""

    printmethod = "_symdae_c"

    def __init__(self, slots: dict, settings: dict | None = None):
        super().__init__(settings or {})
        self.slots = dict(slots)

    # -- symbols: the only place where indexing happens
    def _print_Symbol(self, expr):
        try:
            return self.slots[expr]
        except KeyError:
            raise UnprintableError(f"symbol {expr.name!r} has no kernel slot") from None

    _print_Dummy = _print_Symbol

    def _print_Function(self, expr):
        name = type(expr).__name__
        if name in self.known_functions:
            return super()._print_Function(expr)
        raise UnprintableError(f"function {name}() cannot be compiled")

    # -- numbers as literals, so no C macros need importing
    def _print_NumberSymbol(self, expr):
        return self._print(sp.Float(expr.evalf(20), 17))

    _print_Pi = _print_Exp1 = _print_GoldenRatio = _print_EulerGamma = _print_Catalan = \
        _print_NumberSymbol

    def _print_Infinity(self, expr):
        return "INFINITY"

    def _print_NegativeInfinity(self, expr):
        return "(-INFINITY)"

    def _print_NaN(self, expr):
        return "NAN"

    # -- powers: small integer exponents as products (faster and exact), square roots as sqrt.
    # Other roots stay pow(): C's cbrt is the real root, SymPy's x**(1/3) the principal one.
    def _print_Pow(self, expr):
        base, e = expr.base, expr.exp
        b = self.parenthesize(base, precedence(sp.Mul(2, 3, evaluate=False)))
        if e.is_Integer and abs(int(e)) <= 8:
            k = abs(int(e))
            if k == 0:
                return "1.0"
            prod = "*".join([b] * k)
            return f"({prod})" if e > 0 else f"(1.0/({prod}))"
        if e == sp.S.Half:
            return f"sqrt({self._print(base)})"
        if e == -sp.S.Half:
            return f"(1.0/sqrt({self._print(base)}))"
        return f"pow({self._print(base)}, {self._print(e)})"

    # -- conditions as C expressions (ternaries, never statements: every kernel entry is one
    # expression)
    def _print_Piecewise(self, expr):
        pieces = list(expr.args)
        if pieces[-1].cond != sp.true:
            pieces.append(sp.Tuple(sp.nan, sp.true))  # undefined outside the given conditions
        out = self._print(pieces[-1].expr)
        for e, c in reversed(pieces[:-1]):
            out = f"({self._print(c)} ? {self._print(e)} : {out})"
        return out

    def _print_ITE(self, expr):
        c, a, b = expr.args
        return f"({self._print(c)} ? {self._print(a)} : {self._print(b)})"

    def _print_And(self, expr):
        return "(" + " && ".join(self._print(a) for a in expr.args) + ")"

    def _print_Or(self, expr):
        return "(" + " || ".join(self._print(a) for a in expr.args) + ")"

    def _print_Not(self, expr):
        return f"(!{self._print(expr.args[0])})"

    def _print_BooleanTrue(self, expr):
        return "1"

    def _print_BooleanFalse(self, expr):
        return "0"

    def _print_sign(self, expr):
        x = self._print(expr.args[0])
        return f"((double)(({x} > 0) - ({x} < 0)))"

    def _print_Heaviside(self, expr):
        x = self._print(expr.args[0])
        h0 = self._print(expr.args[1]) if len(expr.args) > 1 else "0.5"
        return f"({x} < 0 ? 0.0 : ({x} == 0 ? {h0} : 1.0))"
