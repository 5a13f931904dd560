"""Emit the Cython source of a model's kernel module from a :class:`DerivedSystem`.

Only makes a string: writing and compiling are in :mod:`symdae.compilation`. The kernel
functions are C (printer.CPrinter), held verbatim in the module's ``cdef extern from *`` block;
the Cython part only fills the kernel table with them. The kernels, their weights and output
blocks come from the kernel spec (:mod:`symdae.model.kernels`); every kernel has the signature
of ``symdae_kernel`` in ``symdae/simulation/core/symdae_kernels.h``. Structural zeros are never
written (the core zeroes each output buffer once), common subexpressions are shared within a
chunk, and very large kernels are split into chunks so the C compiler stays fast. Each output
block is introduced by a comment naming it (spec names only, never a user's symbol).

Costly subexpressions that depend only on (t, p, u), such as an excitation A sin(w C^t t) (a
function call other than |x| and sign, or a non-integer power: _costly), are hoisted out of
the kernels into ``time_terms`` (those the forward kernels need) and
``time_terms_sensitivity`` (all of them: those only the derivative kernels need as well). The
core evaluates them once per time step into ``x.tau``; the Newton iterations of that step then
reuse them. Both kernels print from one common-subexpression pass over all the terms
(_time_terms_lines): a derivative term shares the excitation's sin and C^t with the forward
ones, so a sweep that needs both calls only the second, and the forward terms it writes are
those of ``time_terms`` bit for bit.

Likewise the costly functions of (t, q, v) that the residual evaluates (sin and cos of joint
angles, exp, sqrt, ...: _transcendental) are its state terms (hoist_state_terms): the kernel
``state_terms`` computes them, and the kernels evaluated at a state (STATE_TERM_READERS) read
them from ``x.st`` instead of evaluating them again. A sweep computes them once per state: the
forward sweep at each Newton iterate, for the residual there and, at the iterate it accepts,
the round-off level, the outputs and the next step's Newton matrix; the tangent and adjoint
sweeps once per stored state, for the matrix and the derivative kernels there. Each kernel
that reads them is printed as a body that reads ``st`` and a wrapper that, when the caller
passes none (``x.st`` NULL), computes them first (_state_term_wrapper), so its output is the
same either way, bit for bit. A graph module has none (its kernels share the residual's
program instead).

A model whose residual is large (more than GRAPH_MIN_NODES tree nodes, in rows of more than
GRAPH_MIN_ROW_NODES on average: use_graph) gets graph kernels
(graph_kernels.py): each is a straight-line program of shared assignments followed by its
output entries, printed as is (the assignments already share what CSE would find) and split
into chunk functions; an assignment read by a later chunk lives in the kernel's scratch
array ``z``, the others in local variables. The directional helper of the Newton matrix and
the Jacobians, dir_residual, is printed in vector mode (_lane_program_lines): one call
computes the tangents along ``lane_count`` directions, so a dense Newton matrix takes one call;
each statement runs over the lanes where it can be nonzero (lane_ranges).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp
from sympy.functions.elementary.hyperbolic import (
    HyperbolicFunction,
    InverseHyperbolicFunction,
)
from sympy.functions.elementary.trigonometric import (
    InverseTrigonometricFunction,
    TrigonometricFunction,
)

from ..errors import InputError
from .derivation import DerivedSystem
from .graph import FreeSymbols, dependence, needed_assignments, split_wide
from .graph_kernels import COLUMN_KERNELS, HELPERS, graph_kernel_table, helper_sizes
from .kernels import (
    ABI_VERSION,
    KERNELS,
    Sizes,
    kernel_expressions,
    layout,
    weight_size,
)
from .lu_plan import (
    MAX_UPDATES,
    lu_lines,
    plan_lu,
    solve_block_lines,
    split_factor_lines,
)
from .nonsmooth import has_jumps
from .printer import CPrinter, c_block
from .tangent_products import TANGENT_ND, tangent_lines

__all__ = ["emit_cython", "DEFAULT_CHUNK_OPS", "MAX_LANES", "lane_count", "GRAPH_MIN_NODES",
           "GRAPH_MIN_ROW_NODES", "hoist_time_terms",
           "column_helpers", "column_passes", "color_columns", "ColumnPass", "tau_reads",
           "tree_size", "use_graph", "REFRESH_HORIZON", "REFRESH_HORIZON_GRAPH",
           "LANE_KERNELS", "lane_batches", "seeded_lanes", "lane_ranges", "LaneStatement",
           "VECTOR_WIDTH", "hoist_state_terms", "STATE_TERM_READERS", "newton_structure",
           "noise_coupling", "compiled_steps_lines", "time_term_reads", "STEP_INLINE_KERNELS",
           "STEP_INLINE_NODES", "fixed_entries"]

DEFAULT_CHUNK_OPS = 3000  # operations per chunk function before a kernel is split
# residual + outputs larger than this (tree nodes, repetitions counted), in rows larger than
# GRAPH_MIN_ROW_NODES on average, get graph kernels (use_graph)
GRAPH_MIN_NODES = 5000
GRAPH_MIN_ROW_NODES = 100
WIDE_TERMS = 64          # a graph module's sums and products are computed in parts of this many
_STACK_DOUBLES = 4096     # a graph kernel's scratch array larger than this goes on the heap
MAX_LANES = 32            # directions one vector call of dir_residual computes at most
# doubles per vector instruction of the vector dir_residual, by the instruction set it is
# compiled for: "base" is the compiler's default for the platform (SSE2 on x86-64); "avx2"
# compiles its functions for AVX2 (four doubles), without FMA, so that every lane rounds as
# in the base code
VECTOR_WIDTH = {"base": 2, "avx2": 4}
_VECTOR_ATTRIBUTE = {"base": "", "avx2": '__attribute__((target("avx2"))) '}
# Newton's refresh horizon (newton.pxd: refresh K when more than this many further iterations
# are predicted). A tree module's K is one kernel of about a residual's cost, so a refresh is
# cheap and an early one saves iterations; a graph module forms K by a vector pass over the
# whole residual program, several residuals' worth, so it refreshes later. Each value is where
# the time per step of its kind of module is least (docs/guide/models.rst: the 20-link chain).
REFRESH_HORIZON = 3
REFRESH_HORIZON_GRAPH = 8

# the kernels the compiled adjoint step calls (compiled_steps.h), inlined into it where they
# are at most STEP_INLINE_NODES tree nodes (SYMDAE_STEP_INLINE in symdae_kernels.h; each call
# site gets a copy, state_vjp two): about the size of the step's own code around a call, where
# the call itself is a large part of the kernel's time. Larger kernels, and the kernels of the
# forward and tangent sweeps, stay calls: inlined, they made the sweeps no faster, some slower
# (docs/benchmarks.rst: the adjoint step's small kernels inlined)
STEP_INLINE_KERNELS = ("state_vjp", "param_vjp", "output_vjp")
STEP_INLINE_NODES = 100
_ARRAYS = ("q", "v", "a", "lam", "p", "u")
# every kernel function's C signature (symdae_kernel in symdae_kernels.h)
_SIGNATURE = "void {name}(const symdae_args* x, const double* w, double* out)"
_KERNEL_HEAD = "static " + _SIGNATURE + " {{"


def _out_size(name: str, sizes: Sizes) -> int:
    """Entries of kernel ``name``'s output (its spec's blocks)."""
    return sum(b.size(sizes) for s in KERNELS if s.name == name for b in s.blocks)


def _heap_lines(array: str, doubles: int, n_out: int) -> list:
    """C lines allocating a kernel's scratch ``array`` of ``doubles`` on the heap (too large
    for a thread's stack); a failed allocation leaves NaN in the kernel's ``n_out`` outputs,
    which the callers report as a non-finite kernel value. The kernel frees it on return."""
    return [f"    double* {array} = (double*)malloc({max(doubles, 1)} * sizeof(double));",
            "    int i;",
            f"    if ({array} == NULL) {{",
            f"        for (i = 0; i < {n_out}; i++) out[i] = NAN;",
            "        return;",
            "    }"]


def _arrays(ds: DerivedSystem, tau: tuple, st: tuple = ()) -> dict:
    """Kernel argument arrays (the fields of symdae_args) -> their symbols, in slot order."""
    S = ds.symbols
    arrays = {arr: tuple(getattr(S, arr)) for arr in _ARRAYS}
    arrays["tau"] = tuple(tau)
    arrays["st"] = tuple(st)
    return arrays


def _slots(ds: DerivedSystem, arrays: dict, n_w: int) -> dict:
    slots = {ds.symbols.t: "t"}
    for arr, syms in arrays.items():
        for i, s in enumerate(syms):
            slots[s] = f"{arr}[{i}]"
    for i in range(n_w):
        slots[sp.Symbol(f"w[{i}]", real=True)] = f"w[{i}]"
    return slots


# functions that print as one or two instructions (fabs, a ternary): hoisting one into the time
# terms costs the step a store and every reader a load, and a sweep that keeps the time
# terms a double per step, to save nothing
_CHEAP_FUNCTIONS = (sp.Abs, sp.sign)


def _costly(e: sp.Expr) -> bool:
    """Does evaluating e call a function (other than |x| and sign) or a non-integer power?"""
    for node in sp.preorder_traversal(e):
        if isinstance(node, sp.Function) and not isinstance(node, _CHEAP_FUNCTIONS):
            return True
        if isinstance(node, sp.Pow) and not node.exp.is_Integer:
            return True
    return False


def _rebuilt(e: sp.Basic, args: list) -> sp.Basic:
    """e with new arguments (e itself when none changed: rebuilding a large sum costs)."""
    return e if all(a is b for a, b in zip(args, e.args)) else e.func(*args)


class _Hoister:
    """Replaces costly subexpressions in (t, p, u) only by symbols ``tau[k]``."""

    def __init__(self, ds: DerivedSystem, free: FreeSymbols):
        S = ds.symbols
        self.free = free
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
        if self.free(e) <= self.tpu:
            out = self._slot(e) if _costly(e) else e
        elif isinstance(e, (sp.Add, sp.Mul)):
            fixed = [a for a in e.args if self.free(a) <= self.tpu]
            rest = [self(a) for a in e.args if not self.free(a) <= self.tpu]
            part = e.func(*fixed) if fixed else None
            if part is not None and _costly(part):
                out = e.func(self._slot(part), *rest)
            else:
                out = _rebuilt(e, [self(a) for a in e.args])
        else:
            out = _rebuilt(e, [self(a) for a in e.args])
        self._memo[e] = out
        return out


def hoist_time_terms(ds: DerivedSystem, table: dict, free: FreeSymbols | None = None,
                     forward_helpers=()):
    """(table with time terms replaced, tau symbols, forward tau expressions, sensitivity tau
    expressions); tau[k] stands for the k-th expression of forward + sensitivity. The table's
    entries are (expressions, accumulate) or (expressions, accumulate, assignments); the
    result's are always the latter. ``forward_helpers``: table entries that forward kernels
    call (their time terms are evaluated with the forward ones)."""
    hoister = _Hoister(ds, free or FreeSymbols())
    forward = [s.name for s in KERNELS if s.forward and not s.internal] + list(forward_helpers)
    forward = [k for k in forward if k in table]
    order = forward + [k for k in table if k not in forward]
    out = {}
    n_forward = 0
    for name in order:
        exprs, accumulate, *assigns = table[name]
        out[name] = ([hoister(e) if e != 0 else e for e in exprs], accumulate,
                     [(z, hoister(f)) for z, f in (assigns[0] if assigns else ())])
        if name == forward[-1]:
            n_forward = len(hoister.terms)
    terms = list(hoister.terms)
    symbols = tuple(hoister.terms.values())
    return {k: out[k] for k in table}, symbols, terms[:n_forward], terms[n_forward:]


# the kernels that may read the state terms: every kernel evaluated at a state (a sweep
# computes the terms once per state and passes them to all the kernels it calls there)
STATE_TERM_READERS = tuple(s.name for s in KERNELS if not s.internal)
_TRANSCENDENTAL = (TrigonometricFunction, InverseTrigonometricFunction, HyperbolicFunction,
                   InverseHyperbolicFunction, sp.exp, sp.log)


def _transcendental(node: sp.Basic) -> bool:
    """Is node a call of a costly elementary function (a libm call: not |x|, sign, min)?"""
    return isinstance(node, _TRANSCENDENTAL) or (isinstance(node, sp.Pow)
                                                  and not node.exp.is_Integer)


def hoist_state_terms(ds: DerivedSystem, table: dict, tau: tuple):
    """(table with the state terms replaced by symbols ``st[k]`` in its STATE_TERM_READERS,
    st symbols, st expressions). The state terms are the residual's transcendental
    subexpressions in (t, q, v, p, u) and the time terms ``tau`` only, nested ones too (a
    reader may use cos(x) alone where the residual has exp(cos(x))), and with sin(x) or
    cos(x) the other, in the order of a preorder walk of the residual. A term in a branch
    of a Piecewise is evaluated whichever branch holds (its value unread where the other
    does). The table's entries are (expressions, accumulate, assignments) of a tree module
    (no assignments)."""
    S = ds.symbols
    allowed = frozenset((S.t,) + tuple(S.q) + tuple(S.v) + tuple(S.p) + tuple(S.u) + tau)
    terms: dict = {}

    def add(node):
        if node not in terms:
            terms[node] = sp.Symbol(f"st[{len(terms)}]", real=True)

    for e in table["residual"][0]:
        for node in sp.preorder_traversal(e):
            if _transcendental(node) and node.free_symbols <= allowed:
                add(node)
                # with its companion: one sincos costs about what either alone does, and
                # the derivative kernels read the other (d cos(x) = -sin(x) dx)
                if isinstance(node, (sp.sin, sp.cos)):
                    add((sp.cos if isinstance(node, sp.sin) else sp.sin)(node.args[0]))
    if not terms:
        return table, (), []
    out = dict(table)
    for name in STATE_TERM_READERS:
        if name in table:
            exprs, accumulate, assigns = table[name]
            out[name] = ([e.xreplace(terms) for e in exprs], accumulate, assigns)
    return out, tuple(terms.values()), list(terms)


def _state_term_wrapper(name: str, body: str, n_st: int, n_out: int) -> list:
    """C lines of kernel ``name`` as the interface has it: ``body`` (the kernel reading
    x->st), after computing the state terms into a buffer of its own when x->st is NULL."""
    if n_st <= _STACK_DOUBLES:
        alloc, release = [f"    double st[{n_st}];"], []
    else:
        alloc, release = _heap_lines("st", n_st, n_out), ["    free(st);"]
    return ([_KERNEL_HEAD.format(name=name), "    symdae_args xs;", "    if (x->st != NULL) {",
             f"        {body}(x, w, out);", "        return;", "    }"] + alloc
            + ["    xs = *x;", "    _k_state_terms(x, NULL, st);", "    xs.st = st;",
               f"    {body}(&xs, w, out);"] + release + ["}"])


def time_term_reads(ds: DerivedSystem, terms: list) -> dict:
    """{"p": indices of the parameters, "u": indices of the inputs} that the time terms read
    (besides t): what a table of their values over a time grid depends on."""
    used = set().union(*(sp.sympify(e).free_symbols for e in terms)) if terms else set()
    S = ds.symbols
    return {"p": [k for k, s in enumerate(S.p) if s in used],
            "u": [k for k, s in enumerate(S.u) if s in used]}


def tau_reads(exprs: list, tau: tuple, n_forward: int) -> int:
    """Which time terms the expressions read: 1 the forward ones (tau[:n_forward]), 2 the
    sensitivity ones, 3 both (the ``tau`` field of a kernel entry, symdae_kernels.h)."""
    used = set().union(*(sp.sympify(e).free_symbols for e in exprs)) if exprs else set()
    return (int(bool(used & set(tau[:n_forward])))
            | 2 * int(bool(used & set(tau[n_forward:]))))


def _chunks(items: list, chunk_ops: int, size=lambda item: sp.count_ops(item[1])) -> list:
    """Split items (in order) into groups of at most about chunk_ops operations, ``size``
    giving an item's count."""
    groups: list[list] = []
    cur: list = []
    ops = 0
    for item in items:
        k = size(item)
        if cur and ops + k > chunk_ops:
            groups.append(cur)
            cur, ops = [], 0
        cur.append(item)
        ops += k
    if cur:
        groups.append(cur)
    return groups


def _cse(exprs: list):
    """sp.cse, with temporaries that are bare negations (``_t3 = -_t2``) put back inline: they
    cost a variable and a line for nothing (C folds the sign into the use)."""
    repl, reduced = sp.cse(exprs, symbols=sp.numbered_symbols("_t"), order="canonical")
    keep: list[tuple] = []
    inline: dict = {}
    for sym, e in repl:
        e = e.xreplace(inline)
        if e.is_Mul and len(e.args) == 2 and e.args[0] == -1 and e.args[1].is_Atom:
            inline[sym] = e
        else:
            keep.append((sym, e))
    return keep, [e.xreplace(inline) for e in reduced]


def _block_of(blocks: dict, idx: int) -> str:
    for name, (start, stop, shape) in blocks.items():
        if start <= idx < stop:
            dims = " x ".join(str(d) for d in shape) or "scalar"
            return f"// block {name} ({dims}): out[{start}:{stop}]"
    raise AssertionError(f"entry {idx} lies in no block")


def _function(fname: str, entries: list, accumulate: bool, printer: CPrinter,
              ds: DerivedSystem, arrays: dict, blocks: dict, wide: bool = False,
              inline: bool = False, keep: set | None = None) -> list:
    """Lines of one C function writing the given entries of ``out`` (CSE'd; ``wide``:
    sums and products split into parts of at most WIDE_TERMS terms; ``inline``: marked
    SYMDAE_STEP_INLINE). ``keep``: only these entries, with the temporaries they need, of
    the code for all of them: each the same operations as in the function of all entries
    (a CSE of the kept entries alone may group a sum's terms differently, which rounds
    differently)."""
    repl, reduced = _cse([e for _, e in entries])
    if wide:
        repl, reduced = split_wide(repl, reduced, WIDE_TERMS)
    items = [("set", sym, e) for sym, e in repl]
    items += [("out", idx, e) for (idx, _), e in zip(entries, reduced)]
    if keep is not None:
        items = _needed(items, keep)
    return _program_function(fname, items, accumulate, printer, ds, arrays, blocks, {}, False,
                             FreeSymbols(), inline)


def _needed(items: list, keep: set) -> list:
    """``items`` reduced to the outputs in ``keep`` and the temporaries they read, directly
    or through other temporaries, in their order."""
    temps = {sym for kind, sym, _ in items if kind == "set"}
    need = set().union(*[e.free_symbols & temps for kind, idx, e in items
                         if kind == "out" and idx in keep])
    out = []
    for kind, target, e in reversed(items):
        if kind == "out" and target in keep or kind == "set" and target in need:
            out.append((kind, target, e))
            need |= e.free_symbols & temps
    return out[::-1]


def _kernel_lines(name: str, exprs: list, accumulate: bool, printer, ds, arrays, blocks,
                  chunk_ops: int, wide: bool = False, fname: str = "", label: str = "",
                  keep: set | None = None) -> list:
    """Lines of a tree kernel, as the C function ``fname`` (default ``_k_<name>``; ``label``
    its name in the heading comment, by default ``name``); ``wide``: in a graph module (sums
    split into parts, and chunks sized by tree_size, which counts a shared subexpression's
    repetitions without walking them as count_ops does: on a large model's rows that took
    seconds); ``keep``: a part of the kernel, only these entries of its code (_function)."""
    fname = fname or f"_k_{name}"
    entries = [(i, e) for i, e in enumerate(exprs) if e != 0]
    if wide:
        groups = _chunks(entries, chunk_ops, lambda item: tree_size([item[1]]))
    else:
        groups = _chunks(entries, chunk_ops)
    written = len(entries) if keep is None else sum(i in keep for i, _ in entries)
    out = [f"// kernel {label or name}: {len(exprs)} entries, {written} structurally "
           "nonzero, "
           f"{len(groups)} chunk(s)"]
    if len(groups) <= 1:
        inline = (name in STEP_INLINE_KERNELS and not wide
                  and tree_size([e for _, e in entries]) <= STEP_INLINE_NODES)
        return out + _function(fname, groups[0] if groups else [], accumulate, printer,
                               ds, arrays, blocks, wide, inline, keep)
    for c, grp in enumerate(groups):
        out += _function(f"{fname}_{c}", grp, accumulate, printer, ds, arrays, blocks, wide,
                         keep=keep)
        out.append("")
    return out + [_KERNEL_HEAD.format(name=fname)] + [
        f"    {fname}_{c}(x, w, out);" for c in range(len(groups))] + ["}"]


def tree_size(exprs) -> int:
    """Nodes of the expressions as trees, every repetition counted (what differentiating
    them as trees copies), in time linear in their distinct subexpressions."""
    memo: dict = {}

    def size(e):
        k = memo.get(e)
        if k is None:
            k = memo[e] = 1 + sum(size(a) for a in e.args)
        return k

    return sum(size(sp.sympify(e)) for e in exprs)


def use_graph(ds: DerivedSystem) -> bool:
    """Are the model's residual and outputs large enough for graph kernels: more than
    GRAPH_MIN_NODES tree nodes in all, more than GRAPH_MIN_ROW_NODES per row on average?

    Differentiating a row as a tree copies it once per variable it depends on, so the tree
    kernels grow with the rows' sizes: large rows (a dense M(q) in joint angles) are where
    the graph form pays. Many small rows (a long chain in Cartesian coordinates) have small
    tree derivatives, which run faster than a graph program's directional calls (the
    80-pendulum chain: 23 us per step as trees, 31 us as graph kernels, builds alike)."""
    rows = list(ds.Ma) + list(ds.g) + list(ds.C) + list(ds.s)
    size = tree_size(rows)
    return size > GRAPH_MIN_NODES and size > GRAPH_MIN_ROW_NODES * len(rows)


def _program_function(fname: str, items: list, accumulate: bool, printer: CPrinter,
                      ds: DerivedSystem, arrays: dict, blocks: dict, shared: dict,
                      chunked: bool, free: FreeSymbols, inline: bool = False) -> list:
    """Lines of one C function evaluating ``items``: ("set", symbol, expression) or
    ("out", index, expression), in order. Symbols in ``shared`` live in the kernel's scratch
    array (read by later chunks), the others in local variables; ``inline``: marked
    SYMDAE_STEP_INLINE (symdae_kernels.h)."""
    head = ("SYMDAE_STEP_INLINE " if inline else "") + \
        f"static void {fname}(const symdae_args* x, const double* w, double* out"
    lines = [head + (", double* z)" if chunked else ")") + " {"]
    used: set = set()
    for _, _, e in items:
        used |= free(e)
    if ds.symbols.t in used:
        lines.append("    const double t = x->t;")
    for arr, syms in arrays.items():
        if used & set(syms):
            lines.append(f"    const double* {arr} = x->{arr};")
    local = {z: f"_t{k}" for k, z in enumerate(z for kind, z, _ in items
                                                if kind == "set" and z not in shared)}
    names = list(local.values())
    for i in range(0, len(names), 16):
        lines.append("    double " + ", ".join(names[i:i + 16]) + ";")
    printer.slots.update(local)
    op = "+=" if accumulate else "="
    comment = None
    for kind, target, e in items:
        if kind == "set":
            lines.append(f"    {printer.slots[target]} = {printer.doprint(e)};")
            continue
        c = _block_of(blocks, target)
        if c != comment:
            lines.append("    " + c)
            comment = c
        lines.append(f"    out[{target}] {op} {printer.doprint(e)};")
    for z in local:
        del printer.slots[z]
    return lines + ["}"]


def _program_lines(name: str, exprs: list, accumulate: bool, assigns: list, printer, ds,
                   arrays, blocks, chunk_ops: int, free: FreeSymbols,
                   primal: dict | None = None) -> list:
    """A graph kernel: its needed assignments, then its output entries, split into chunk
    functions of about chunk_ops nodes that share a scratch array. ``primal``: {symbol:
    (index, expression)} of the residual's program, which ``_k_primal`` evaluates into the
    scratch array's first entries: a kernel that needs most of it calls that instead of
    holding its own copy (the program's text is then compiled once, not once per kernel)."""
    entries = [(i, e) for i, e in enumerate(exprs) if e != 0]
    needed = needed_assignments(assigns, [e for _, e in entries], free)
    pre = {}
    if primal:
        mine = [(z, f) for z, f in needed if z in primal]
        if 2 * len(mine) > len(primal) and all(f == primal[z][1] for z, f in mine):
            pre = {z: f"z[{k}]" for z, (k, _) in primal.items()}
            needed = [(z, f) for z, f in needed if z not in primal]
    needed, outs = split_wide(needed, [e for _, e in entries], WIDE_TERMS)
    items = [("set", z, f) for z, f in needed]
    items += [("out", i, e) for (i, _), e in zip(entries, outs)]
    # tree nodes, a cheap stand-in for count_ops on a program's short assignments
    groups = _chunks(items, chunk_ops, lambda item: tree_size([item[2]])) or [[]]
    home = {z: c for c, grp in enumerate(groups) for kind, z, _ in grp if kind == "set"}
    shared = dict(pre)
    for c, grp in enumerate(groups):
        for _, _, e in grp:
            for sym in free(e):
                if home.get(sym, c) != c and sym not in shared:
                    shared[sym] = f"z[{len(shared)}]"
    out = [f"// kernel {name}: {len(exprs)} entries, {len(entries)} structurally nonzero, "
           f"{len(items) - len(entries)} shared assignments, {len(groups)} chunk(s)"]
    printer.slots.update(shared)
    try:
        if len(groups) == 1 and not pre:
            return out + _program_function(f"_k_{name}", groups[0], accumulate, printer, ds,
                                           arrays, blocks, shared, False, free)
        for c, grp in enumerate(groups):
            out += _program_function(f"_k_{name}_{c}", grp, accumulate, printer, ds, arrays,
                                     blocks, shared, True, free)
            out.append("")
    finally:
        for sym in shared:
            del printer.slots[sym]
    out.append(_KERNEL_HEAD.format(name=f"_k_{name}"))
    calls = ["    _k_primal(x, w, z);"] if pre else []
    calls += [f"    _k_{name}_{c}(x, w, out, z);" for c in range(len(groups))]
    if len(shared) <= _STACK_DOUBLES:
        return out + [f"    double z[{max(len(shared), 1)}];"] + calls + ["}"]
    return out + _heap_lines("z", len(shared), len(exprs)) + calls + ["    free(z);", "}"]


def _time_terms_lines(tau_fwd: list, tau_sens: list, printer, ds, arrays, blocks,
                      chunk_ops: int, free: FreeSymbols) -> dict:
    """{kernel name: lines} of time_terms (the forward terms) and time_terms_sensitivity (all
    of them) from one CSE over all of them: the second shares the first's costly
    subexpressions (sin, pow) instead of evaluating them again, and prints the forward terms
    from the same assignments, so both kernels compute them alike, bit for bit."""
    assigns, reduced = _cse(list(tau_fwd) + list(tau_sens))
    return {name: _program_lines(name, exprs, False, assigns, printer, ds, arrays, blocks,
                                 chunk_ops, free)
            for name, exprs in (("time_terms", reduced[:len(tau_fwd)]),
                                ("time_terms_sensitivity", reduced))}


def _state_terms_lines(terms: list, printer, ds, arrays, chunk_ops: int,
                       free: FreeSymbols) -> list:
    """Lines of the kernel state_terms: every term into a local variable first, then the
    outputs, so that no store to ``out`` (which may alias q for all the compiler knows) comes
    between sin(x) and cos(x) of one x, which the compiler then computes in one sincos."""
    assigns, reduced = _cse(terms)
    held = [sp.Symbol(f"_s{k}", real=True) for k in range(len(reduced))]
    assigns += [(z, e) for z, e in zip(held, reduced)]
    return _program_lines("state_terms", held, False, assigns, printer, ds, arrays,
                          {"st": (0, len(terms), (len(terms),))}, chunk_ops, free)


def column_helpers(name: str) -> tuple:
    """The helper programs (graph_kernels.HELPERS) a COLUMN_KERNELS kernel calls; the last is
    the directional one it calls once per group of columns, the first (if another) once per
    kernel call."""
    return ("gdot", "dir_gdot") if name == "massless_rows" else ("residual_partials",
                                                                  "dir_residual")


@dataclass(frozen=True)
class ColumnPass:
    """Columns of a COLUMN_KERNELS kernel filled by one directional helper: ``seeds(j)`` the
    direction entries (index, value) of column j, ``entries(j)`` its candidate outputs:
    (kernel output indices, then per term of the value: the term (from r) and the helper
    rows it reads); a term whose rows do not depend on the direction is structurally zero."""

    helper: str
    columns: range
    seeds: Callable[[int], list]
    entries: Callable[[int], list]


def _scalar_row(i: int) -> str:
    return f"r[{i}]"


def column_passes(name: str, sizes: Sizes, r: Callable[[int], str] = _scalar_row) -> list:
    """The passes of a COLUMN_KERNELS kernel (graph_kernels.py): what each column of its
    Jacobian blocks seeds and where the helper's output goes (``r(i)``: how the code reads
    the helper's output row i). massless_rows also copies gdot first (not a pass: it takes
    no direction)."""
    n, m, n_p = sizes.n, sizes.m, sizes.n_p
    nm = n + m
    if name == "newton":
        # K[:n, j] = c_m d(Ma) + d(g) along q_j -> c_q, v_j -> c_v, a_j -> 1; the constraint
        # rows and columns are C_q (along q_j -> 1), the rest zero
        out = [ColumnPass("dir_residual", range(n),
                          lambda j: [(j, "w[1]"), (n + j, "w[2]"), (2 * n + j, "1.0")],
                          lambda j: [((i * nm + j,), f"w[0] * {r(i)}", (i,), r(n + i),
                                      (n + i,)) for i in range(n)])]
        if m:
            out.append(ColumnPass("dir_residual", range(n), lambda j: [(j, "1.0")],
                                  lambda j: [(((n + k) * nm + j, j * nm + n + k),
                                              r(2 * n + k), (2 * n + k,))
                                             for k in range(m)]))
        return out
    if name == "jacobians":
        return [ColumnPass("dir_residual", range(n), lambda j: [(j, "1.0")],
                           lambda j: [((i * n + j,), r(i), (i,)) for i in range(n)]
                           + [((n * n + i * n + j,), r(n + i), (n + i,))
                              for i in range(n)]
                           + [((3 * n * n + k * n + j,), r(2 * n + k), (2 * n + k,))
                              for k in range(m)]),
                ColumnPass("dir_residual", range(n), lambda j: [(n + j, "1.0")],
                           lambda j: [((2 * n * n + i * n + j,), r(n + i), (n + i,))
                                      for i in range(n)])]
    if name == "param_jacobians":
        off = 3 * n + m
        return [ColumnPass("dir_residual", range(n_p), lambda j: [(off + j, "1.0")],
                           lambda j: [((i * n_p + j,), r(i), (i,)) for i in range(n)]
                           + [((n * n_p + i * n_p + j,), r(n + i), (n + i,))
                              for i in range(n)]
                           + [((2 * n * n_p + k * n_p + j,), r(2 * n + k), (2 * n + k,))
                              for k in range(m)])]
    # massless_rows: the derivatives of gdot along q, v and p
    return [_gdot_pass(n, count, start, off, r)
            for count, start, off in ((n, 0, n), (n, n, n + n * n), (n_p, 2 * n, n + 2 * n * n))]


def _gdot_pass(n: int, count: int, start: int, off: int, r: Callable[[int], str]) -> ColumnPass:
    """massless_rows' pass along the ``count`` directions seeded from ``start``: gdot's n rows
    go to the outputs from ``off`` (column-major in the block)."""
    return ColumnPass("dir_gdot", range(count), lambda j: [(start + j, "1.0")],
                      lambda j: [((off + i * count + j,), r(i), (i,)) for i in range(n)])


def _lane_row(lanes: int, c: int) -> Callable[[int], str]:
    """How a vector-mode column kernel reads lane ``c`` of the helper's output row i."""
    return lambda i: f"R[{i * lanes + c}]"


def _seed_mask(cp: ColumnPass, j: int) -> int:
    """The direction entries column j seeds, as a bit mask (graph.dependence's)."""
    mask = 0
    for idx, _ in cp.seeds(j):
        mask |= 1 << idx
    return mask


def _column_entries(cp: ColumnPass, j: int, deps: list) -> list:
    """Column j's structurally nonzero outputs: (output indices, value, rows read), each
    value a sum of the terms whose helper rows depend on the column's direction."""
    seed = _seed_mask(cp, j)
    out = []
    for outs, *terms in cp.entries(j):
        parts = [(value, rows) for value, rows in zip(terms[::2], terms[1::2])
                 if any(deps[r] & seed for r in rows)]
        if parts:
            out.append((outs, " + ".join(v for v, _ in parts),
                        tuple(r for _, rows in parts for r in rows)))
    return out


def color_columns(cp: ColumnPass, deps: list) -> list:
    """Columns that can share one helper call (Curtis, Powell and Reid): no column's written
    outputs read a helper row that another column of its group moves. Greedy in column order;
    a banded Jacobian needs a few groups whatever its size, a dense one one per column.
    A structurally zero column is left out (nothing to write, nothing to seed).
    Returns [(columns, {column: its entries})] per group."""
    groups: list[list] = []          # [columns, rows moved, rows read, entries]
    for j in cp.columns:
        entries = _column_entries(cp, j, deps)
        if not entries:
            continue
        seed = _seed_mask(cp, j)
        moved = {r for r, bits in enumerate(deps) if bits & seed}
        read = {r for _, _, rows in entries for r in rows}
        for g in groups:
            if not (read & g[1] or g[2] & moved):
                g[0].append(j)
                g[1] |= moved
                g[2] |= read
                g[3][j] = entries
                break
        else:
            groups.append([[j], moved, read, {j: entries}])
    return [(g[0], g[3]) for g in groups]


def _column_lines(name: str, sizes: Sizes, deps: dict) -> list:
    """massless_rows (the column kernel of dir_gdot) as calls of its helper
    (graph_kernels.py) along sums of unit directions, one call per group of columns
    (color_columns), writing only structurally nonzero entries: d the direction, r the
    helper's output. ``deps``: {helper: per output row, the bit mask of direction entries it
    depends on (graph.dependence)}. The kernels of dir_residual: _lane_column_lines."""
    n = sizes.n
    helper = column_helpers(name)[-1]
    n_d, n_r = helper_sizes(sizes)[helper]
    body = [f"    for (i = 0; i < {n}; i++) r[i] = 0.0;", "    _k_gdot(x, d, r);",
            f"    for (i = 0; i < {n}; i++) out[i] = r[i];"]
    calls = 0
    for cp in column_passes(name, sizes):
        for columns, entries in color_columns(cp, deps[cp.helper]):
            calls += 1
            seeds = [sd for j in columns for sd in cp.seeds(j)]
            body += [f"    // columns {', '.join(map(str, columns))}"]
            body += [f"    d[{idx}] = {value};" for idx, value in seeds]
            body += [f"    for (i = 0; i < {n_r}; i++) r[i] = 0.0;",
                     f"    _k_{cp.helper}(x, d, r);"]
            body += [f"    out[{o}] = {value};" for j in columns
                     for outs, value, _ in entries[j] for o in outs]
            body += [f"    d[{idx}] = 0.0;" for idx, _ in seeds]
    head = [f"// kernel {name}: {calls} call(s) of {helper}, each along the columns "
            "that share it", _KERNEL_HEAD.format(name=f"_k_{name}"),
            f"    double r[{max(n_r, 1)}];"]
    zero = [f"    for (i = 0; i < {n_d}; i++) d[i] = 0.0;"]
    if n_d <= _STACK_DOUBLES:
        return head + ["    int i;", f"    double d[{max(n_d, 1)}];"] + zero + body + ["}"]
    return (head + _heap_lines("d", n_d, _out_size(name, sizes)) + zero + body
            + ["    free(d);", "}"])


def lane_count(sizes: Sizes, deps: dict, width: int = 2) -> int:
    """Lanes of the vector dir_residual (its directions per call): the Newton matrix's column
    groups (the kernel of every Newton refresh takes one call), made a multiple of ``width``
    (the doubles one vector instruction takes: VECTOR_WIDTH), at most MAX_LANES. The
    Jacobians of the derivative sweeps take as many calls as their column groups fill."""
    groups = sum(len(color_columns(cp, deps["dir_residual"]))
                 for cp in column_passes("newton", sizes))
    return max(width, min(MAX_LANES, groups + -groups % width))


# the column kernels that call the vector dir_residual
LANE_KERNELS = tuple(k for k in COLUMN_KERNELS if column_helpers(k)[-1] == "dir_residual")


def lane_batches(name: str, sizes: Sizes, deps: dict, lanes: int) -> list:
    """The calls of dir_residual a column kernel makes: per call, the lanes it fills as
    [(lane, pass index, columns)]. The Newton matrix's column groups take the lanes in order;
    the other kernels' groups take the lane of their first column in the Newton matrix where
    that needs no more calls than filling the lanes in order, so that a direction entry is
    seeded in the same lane by every kernel and the program's statements keep narrow lane
    ranges (lane_ranges)."""
    dr = deps["dir_residual"]
    groups = [(k, columns) for k, cp in enumerate(column_passes(name, sizes))
              for columns, _ in color_columns(cp, dr)]
    in_order = [[(c, k, cols) for c, (k, cols) in enumerate(groups[i:i + lanes])]
                for i in range(0, len(groups), lanes)]
    if name == "newton":
        return in_order
    home = {j: lane for batch in lane_batches("newton", sizes, deps, lanes)
            for lane, k, cols in batch if k == 0 for j in cols}
    calls: list = []                 # [{lane: (pass, columns)}]
    for k, cols in groups:
        want = home.get(cols[0])
        candidates = range(lanes) if want is None else (want,)
        for call in calls:
            lane = next((c for c in candidates if c not in call), None)
            if lane is not None:
                call[lane] = (k, cols)
                break
        else:
            calls.append({candidates[0]: (k, cols)})
    if len(calls) > len(in_order):
        return in_order
    return [[(c, *call[c]) for c in sorted(call)] for call in calls]


def seeded_lanes(sizes: Sizes, deps: dict, lanes: int) -> dict:
    """{direction entry: the lanes any kernel of LANE_KERNELS seeds it in}: where the entry
    of D can be nonzero (D is zero elsewhere)."""
    out: dict = {}
    for name in LANE_KERNELS:
        passes = column_passes(name, sizes)
        for batch in lane_batches(name, sizes, deps, lanes):
            for lane, k, cols in batch:
                for j in cols:
                    for idx, _ in passes[k].seeds(j):
                        out.setdefault(idx, set()).add(lane)
    return out


@dataclass(frozen=True)
class LaneStatement:
    """One statement of the vector dir_residual: ``target`` (a symbol of the program, or the
    output row) set over the lanes ``span`` = [lo, hi) (None: zero in every lane, not
    written), as ``parts``: [(lanes, terms)] in order, each summed over its lanes onto what
    the earlier parts left there (zero where none did)."""

    target: object
    expr: sp.Expr
    span: tuple | None
    parts: tuple


def lane_ranges(items: list, lane_symbols: dict, lanes: int, free: FreeSymbols,
                width: int = 2) -> list | None:
    """The statements of the vector dir_residual over the lanes where they can be nonzero.

    ``items``: [(target, expression)] in order, every expression linear in the lane symbols;
    ``lane_symbols``: {direction symbol: the lanes it is seeded in}. A statement's value in a
    lane is zero where none of its terms' operands can be nonzero, so it is computed over the
    hull of its terms' lane ranges (its span), each term added only over its operand's
    (ranges made multiples of ``width``, the lanes of one vector instruction). Lane by lane
    the nonzero terms are summed in one order, by their operands' exact ranges (lowest first
    lane, then widest, then the expression's order), whatever ``width``: builds for
    different vector widths compute the same numbers. ``parts``: runs of that order that
    share a rounded range, one loop each. None when a term is not a multiple of one lane
    symbol (the statements are then computed over every lane)."""
    def rounded(r):
        return (r[0] - r[0] % width, r[1] + -r[1] % width)

    exact = {sym: (min(seeded), max(seeded) + 1)
             for sym, seeded in lane_symbols.items() if seeded}
    known = set(lane_symbols)
    out = []
    for target, e in items:
        ranged = []
        for k, term in enumerate(sp.Add.make_args(e)):
            ops = [s for s in free(term) if s in known]
            if len(ops) > 1 or (ops and not _linear_in(term, ops[0])):
                return None
            r = exact.get(ops[0]) if ops else (0, lanes)
            if r is not None:
                ranged.append(((r[0], -r[1], k), r, term))
        known.add(target)
        if not ranged:
            out.append(LaneStatement(target, e, None, ()))
            continue
        ranged.sort(key=lambda item: item[0])
        parts: list = []
        for _, r, term in ranged:
            if parts and parts[-1][0] == rounded(r):
                parts[-1][1].append(term)
            else:
                parts.append((rounded(r), [term]))
        exact[target] = (min(r[0] for _, r, _ in ranged), max(r[1] for _, r, _ in ranged))
        out.append(LaneStatement(target, e, rounded(exact[target]),
                                 tuple((r, tuple(ts)) for r, ts in parts)))
    return out


def _linear_in(term: sp.Expr, sym: sp.Symbol) -> bool:
    """``term`` is a coefficient free of ``sym`` times ``sym``."""
    if term == sym:
        return True
    return term.is_Mul and sum(1 for a in term.args if a.has(sym)) == 1 and sym in term.args


_LANE_ARGS = ("const symdae_args* x, const double* restrict D, const double* restrict P, "
              "double* restrict R, double* restrict T")


def _lane_program_lines(exprs: list, assigns: list, slots: dict, lanes: int, n_d: int,
                        n_partials: int, ds, arrays: dict, chunk_ops: int,
                        free: FreeSymbols, seeded: dict, vector: str = "base") -> tuple:
    """(lines, scratch doubles): dir_residual in vector mode. Every statement is a loop over
    the lanes (``lanes`` directions at once: D[i * lanes + c] is entry i of direction c,
    R[i * lanes + c] its output row i, T the assignments' rows), reading the partial
    derivatives P once for all lanes; GCC vectorizes the loops (the arrays are restrict).
    Each lane performs the program's operations for its direction in the program's order;
    against one call per direction, the 20-link cart's Newton matrix took 27 instead of 62
    us (the partials are loaded once per statement, two lanes per instruction).

    ``seeded``: {direction entry: lanes} (seeded_lanes). A statement runs only over the lanes where it can be nonzero and its terms over their operands' (lane_ranges), an
    assignment's row in T holds only those lanes, and a bare copy is read where it was
    made. In joint angles a link's absolute angle depends on the joints before it, so the
    tangents are triangular in the lanes: the 20-link cart's dir_residual does 167 000
    instead of 224 000 term-lane operations (its Newton matrix 28 instead of 32 us)."""
    entries = [(i, e) for i, e in enumerate(exprs) if e != 0]
    needed = needed_assignments(assigns, [e for _, e in entries], free)
    needed, outs = split_wide(needed, [e for _, e in entries], WIDE_TERMS)
    items = list(needed) + [(("R", i), e) for (i, _), e in zip(entries, outs)]
    direction = [sp.Symbol(f"w[{i}]", real=True) for i in range(n_d)]
    plan = lane_ranges(items, {w: seeded.get(i, set()) for i, w in enumerate(direction)},
                       lanes, free, VECTOR_WIDTH[vector])
    if plan is None:                    # a term not linear in one lane symbol: every lane
        plan = [LaneStatement(t, e, (0, lanes), (((0, lanes), sp.Add.make_args(e)),))
                for t, e in items]
    lane_slots = dict(slots)
    lane_slots.update({w: f"D[{i * lanes} + c]" for i, w in enumerate(direction)})
    lane_slots.update({sp.Symbol(f"w[{n_d + j}]", real=True): f"P[{j}]"
                       for j in range(n_partials)})
    n_t, written = 0, []
    for st in plan:
        if st.span is None:             # zero in every lane: not written (R starts zeroed)
            continue
        if isinstance(st.target, tuple):
            lane_slots[st.target] = f"R[{st.target[1] * lanes} + c]"
        elif st.expr in lane_slots and len(st.parts) == 1 and st.parts[0][1] == (st.expr,):
            lane_slots[st.target] = lane_slots[st.expr]      # a copy: read the original
            continue
        else:
            lane_slots[st.target] = f"T[{n_t - st.span[0]} + c]"
            n_t += st.span[1] - st.span[0]
        written.append(st)
    printer = CPrinter(lane_slots, {"order": "none"})
    groups = _chunks(written, chunk_ops, lambda st: tree_size([st.expr])) or [[]]
    n_written = sum(1 for st in written if not isinstance(st.target, tuple))
    out = [f"// kernel dir_residual: {len(exprs)} entries, {len(entries)} structurally nonzero, "
           f"{n_written} shared assignments, {len(groups)} chunk(s), {lanes} lanes"]
    for g, grp in enumerate(groups):
        used = set().union(*(free(st.expr) for st in grp))
        out += [f"{_VECTOR_ATTRIBUTE[vector]}static void _k_dir_residual_{g}({_LANE_ARGS}) {{",
                "    int c;"]
        if ds.symbols.t in used:
            out.append("    const double t = x->t;")
        out += [f"    const double* {arr} = x->{arr};" for arr, syms in arrays.items()
                if used & set(syms)]
        for st in grp:
            out += _lane_statement(st, lane_slots[st.target], printer)
        out += ["}", ""]
    out.append(f"static void _k_dir_residual({_LANE_ARGS}) {{")
    out += [f"    _k_dir_residual_{g}(x, D, P, R, T);" for g in range(len(groups))] + ["}"]
    return out, n_t


def _lane_statement(st: LaneStatement, target: str, printer: CPrinter) -> list:
    """The loops of one statement of the vector dir_residual (lane_ranges): a part over lanes
    no earlier part set assigns, a part over lanes one did adds to them (its other lanes
    zeroed first), and the span's lanes no part covers are zeroed."""
    def loop(lanes, rhs):
        return f"    for (c = {lanes[0]}; c < {lanes[1]}; c++) {target} = {rhs};"

    if len(st.parts) == 1 and st.parts[0][1] == sp.Add.make_args(st.expr):
        return [loop(st.span, printer.doprint(st.expr))]
    lines, assigned = [], set()

    def zero(lanes):
        gap = [c for c in range(*lanes) if c not in assigned]
        for c in gap:                       # contiguous runs of the unassigned lanes
            if c - 1 not in gap:
                end = c
                while end + 1 in gap:
                    end += 1
                lines.append(loop((c, end + 1), "0.0"))
        assigned.update(gap)

    for lanes, terms in st.parts:
        rhs = [printer.doprint(t) for t in terms]
        if assigned.isdisjoint(range(*lanes)):
            lines.append(loop(lanes, " + ".join(rhs)))
            assigned.update(range(*lanes))
        else:
            zero(lanes)
            lines.append(loop(lanes, " + ".join([target] + rhs)))
    zero(st.span)
    return lines


def _lane_column_lines(name: str, sizes: Sizes, deps: dict, n_partials: int, lanes: int,
                       n_t: int) -> list:
    """A column kernel of dir_residual (newton, jacobians, param_jacobians) in vector mode:
    the column groups of all its passes (color_columns) fill the lanes of as few calls as
    possible (lane_batches); D holds the directions, P the partial derivatives
    (residual_partials, once per kernel call), R the outputs, T the program's scratch
    (``n_t`` doubles), all on the heap (a failed allocation leaves NaN outputs, which the
    callers report as a non-finite kernel value)."""
    n_d, n_r = helper_sizes(sizes)["dir_residual"]
    n_p = n_partials
    passes = column_passes(name, sizes)
    batches = lane_batches(name, sizes, deps, lanes)
    body = []
    for batch in batches:
        seeds = [(f"D[{idx * lanes + c}]", value) for c, k, columns in batch
                 for j in columns for idx, value in passes[k].seeds(j)]
        body += [f"    // lanes: {'; '.join(f'{c}: ' + ', '.join(map(str, cols)) for c, _, cols in batch)}"]
        body += [f"    {target} = {value};" for target, value in seeds]
        body += [f"    for (i = 0; i < {n_r * lanes}; i++) R[i] = 0.0;",
                 "    _k_dir_residual(x, D, P, R, T);"]
        for c, k, columns in batch:
            cp = column_passes(name, sizes, _lane_row(lanes, c))[k]
            for j in columns:
                body += [f"    out[{o}] = {value};"
                         for outs, value, _ in _column_entries(cp, j, deps["dir_residual"])
                         for o in outs]
        body += [f"    {target} = 0.0;" for target, _ in seeds]
    total = n_d * lanes + n_p + n_r * lanes + max(n_t, 1)
    groups = sum(len(batch) for batch in batches)
    head = [f"// kernel {name}: {len(batches)} call(s) of dir_residual, {groups} column "
            f"group(s) in {lanes} lanes", _KERNEL_HEAD.format(name=f"_k_{name}")]
    return head + _heap_lines("D", total, _out_size(name, sizes)) + [
        f"    double* P = D + {n_d * lanes};",
        f"    double* R = P + {n_p};",
        f"    double* T = R + {n_r * lanes};",
        f"    for (i = 0; i < {n_d * lanes}; i++) D[i] = 0.0;",
        "    _k_residual_partials(x, w, P);"] + body + ["    free(D);", "}"]


def newton_structure(table: dict, sizes: Sizes, deps: dict | None) -> list:
    """The entries of the Newton matrix K (flat, row-major) that the newton kernel writes:
    its nonzero expressions, or in a graph module (``deps``: graph.dependence of its
    helpers) the outputs of its column passes."""
    if deps is None:
        return [i for i, e in enumerate(table["newton"][0]) if e != 0]
    written = set()
    for cp in column_passes("newton", sizes):
        for j in cp.columns:
            for outs, _, _ in _column_entries(cp, j, deps[cp.helper]):
                written.update(outs)
    return sorted(written)


def noise_coupling(nonzeros, n: int, N: int) -> list:
    """The entries of K (flat, row-major) through which the constraints' rounding reaches the
    round-off level of the dynamic rows (newton.pxd's residual_noise): K[i, k] structurally
    nonzero with i, k < n, in a column k some constraint row reaches; in the order of the
    core's list (sparse.pxd's structure_of), row by row."""
    nz = set(nonzeros)
    cons = [any(i * N + k in nz for i in range(n, N)) for k in range(N)]
    return [i * N + k for i in range(n) for k in range(n) if i * N + k in nz and cons[k]]


def noise_coupling_lines(entries, N: int) -> list:
    """sd_noise_coupling(K, fq, nu): nu[i] += |K[i, k]| fq[k] over ``entries`` written out,
    the core's loop over its list (compiled_steps.h) entry for entry; and the list itself,
    which the step compares with the core's before it takes this code."""
    body = [f"    nu[{e // N}] += fabs(K[{e}]) * fq[{e % N}];" for e in entries]
    # a call, not inlined: inlined into the step, GCC vectorised the step's other loops
    # worse (engine mount: 1 740 -> 1 833 instructions per step instead of 1 707)
    return ([f"#define SD_NOISE_NN {len(entries)}",
             f"static const int sd_noise_idx[{max(len(entries), 1)}] = "
             f"{{{', '.join(map(str, entries or [0]))}}};",
             "#if defined(__GNUC__)", "__attribute__((noinline))", "#endif",
             "static void sd_noise_coupling(const double *restrict K, "
             "const double *restrict fq, double *restrict nu)", "{"] + body + ["}"])


def fixed_entries(exprs: list, ds: DerivedSystem, n_w: int, free: FreeSymbols) -> list:
    """The structurally nonzero entries of a kernel's ``exprs`` (flat indices) that depend on
    the parameters and the weights alone: the same at every step of a sweep."""
    allowed = set(ds.symbols.p) | {sp.Symbol(f"w[{i}]", real=True) for i in range(n_w)}
    return [i for i, e in enumerate(exprs) if e != 0 and free(e) <= allowed]


def compiled_steps_lines(sizes: Sizes, nonzeros, plan, fixed=(), newton_parts=()) -> list:
    """C lines that compile the forward, adjoint and tangent sweeps' steps (compiled_steps.h)
    for a module of these sizes, Newton matrix structure (``nonzeros``) and LU plan: after
    its kernels and its written-out LU, which the steps call directly, with the tangent
    steps' solve for all directions (lu_plan.solve_block_lines). ``fixed``: K's entries that
    depend on the parameters and weights alone, which the steps form and eliminate once per
    call (lu_plan.split_factor_lines), with ``newton_parts`` the lines of
    ``_k_newton_fixed`` and ``_k_newton_rest``, the newton kernel's two parts. Only for a
    module with the written-out LU, tree kernels and a residual without jumps: a step the
    written LU cannot take, a graph module's residual program and the switch search stay in
    the core's generic steps."""
    keys = ("n", "m", "n_p", "n_tau", "n_st", "n_s", "n_u")
    split, n_stash = split_factor_lines(plan, fixed)
    return ([f"#define SD_{key.upper()} {getattr(sizes, key)}" for key in keys]
            + noise_coupling_lines(noise_coupling(nonzeros, sizes.n, sizes.nm), sizes.nm)
            + ['#include "vector_ops.h"'] + solve_block_lines(plan)
            + list(newton_parts) + split + [f"#define SD_LU_NC {n_stash}"]
            + ['#include "compiled_steps.h"']
            + [f"#undef SD_{key.upper()}" for key in keys + ("noise_nn", "lu_nc")])


def emit_cython(ds: DerivedSystem, *, definition_hash: str = "",
                chunk_ops: int = DEFAULT_CHUNK_OPS, graph: bool | None = None,
                vector: str = "base") -> str:
    """Return the Cython source of the kernel module for ``ds`` (deterministic). ``graph``:
    derivative kernels formed on the residual's common-subexpression graph (graph_kernels.py)
    instead of from the expanded Jacobians; by default when the residual is large
    (:func:`use_graph`). ``vector``: the vector instructions a graph module's vector
    dir_residual is compiled for (VECTOR_WIDTH; the builder passes what its machine has,
    compilation.cache.vector_extension, which is part of the cache key)."""
    if vector not in VECTOR_WIDTH:
        raise InputError(f"unknown vector extension {vector!r}: one of "
                         f"{', '.join(VECTOR_WIDTH)}")
    graph = use_graph(ds) if graph is None else graph
    free = FreeSymbols()
    table = graph_kernel_table(ds, free) if graph else kernel_expressions(ds)
    table, tau, tau_fwd, tau_sens = hoist_time_terms(
        ds, table, free, [h for h, fwd in HELPERS.items() if fwd])
    st, st_exprs = (), []
    if not graph:
        table, st, st_exprs = hoist_state_terms(ds, table, tau)
    sizes = Sizes.of({**ds.sizes, "n_tau": len(tau), "n_st": len(st)})
    arrays = _arrays(ds, tau, st)
    n_partials = len(table["residual_partials"][0]) if graph else 0
    n_w = max([weight_size(s.name, sizes) for s in KERNELS]
              + [k for k, _ in helper_sizes(sizes).values()]
              + [helper_sizes(sizes)["dir_residual"][0] + n_partials])
    printer = CPrinter(_slots(ds, arrays, n_w))
    # a graph program's sums print in their stored order (sorting them costs, and the order
    # of a graph's terms is no less deterministic)
    gprinter = CPrinter(_slots(ds, arrays, n_w), {"order": "none"})
    sz = {**ds.sizes, "n_tau": sizes.n_tau, "n_st": sizes.n_st}
    out = [
        "# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True",
        "# cython: initializedcheck=False, nonecheck=False, infer_types=False",
        f"# Kernels generated by symdae (kernel ABI {ABI_VERSION}). Do not edit: regenerate",
        "# from the model instead. Kernels, weights and blocks: symdae/model/kernels.py.",
        "# The kernel functions are C, in the extern block below; this module only fills",
        "# the kernel table (symdae_kernels.h) with them.",
        "from cpython.pycapsule cimport PyCapsule_New",
        "from symdae.simulation.core.kernel_api cimport *",
        "",
        f"ABI_VERSION = {ABI_VERSION}",
        f"DEFINITION_HASH = {json.dumps(definition_hash)}",
        f"SIZES = {json.dumps(sz, sort_keys=True)}",
        f"TIME_TERM_READS = {json.dumps(time_term_reads(ds, tau_fwd + tau_sens))}",
        # the outputs the outputs kernel never writes (structural zeros): the caller zeroes them
        f"ZERO_OUTPUTS = {json.dumps([j for j, e in enumerate(table['outputs'][0]) if e == 0])}",
        "",
    ]
    c = ["#include <math.h>", "#include <stdlib.h>", '#include "symdae_kernels.h"', ""]
    primal = None
    if graph:
        # the residual's program (every program kernel's assignments start with it, the
        # same after hoisting), once: its values go to the first entries of a kernel's scratch
        steps = table["residual"][2]
        primal = {z: (k, f) for k, (z, f) in enumerate(steps)}
        c += _program_lines("primal", [z for z, _ in steps], False, steps, gprinter, ds,
                            arrays, {"z": (0, len(steps), (len(steps),))}, chunk_ops, free)
        c.append("")
    deps = {}
    for name in HELPERS if graph else ():
        exprs, _, assigns = table[name]
        direction = [sp.Symbol(f"w[{i}]", real=True) for i in range(helper_sizes(sizes)[name][0])]
        deps[name] = dependence(assigns, exprs, direction, free)
        if name == "dir_residual":
            lanes = lane_count(sizes, deps, VECTOR_WIDTH[vector])
            lines, n_t = _lane_program_lines(exprs, assigns, gprinter.slots, lanes,
                                             helper_sizes(sizes)[name][0], n_partials, ds,
                                             arrays, chunk_ops, free,
                                             seeded_lanes(sizes, deps, lanes), vector)
            c += lines
        else:
            c += _program_lines(name, exprs, False, assigns, gprinter, ds, arrays,
                                {"r": (0, len(exprs), (len(exprs),))}, chunk_ops, free, primal)
        c.append("")
    time_lines = _time_terms_lines(tau_fwd, tau_sens, gprinter if graph else printer, ds,
                                   arrays, {"tau": (0, len(tau), (len(tau),))}, chunk_ops, free)

    def reads_st(exprs) -> bool:
        return any(free(e) & set(st) for e in exprs if e != 0)

    def tree_kernel(name: str, exprs: list, accumulate: bool, part: str = "",
                    keep: set | None = None) -> list:
        # a kernel of expressions (``part``: the part of it that writes the entries ``keep``,
        # _k_<name>_<part>); a reader of the state terms as a wrapper that computes them
        # where the caller has not
        label = f"{name}_{part}" if part else name
        fname, blocks = f"_k_{label}", layout(name, sizes)
        kept = exprs if keep is None else [e for i, e in enumerate(exprs) if i in keep]
        if st and name in STATE_TERM_READERS and reads_st(kept):
            return (_kernel_lines(name, exprs, accumulate, printer, ds, arrays, blocks,
                                  chunk_ops, fname=f"{fname}_body", label=label, keep=keep)
                    + [""] + _state_term_wrapper(fname, f"{fname}_body", len(st),
                                                 _out_size(name, sizes)))
        # a graph module's tree kernels print unsorted too: sorting the terms of its large
        # rows costs seconds (and the terms' own order is no less deterministic)
        return _kernel_lines(name, exprs, accumulate, gprinter if graph else printer, ds,
                             arrays, blocks, chunk_ops, graph, fname=fname, label=label,
                             keep=keep)

    # the readers' wrappers call it before its definition (kernels print in the spec's order)
    c += ["static " + _SIGNATURE.format(name="_k_state_terms") + ";", ""]
    for spec in KERNELS:
        if spec.name == "state_terms":
            c += _state_terms_lines(st_exprs, printer, ds, arrays, chunk_ops, free) + [""]
            continue
        if spec.name in time_lines:
            c += time_lines[spec.name] + [""]
            continue
        if graph and spec.name in COLUMN_KERNELS:
            if column_helpers(spec.name)[-1] == "dir_residual":
                c += _lane_column_lines(spec.name, sizes, deps, n_partials, lanes, n_t) + [""]
            else:
                c += _column_lines(spec.name, sizes, deps) + [""]
            continue
        exprs, accumulate, assigns = table[spec.name]
        if assigns:
            c += _program_lines(spec.name, exprs, accumulate, assigns, gprinter, ds,
                                arrays, layout(spec.name, sizes), chunk_ops, free, primal)
        else:
            c += tree_kernel(spec.name, exprs, accumulate)
        c.append("")
    out += c_block(c, [_SIGNATURE.format(name=f"_k_{s.name}") + " noexcept nogil"
                       for s in KERNELS]) + [""]
    k_nonzeros = newton_structure(table, sizes, deps if graph else None)
    plan = plan_lu(k_nonzeros, sizes.nm, MAX_UPDATES)
    if plan is not None:
        out += lu_lines(plan) + [""]
        kpos = plan.k_positions()
        out += [f"cdef int _lu_order[{2 * plan.N}]", f"cdef int _lu_kpos[{max(len(kpos), 1)}]",
                f"_lu_order[:] = {list(plan.order) * 2}"]
        out += [f"_lu_kpos[:] = {kpos}"] if kpos else []
        out += [""]
    jumps = has_jumps(list(ds.Ma) + list(ds.g) + list(ds.C))
    steps = plan is not None and not graph and not jumps
    if steps:
        # K's entries that stay the same through a sweep, and the newton kernel in two parts:
        # the steps form those once per call (the kernel's code for them: the same numbers)
        newton = table["newton"][0]
        fixed = fixed_entries(newton, ds, n_w, free)
        kept = set(fixed)
        # without fixed entries the rest is the kernel (called, not printed twice)
        rest = ([_KERNEL_HEAD.format(name="_k_newton_rest"), "    _k_newton(x, w, out);", "}"]
                if not kept else
                tree_kernel("newton", newton, False, "rest",
                            {i for i, e in enumerate(newton) if e != 0} - kept))
        parts = [tree_kernel("newton", newton, False, "fixed", kept), [""], rest, [""]]
        out += c_block(compiled_steps_lines(sizes, k_nonzeros, plan, fixed,
                                            [ln for part in parts for ln in part]), [
            "long sd_forward_steps(symdae_steps* r, long i, long last) noexcept nogil",
            "long sd_adjoint_steps(symdae_adjoint_steps* r, long i, long stop) noexcept nogil",
            "long sd_tangent_steps(symdae_tangent_steps* r, long i, long last) noexcept nogil"]
                       ) + [""]
    # a graph module's derivative kernels write what its column passes reach: its products
    # keep to the core's lists
    tangent = tangent_lines([e != 0 for e in table["jacobians"][0]],
                            [e != 0 for e in table["output_jacobians"][0]],
                            ds.n, ds.m, sizes.n_s) if not graph else None
    if tangent is not None:
        out += tangent.code + [""]
    out += ["cdef symdae_model _model", "_model.abi_version = SYMDAE_ABI_VERSION"]
    out += [f"_model.{key} = {sz[key]}"
            for key in ("n", "m", "n_p", "n_u", "n_s", "n_tau", "n_st")]
    out.append(f"_model.jumps = {int(jumps)}")
    out.append(f"_model.refresh_horizon = "
               f"{REFRESH_HORIZON_GRAPH if graph else REFRESH_HORIZON}")
    def read_exprs(name: str) -> list:
        # what the kernel evaluates: its expressions and assignments, or for a column kernel
        # those of the helper programs it calls; a reader of the state terms, without
        # them, evaluates them too
        if name == "state_terms":
            return list(st_exprs)
        names = column_helpers(name) if graph and name in COLUMN_KERNELS else (name,)
        extra: list = st_exprs if st and reads_st(table[name][0]) else []
        return [e for k in names for e in list(table[k][0]) + [f for _, f in table[k][2]]
                ] + list(extra)

    for spec in KERNELS:
        entry = f"_model.kernel[SYMDAE_{spec.name.upper()}]"
        reads = (0 if spec.internal and spec.name != "state_terms"
                 else tau_reads(read_exprs(spec.name), tau, len(tau_fwd)))
        out += [f"{entry}.fn = _k_{spec.name}",
                f"{entry}.out_size = {_out_size(spec.name, sizes)}",
                f"{entry}.w_size = {weight_size(spec.name, sizes)}",
                f"{entry}.accumulate = {int(spec.accumulate)}",
                f"{entry}.tau = {reads}"]
    if plan is not None:
        out += ["_model.lu_order = _lu_order", "_model.lu_kpos = _lu_kpos",
                f"_model.lu_nk = {len(plan.nonzeros)}", "_model.lu_factor = written_lu_factor",
                "_model.lu_solve = written_lu_solve", "_model.lu_solve_t = written_lu_solve_t",
                "_model.lu_solve_rows = written_lu_solve_rows"]
    else:
        out += ["_model.lu_order = NULL", "_model.lu_kpos = NULL", "_model.lu_nk = 0",
                "_model.lu_factor = NULL", "_model.lu_solve = NULL", "_model.lu_solve_t = NULL",
                "_model.lu_solve_rows = NULL"]
    out.append("_model.forward_steps = " + ("sd_forward_steps" if steps else "NULL"))
    out.append("_model.adjoint_steps = " + ("sd_adjoint_steps" if steps else "NULL"))
    out.append("_model.tangent_steps = " + ("sd_tangent_steps" if steps else "NULL"))
    if tangent is not None:
        out += tangent.table
    else:
        out += [f"_model.tangent.nnz[{k}] = 0" for k in range(3)]
        out += [f"_model.tangent.fn[{nd}][{k}] = NULL"
                for nd in range(TANGENT_ND + 1) for k in range(3)]
    out += ['kernels = PyCapsule_New(<void*>&_model, b"symdae.model", NULL)', ""]
    return "\n".join(out)
