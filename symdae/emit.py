"""Emit the Cython source of a model's kernel module from a :class:`DerivedSystem`.

Only makes a string: writing and compiling are in :mod:`symdae.build`. Every kernel has the
signature of ``symdae_kernel`` in ``symdae/core/symdae_kernels.h``; structural zeros are never
written (the core zeroes each output buffer once), common subexpressions are shared within a
chunk and very large kernels are split into chunks so the C compiler stays fast.

Costly subexpressions that depend only on (t, p, u), such as an excitation A sin(w C^t t), are
hoisted out of the kernels into ``time_terms`` (those the forward sweep needs) and
``time_terms_sensitivity`` (those only the derivative kernels need). The core evaluates them
once per time step into ``x.tau``; the Newton iterations of that step then reuse them.
"""
from __future__ import annotations

import json

import sympy as sp

from ._version import ABI_VERSION, GENERATOR_VERSION
from .derivation import KERNEL_NAMES, DerivedSystem, kernel_table
from .printer import LIBC_MATH, CythonPrinter

__all__ = ["emit_cython", "DEFAULT_CHUNK_OPS"]

DEFAULT_CHUNK_OPS = 3000  # operations per chunk function before a kernel is split

_ARRAYS = ("q", "v", "a", "lam", "p", "u")


def _arrays(ds: DerivedSystem, tau: tuple) -> dict:
    """Kernel argument arrays (the fields of symdae_args) -> their symbols, in slot order."""
    S = ds.symbols
    arrays = {arr: tuple(getattr(S, arr)) for arr in _ARRAYS}
    arrays["tau"] = tuple(tau)
    return arrays


def _slots(ds: DerivedSystem, arrays: dict) -> dict:
    slots = {ds.symbols.t: "t"}
    for arr, syms in arrays.items():
        for i, s in enumerate(syms):
            slots[s] = f"{arr}[{i}]"
    for i, s in enumerate(ds.w):
        slots[s] = f"w[{i}]"
    return slots


FORWARD_KERNELS = ("residual", "newton", "outputs")
# kernels the emitter adds on top of derive.KERNEL_NAMES (the hoisted time terms)
INTERNAL_KERNELS = ("time_terms", "time_terms_sensitivity")


def _costly(e: sp.Expr) -> bool:
    """Does evaluating e call a function or a non-integer power?"""
    for node in sp.preorder_traversal(e):
        if isinstance(node, sp.Function):
            return True
        if isinstance(node, sp.Pow) and not node.exp.is_Integer:
            return True
    return False


class _Hoister:
    """Replaces costly subexpressions in (t, p, u) only by symbols ``tau[k]``."""

    def __init__(self, ds: DerivedSystem):
        S = ds.symbols
        self.tpu = frozenset((S.t,) + S.p + S.u)
        self.terms: dict = {}      # expression -> tau symbol, in creation order
        self._memo: dict = {}

    def _slot(self, e):
        if e not in self.terms:
            self.terms[e] = sp.Symbol(f"tau[{len(self.terms)}]", real=True)
        return self.terms[e]

    def __call__(self, e):
        if e.is_Atom:
            return e
        hit = self._memo.get(e)
        if hit is not None:
            return hit
        if e.free_symbols <= self.tpu:
            out = self._slot(e) if _costly(e) else e
        elif isinstance(e, (sp.Add, sp.Mul)):
            fixed = [a for a in e.args if a.free_symbols <= self.tpu]
            rest = [self(a) for a in e.args if not a.free_symbols <= self.tpu]
            part = e.func(*fixed) if fixed else None
            if part is not None and _costly(part):
                out = e.func(self._slot(part), *rest)
            else:
                out = e.func(*([self(a) for a in fixed] + rest))
        else:
            out = e.func(*[self(a) for a in e.args])
        self._memo[e] = out
        return out


def hoist_time_terms(ds: DerivedSystem, table: dict):
    """(table with time terms replaced, tau symbols, forward tau expressions, sensitivity tau
    expressions); tau[k] stands for the k-th expression of forward + sensitivity."""
    hoister = _Hoister(ds)
    out = {}
    order = list(FORWARD_KERNELS) + [k for k in table if k not in FORWARD_KERNELS]
    n_forward = 0
    for name in order:
        exprs, accumulate = table[name]
        out[name] = ([hoister(e) if e != 0 else e for e in exprs], accumulate)
        if name == FORWARD_KERNELS[-1]:
            n_forward = len(hoister.terms)
    terms = list(hoister.terms)
    symbols = tuple(hoister.terms.values())
    return {k: out[k] for k in table}, symbols, terms[:n_forward], terms[n_forward:]


def _chunks(entries: list, chunk_ops: int) -> list:
    """Split (index, expr) entries into groups of at most about chunk_ops operations."""
    groups, cur, ops = [], [], 0
    for idx, e in entries:
        k = sp.count_ops(e)
        if cur and ops + k > chunk_ops:
            groups.append(cur)
            cur, ops = [], 0
        cur.append((idx, e))
        ops += k
    if cur:
        groups.append(cur)
    return groups


def _function(fname: str, entries: list, accumulate: bool, printer: CythonPrinter,
              ds: DerivedSystem, arrays: dict) -> list:
    """Lines of one cdef function writing the given entries of ``out``."""
    lines = [f"cdef void {fname}(const symdae_args* x, const double* w, double* out) "
             "noexcept nogil:"]
    exprs = [e for _, e in entries]
    temps = sp.numbered_symbols("_t")
    repl, reduced = sp.cse(exprs, symbols=temps, order="canonical")
    used = set()
    for e in [r for _, r in repl] + reduced:
        used |= e.free_symbols
    S = ds.symbols
    if S.t in used:
        lines.append("    cdef double t = x.t")
    for arr, syms in arrays.items():
        if used & set(syms):
            lines.append(f"    cdef const double* {arr} = x.{arr}")
    tmp_slots = {}
    for k, (sym, _) in enumerate(repl):
        tmp_slots[sym] = f"_t{k}"
    if repl:
        printer.slots.update(tmp_slots)
        names = [f"_t{k}" for k in range(len(repl))]
        for i in range(0, len(names), 16):
            lines.append("    cdef double " + ", ".join(names[i:i + 16]))
    op = "+=" if accumulate else "="
    for sym, e in repl:
        lines.append(f"    {tmp_slots[sym]} = {printer.doprint(e)}")
    for (idx, _), e in zip(entries, reduced):
        lines.append(f"    out[{idx}] {op} {printer.doprint(e)}")
    for sym in tmp_slots:
        del printer.slots[sym]
    if len(lines) == 1:
        lines.append("    pass")
    return lines


def emit_cython(ds: DerivedSystem, *, definition_hash: str = "",
                chunk_ops: int = DEFAULT_CHUNK_OPS) -> str:
    """Return the Cython source of the kernel module for ``ds`` (deterministic)."""
    table, tau, tau_fwd, tau_sens = hoist_time_terms(ds, kernel_table(ds))
    n_tau = len(tau)
    table["time_terms"] = (tau_fwd, False)
    table["time_terms_sensitivity"] = ([sp.S.Zero] * len(tau_fwd) + tau_sens, False)
    arrays = _arrays(ds, tau)
    printer = CythonPrinter(_slots(ds, arrays))
    sz = ds.sizes
    out = [
        "# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True",
        "# cython: initializedcheck=False, nonecheck=False, infer_types=False",
        f"# Kernels generated by symdae {GENERATOR_VERSION} (ABI {ABI_VERSION}). Do not edit:",
        "# regenerate from the model instead. Layouts: symdae/core/symdae_kernels.h.",
        "from libc.math cimport " + ", ".join(LIBC_MATH),
        "from cpython.pycapsule cimport PyCapsule_New",
        "from symdae.core.kernel_api cimport symdae_args, symdae_model, SYMDAE_ABI_VERSION",
        "",
        f"ABI_VERSION = {ABI_VERSION}",
        f"GENERATOR_VERSION = {json.dumps(GENERATOR_VERSION)}",
        f"DEFINITION_HASH = {json.dumps(definition_hash)}",
        f"SIZES = {json.dumps(sz, sort_keys=True)}",
        f"N_TIME_TERMS = {n_tau}",
        "",
    ]
    for name in KERNEL_NAMES + INTERNAL_KERNELS:
        exprs, accumulate = table[name]
        entries = [(i, e) for i, e in enumerate(exprs) if e != 0]
        groups = _chunks(entries, chunk_ops) if entries else []
        out.append(f"# kernel {name}: {len(exprs)} entries, {len(entries)} structurally nonzero,"
                   f" {len(groups)} chunk(s)")
        if len(groups) <= 1:
            out += _function(f"_k_{name}", groups[0] if groups else [], accumulate, printer, ds,
                             arrays)
        else:
            for c, grp in enumerate(groups):
                out += _function(f"_k_{name}_{c}", grp, accumulate, printer, ds, arrays)
                out.append("")
            out.append(f"cdef void _k_{name}(const symdae_args* x, const double* w, "
                       "double* out) noexcept nogil:")
            out += [f"    _k_{name}_{c}(x, w, out)" for c in range(len(groups))]
        out.append("")
    out += [
        "cdef symdae_model _model",
        "_model.abi_version = SYMDAE_ABI_VERSION",
    ]
    for key in ("n", "m", "n_p", "n_u", "n_s"):
        out.append(f"_model.{key} = {sz[key]}")
    out.append(f"_model.n_tau = {n_tau}")
    for name in KERNEL_NAMES + INTERNAL_KERNELS:
        out.append(f"_model.{name} = _k_{name}")
    out += [
        'kernels = PyCapsule_New(<void*>&_model, b"symdae.model", NULL)',
        "",
    ]
    return "\n".join(out)
