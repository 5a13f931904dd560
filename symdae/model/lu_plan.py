"""The Newton matrix's LU written out for one model: a pivot order chosen from K's structure
when the kernels are generated, and straight-line factorisation and solves for it.

The compiled core factorises K of eq. (16) with a sparse LU whose orders it fixes per run
(symdae/simulation/core/sparse.pxd): generic loops over index lists, which for the small
systems of most mechanisms cost more than the arithmetic. A kernel module can carry its own
code for one pair of orders; the core uses it whenever a run's orders are those (it proposes
them at a run's first factorisation and keeps them where that factorisation passes its
pivot check), and falls back to its own analysis otherwise. The code performs the core's
``refactor``, ``solve`` and ``solve_t`` operation for operation on the same storage (B: the
factors of K permuted, L unit lower below the diagonal, U above it and the reciprocals of
its pivots on it), so a factorisation is the same numbers whichever code made it, and the
two codes can be mixed in one run.

The order: symmetric (rows as columns), by minimum degree on the structure of K + K^T, among
the columns whose diagonal entry is structurally nonzero at that point of the elimination. A
multiplier's column has a zero diagonal until a coordinate it constrains has been eliminated
(which fills it with the Schur complement's entry), so it waits for one. The dynamic block is
dominated by c_m M for small h, where diagonal pivots are the stable choice; the core's pivot
check (KLU's: each pivot at least 1e-3 of its column) rejects the order where they are not.
"""
from __future__ import annotations

from dataclasses import dataclass

from .printer import c_block

__all__ = ["LUPlan", "plan_lu", "lu_lines", "factor_lines", "split_factor_lines",
           "solve_block_lines", "MAX_UPDATES", "MAX_BLOCK_SOLVE", "MAX_INLINE_SOLVE_T"]

# the straight-line code grows with the elimination's updates; above this many the module
# keeps to the core's loops. The chain of 80 pendula (240 x 240, 1738 updates) compiles 4 s
# longer (13 s) for a step 17 % faster; the 20-link pendulum on a cart (a dense 21 x 21
# matrix, 2870 updates) compiled 8 s longer for a step 2 % faster, where the kernels dominate
MAX_UPDATES = 2000
# the compiled tangent steps inline the solve for all directions into a copy of their step per
# direction count (8 copies of the substitutions): above this many multiply-subtracts they
# call written_lu_solve_rows per direction instead. With all of them, the chain of 20 pendula
# (308) compiled 26 % longer, the chain of 80 46 %
MAX_BLOCK_SOLVE = 128
# the compiled adjoint step inlines written_lu_solve_t (SYMDAE_STEP_INLINE, one copy) up to
# this many multiply-subtracts: its adjoint sweep, against the solve called, 0.87-0.88 times
# as long on the redundant cart pendulum (10), 0.975 on the engine mount (8), 0.96-1.03 on the
# spring chain (38); the four-cylinder TVD's (122) gained 1-4 % and took 5-14 % longer to
# compile (two runs of alternating cold builds), so the largest solves stay calls
MAX_INLINE_SOLVE_T = 64


@dataclass(frozen=True)
class LUPlan:
    """One pivot order of an N x N matrix with structure ``nonzeros`` (flat row-major indices)
    and the structure of its factors in that order (positions in the permuted matrix)."""

    N: int
    order: tuple          # row and column k of the permuted matrix: row/column order[k] of K
    nonzeros: tuple       # K's structural nonzeros, flat, in the permuted row-major order
    lower: tuple          # per k: the rows i > k with L[i, k] structurally nonzero
    upper: tuple          # per k: the columns j > k with U[k, j] structurally nonzero

    @property
    def updates(self) -> int:
        """Multiply-subtract updates of one factorisation."""
        return sum(len(lo) * len(up) for lo, up in zip(self.lower, self.upper))

    @property
    def solve_updates(self) -> int:
        """Multiply-subtracts of one solve (its forward and back substitutions)."""
        return sum(len(lo) + len(up) for lo, up in zip(self.lower, self.upper))

    def k_positions(self) -> list:
        """Where each of ``nonzeros`` (positions in the permuted matrix) lies in K, flat: what
        the code reads, and the structure the core compares with its own (lu_kpos)."""
        N, order = self.N, self.order
        return [order[f // N] * N + order[f % N] for f in self.nonzeros]

    def factor_positions(self) -> list:
        """Every position of B the factors use (the core's zpos), row-major."""
        N = self.N
        pos = set(k * N + k for k in range(N))
        for k in range(N):
            pos.update(i * N + k for i in self.lower[k])
            pos.update(k * N + j for j in self.upper[k])
        return sorted(pos)


def plan_lu(nonzeros, N: int, max_updates: int | None = None) -> LUPlan | None:
    """The order for K's structure (flat indices of its structural nonzeros, see the module's
    docstring), or None where no column has a structurally nonzero diagonal left (the core
    then analyses the values) or the elimination needs more than ``max_updates`` updates
    (found as it goes: a large dense K would otherwise cost its full elimination here)."""
    S = [[False] * N for _ in range(N)]
    for f in nonzeros:
        S[f // N][f % N] = True
    remaining = list(range(N))
    order = []
    updates = 0
    for _ in range(N):
        best, best_deg = -1, -1
        for j in remaining:
            if not S[j][j]:
                continue
            deg = sum(1 for i in remaining if i != j and (S[i][j] or S[j][i]))
            if best < 0 or deg < best_deg:
                best, best_deg = j, deg
        if best < 0:
            return None
        order.append(best)
        remaining.remove(best)
        rows = [i for i in remaining if S[i][best]]
        cols = [j for j in remaining if S[best][j]]
        updates += len(rows) * len(cols)       # this pivot's: L's column times U's row
        if max_updates is not None and updates > max_updates:
            return None
        for i in rows:
            for j in cols:
                S[i][j] = True
    return _symbolic(nonzeros, N, tuple(order))


def _symbolic(nonzeros, N: int, order: tuple) -> LUPlan:
    """The factors' structure under ``order`` (as the core's sparse.pxd symbolic computes it)."""
    inv = {r: k for k, r in enumerate(order)}
    P = [[False] * N for _ in range(N)]
    for f in nonzeros:
        P[inv[f // N]][inv[f % N]] = True
    permuted = tuple(i * N + j for i in range(N) for j in range(N) if P[i][j])
    for k in range(N):
        P[k][k] = True
        cols = [j for j in range(k + 1, N) if P[k][j]]
        for i in range(k + 1, N):
            if P[i][k]:
                for j in cols:
                    P[i][j] = True
    lower = tuple(tuple(i for i in range(k + 1, N) if P[i][k]) for k in range(N))
    upper = tuple(tuple(j for j in range(k + 1, N) if P[k][j]) for k in range(N))
    return LUPlan(N, order, permuted, lower, upper)


def _substitutions(plan: LUPlan) -> list:
    """The forward and back substitutions of the solve on x0 .. x{N-1} (in the permuted
    order), every multiplier applied: written_lu_solve's operations without its zero tests."""
    N, lines = plan.N, []

    def b(i, j):
        return f"B[{i * N + j}]"

    for k in range(N):
        if plan.lower[k]:
            lines += [f"s = x{k};"] + [f"x{i} -= {b(i, k)} * s;" for i in plan.lower[k]]
    for k in range(N - 1, -1, -1):
        lines += [f"s = x{k};"] + [f"s -= {b(k, j)} * x{j};" for j in plan.upper[k]]
        lines += [f"x{k} = s * {b(k, k)};"]
    return lines


@dataclass(frozen=True)
class _Op:
    """One statement of the factorisation: C text with ``{t}`` its target and ``{0}``, ``{1}``
    its operands (locations: ``B[p]``, ``K[k]``, or the scalars piv, cmax, inv, l); ``target``
    None for a check; ``self_read`` where the statement reads its target too; ``value`` the
    C constant the result is (0.0), or ``copy`` where it is its first operand's value."""

    code: str
    target: str | None
    operands: tuple = ()
    self_read: bool = False
    value: str | None = None
    copy: bool = False
    load: bool = False


def _factor_ops(plan: LUPlan) -> list:
    """The core's refactor for ``plan``'s order as a list of statements (_Op), every index a
    constant: K's entries into the permuted B (the fill zeroed), then per pivot its check
    (KLU's: at least tol times its column's largest entry), its reciprocal on the diagonal,
    L's column and the update of the trailing entries."""
    N = plan.N

    def b(i, j):
        return f"B[{i * N + j}]"

    inK = set(plan.nonzeros)
    ops = [_Op("{t} = 0.0;", f"B[{p}]", value="0.0")
           for p in plan.factor_positions() if p not in inK]
    # 0 x (an infinity or a NaN) is a NaN: fin's one test covers every entry loaded
    ops += [_Op("{t} = {0}; fin += 0.0 * {t};", f"B[{p}]", (f"K[{k}]",), copy=True, load=True)
            for p, k in zip(plan.nonzeros, plan.k_positions())]
    # a subnormal pivot's reciprocal overflows: the core's dense LU divides by it instead
    overflow = _Op("if (fabs({0}) == HUGE_VAL) return SYMDAE_LU_UNSTABLE;", None, ("inv",))
    for k in range(N):
        lower, upper, d = plan.lower[k], plan.upper[k], b(k, k)
        if not lower:
            # nothing below it: the check's column maximum is 0
            ops += [_Op(f"if ({{0}} == 0.0) return {k + 1};", None, (d,)),
                    _Op("{t} = 1.0 / {0};", "inv", (d,)), overflow,
                    _Op("{t} = {0};", d, ("inv",), copy=True)]
            continue
        ops += [_Op("{t} = {0};", "piv", (d,), copy=True), _Op("{t} = 0.0;", "cmax", value="0.0")]
        # Cython's max(cmax, x) in the core's loop: x where x > cmax
        ops += [_Op("if (fabs({0}) > {t}) {t} = fabs({0});", "cmax", (b(i, k),), self_read=True)
                for i in lower]
        ops += [_Op(f"if ({{0}} == 0.0) return {{1}} > 0.0 ? SYMDAE_LU_UNSTABLE : {k + 1};",
                    None, ("piv", "cmax")),
                _Op("if (fabs({0}) < tol * {1}) return SYMDAE_LU_UNSTABLE;", None,
                    ("piv", "cmax")),
                _Op("{t} = 1.0 / {0};", "inv", ("piv",)), overflow,
                _Op("{t} = {0};", d, ("inv",), copy=True)]
        for i in lower:
            ops += [_Op("{t} = {0} * {1};", "l", (b(i, k), "inv")),
                    _Op("{t} = {0};", b(i, k), ("l",), copy=True)]
            ops += [_Op("{t} -= {0} * {1};", b(i, j), ("l", b(k, j)), self_read=True)
                    for j in upper]
    return ops


def _render(op: _Op, operands) -> str:
    return "    " + op.code.format(*operands, t=op.target)


def _with_nan_test(body: list, loads: int) -> list:
    """``body`` with fin's test after its last load (loads: how many lines load K)."""
    return body[:loads] + (["    if (fin != fin) return -1;"] if loads else []) + body[loads:]


def factor_lines(plan: LUPlan) -> list:
    """C lines of ``written_lu_factor(K, B, tol)``: _factor_ops in order."""
    ops = _factor_ops(plan)
    body = [_render(op, op.operands) for op in ops]
    loads = max((i + 1 for i, op in enumerate(ops) if op.load), default=0)
    return (["static int written_lu_factor(const double *K, double *B, double tol) {",
             "    double piv, cmax, l, inv, fin = 0.0;"] + _with_nan_test(body, loads)
            + ["    return 0;", "}"])


@dataclass
class _Version:
    """One value a location holds: whether it depends on K's fixed entries only (``fixed``),
    and where the per-step code reads it if so: ``ref`` (a constant or one of K's fixed
    entries) or ``stash`` (its slot in c)."""

    fixed: bool
    ref: str | None = None
    stash: int | None = None


def split_factor_lines(plan: LUPlan, fixed) -> tuple:
    """``written_lu_factor`` in two parts for a sweep in which the entries ``fixed`` of K (flat
    indices of K) stay the same, with the number of doubles the parts pass between them:

    - ``written_lu_factor_fixed(K, B, c, tol)`` performs the statements whose operands all
      derive from those entries alone (their pivots' checks included) into B, and keeps in c
      the values of them the rest reads; once per sweep, with K's fixed entries written;
    - ``written_lu_factor_rest(K, c, B, tol)`` performs the others, in order, for each K
      whose other entries change, on the same B (whose entries that the rest never writes
      hold the first part's results) and with K's fixed entries unchanged.

    A value the rest reads as it stood before a statement it performs (a trailing entry that
    takes its first varying update, cmax after fixed entries) it reads from K, a constant or
    c. So the two give the whole factorisation's numbers, operation for operation; its
    status too (nonzero where it fails) once the first part has returned 0. Without fixed
    entries the rest is written_lu_factor (called: the same code twice would cost a large
    model's build time for nothing)."""
    fixed = set(fixed)
    first_head = "static int written_lu_factor_fixed(const double *K, double *B, double *c, " \
        "double tol) {"
    rest_head = "static int written_lu_factor_rest(const double *K, const double *c, double *B, " \
        "double tol) {"
    if not fixed:
        return ([first_head, "    return 0;", "}", "",
                 rest_head, "    return written_lu_factor(K, B, tol);", "}"], 0)
    ops = _factor_ops(plan)
    versions, cur, plan_ops, n_stash = [], {}, [], 0

    def version(loc):
        if loc not in cur:                      # one of K's entries: the kernel's inputs
            k = int(loc[2:-1])
            versions.append(_Version(k in fixed, loc if k in fixed else None))
            cur[loc] = len(versions) - 1
        return cur[loc]

    for op in ops:
        reads = [version(o) for o in op.operands]
        prev = cur.get(op.target) if op.target else None
        is_fixed = all(versions[v].fixed for v in reads + ([prev] if op.self_read else []))
        if not is_fixed:
            for v in reads + ([prev] if op.self_read else []):
                if versions[v].fixed and versions[v].ref is None and versions[v].stash is None:
                    versions[v].stash, n_stash = n_stash, n_stash + 1
        if op.target is not None:
            if is_fixed and op.target.startswith("B[") and prev is not None \
                    and not versions[prev].fixed:
                # the rest would leave its own value there, not this one
                raise AssertionError(f"{op.target}: a fixed value after a varying one")
            ref = (versions[reads[0]].ref if op.copy else op.value) if is_fixed else None
            versions.append(_Version(is_fixed, ref))
            cur[op.target] = len(versions) - 1
        plan_ops.append((op, is_fixed, reads, prev, cur.get(op.target) if op.target else None))

    def where(v, loc):
        x = versions[v]
        if not x.fixed:
            return loc
        return x.ref if x.ref is not None else f"c[{x.stash}]"

    first, rest = [], []
    loads = {"first": 0, "rest": 0}
    # the scalars (piv, cmax, l, inv) each sets
    scalars: dict[str, set[str]] = {"first": set(), "rest": set()}
    for op, is_fixed, reads, prev, new in plan_ops:
        if op.target is not None and not op.target.startswith("B["):
            scalars["first" if is_fixed else "rest"].add(op.target)
        if is_fixed:
            first.append(_render(op, op.operands))
            if new is not None and versions[new].stash is not None:
                first.append(f"    c[{versions[new].stash}] = {op.target};")
            loads["first"] = len(first) if op.load else loads["first"]
            continue
        # (a self-reading statement has a previous version: the first loop indexed it)
        if op.self_read and prev is not None and versions[prev].fixed:
            rest.append(f"    {op.target} = {where(prev, op.target)};")
        rest.append(_render(op, [where(v, loc) for v, loc in zip(reads, op.operands)]))
        loads["rest"] = len(rest) if op.load else loads["rest"]

    def head(line, part):
        names = [s for s in ("piv", "cmax", "l", "inv") if s in scalars[part]]
        if scalars[part] - set(names):
            raise AssertionError(f"scalars {sorted(scalars[part] - set(names))} undeclared")
        names += ["fin = 0.0"] if loads[part] else []
        return [line] + (["    double " + ", ".join(names) + ";"] if names else [])

    first = _with_nan_test(first, loads["first"])
    rest = _with_nan_test(rest, loads["rest"])
    lines = (head(first_head, "first") + first + ["    return 0;", "}", ""]
             + head(rest_head, "rest") + rest + ["    return 0;", "}"])
    return lines, n_stash


def lu_lines(plan: LUPlan) -> list:
    """Cython lines declaring the module's ``written_lu_factor``, ``written_lu_solve``,
    ``written_lu_solve_rows`` and ``written_lu_solve_t`` (symdae_kernels.h states their
    contract), written in C inside the declaration (Cython's statement-by-statement C for
    this straight-line code is 20 times as long and doubles what the C compiler spends on
    it): the core's refactor, solve and solve_t for ``plan``'s order, with every index a
    constant."""
    N, order = plan.N, plan.order

    def b(i, j):
        return f"B[{i * N + j}]"

    c = [f"/* the Newton matrix's LU for the pivot order {list(order)} ({plan.updates} "
         "updates; symdae/model/lu_plan.py) */"] + factor_lines(plan) + [""]
    xs = ", ".join(f"x{k}" for k in range(N))
    # the solve twice: for one vector, and for direction d of nd right-hand sides stored by
    # row (the tangent sweep's, b[k nd]: the same operations on the strided entries)
    for name, args, at in (("written_lu_solve", "", ""),
                           ("written_lu_solve_rows", ", int nd", " * nd")):
        c += [f"static void {name}(const double *B, double *b{args}) {{",
              f"    double s, {xs};"]
        c += [f"    x{k} = b[{order[k]}{at}];" for k in range(N)]
        for k in range(N):
            if plan.lower[k]:
                c += [f"    s = x{k};", "    if (s != 0.0) {"]
                c += [f"        x{i} -= {b(i, k)} * s;" for i in plan.lower[k]]
                c += ["    }"]
        for k in range(N - 1, -1, -1):
            c += [f"    s = x{k};"]
            c += [f"    s -= {b(k, j)} * x{j};" for j in plan.upper[k]]
            c += [f"    x{k} = s * {b(k, k)};"]
        c += [f"    b[{order[k]}{at}] = x{k};" for k in range(N)]
        c += ["}", ""]
    inline = "SYMDAE_STEP_INLINE " if plan.solve_updates <= MAX_INLINE_SOLVE_T else ""
    c += [inline + "static void written_lu_solve_t(const double *B, double *b) {",
          f"    double s, {xs};"]
    c += [f"    x{k} = b[{order[k]}];" for k in range(N)]
    for k in range(N):
        c += [f"    s = x{k} * {b(k, k)}; x{k} = s;"]
        if plan.upper[k]:
            c += ["    if (s != 0.0) {"]
            c += [f"        x{j} -= {b(k, j)} * s;" for j in plan.upper[k]]
            c += ["    }"]
    for k in range(N - 1, -1, -1):
        if plan.lower[k]:
            c += [f"    s = x{k};"]
            c += [f"    s -= {b(i, k)} * x{i};" for i in plan.lower[k]]
            c += [f"    x{k} = s;"]
    c += [f"    b[{order[k]}] = x{k};" for k in range(N)]
    c += ["}"]
    return c_block(c, [
        "int written_lu_factor(const double* K, double* B, double tol) noexcept nogil",
        "void written_lu_solve(const double* B, double* b) noexcept nogil",
        "void written_lu_solve_rows(const double* B, double* b, int nd) noexcept nogil",
        "void written_lu_solve_t(const double* B, double* b) noexcept nogil"])


def solve_block_lines(plan: LUPlan) -> list:
    """C lines of ``written_lu_solve_block(B, b, nd)``: the solve of nd right-hand sides stored
    by row (b[k nd + d]) at once, for the compiled tangent steps (compiled_steps.h, where nd
    is a constant): two directions to a vector of a pair, with every multiplier applied,
    written_lu_solve_rows' operations per direction but for its tests for a zero (x - B s
    with s = 0 is x for every finite B and x, up to the sign of a zero); above
    MAX_BLOCK_SOLVE multiply-subtracts, written_lu_solve_rows per direction. After lu_lines'
    code and vector_ops.h."""
    N, order = plan.N, plan.order
    xs = ", ".join(f"x{k}" for k in range(N))
    body = _substitutions(plan)
    c = ["#if defined(__GNUC__)", "__attribute__((always_inline))", "#endif",
         "static inline void written_lu_solve_block(const double *restrict B, "
         "double *restrict b, const int nd) {",
         "    int d = 0;"]
    if plan.solve_updates > MAX_BLOCK_SOLVE:
        return c + ["    for (; d < nd; d++)", "        written_lu_solve_rows(B, b + d, nd);", "}"]
    c += ["    for (; d + 1 < nd; d += 2) {", f"        sd_pair s, {xs};"]
    c += [f"        x{k} = sd_load_pair(b + {order[k]} * nd + d);" for k in range(N)]
    c += ["        " + line for line in body]
    c += [f"        sd_store_pair(b + {order[k]} * nd + d, x{k});" for k in range(N)]
    c += ["    }", "    for (; d < nd; d++) {", f"        double s, {xs};"]
    c += [f"        x{k} = b[{order[k]} * nd + d];" for k in range(N)]
    c += ["        " + line for line in body]
    c += [f"        b[{order[k]} * nd + d] = x{k};" for k in range(N)]
    c += ["    }", "}"]
    return c
