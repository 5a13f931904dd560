"""The written-out LU's pivot order and factor structure (symdae/model/lu_plan.py), checked
against an independent dense symbolic elimination, and what the emitter makes of it (no
compiler needed; tests/simulation/test_model_lu.py runs the compiled code)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import symdae
from symdae.model import emit, lu_plan
from symdae.model.lu_plan import lu_lines, plan_lu, solve_block_lines


def structure(rows: list) -> tuple:
    """Flat nonzero indices and N of a 0/1 matrix given by rows of strings."""
    N = len(rows)
    return [i * N + j for i, r in enumerate(rows) for j, c in enumerate(r) if c == "x"], N


def eliminate(nz: list, N: int, order) -> tuple:
    """Dense symbolic elimination in the order: the filled structure of the permuted matrix
    and, per step, whether its pivot was structurally nonzero before the step."""
    S = np.zeros((N, N), bool)
    for f in nz:
        S[f // N, f % N] = True
    P = S[np.ix_(order, order)].copy()
    pivots = []
    for k in range(N):
        pivots.append(bool(P[k, k]))
        P[k, k] = True
        P[k + 1:, k + 1:] |= np.outer(P[k + 1:, k], P[k, k + 1:])
    return P, pivots


# a saddle point: 4 coordinates (1 and 2 coupled), 2 constraints; the constraint columns
# (4, 5) have zero diagonals
KKT = ["xx..x.",
       "xx..xx",
       "..x..x",
       "...x..",
       "xx....",
       ".xx..."]


def test_every_pivot_of_the_order_is_structurally_nonzero_when_it_is_taken():
    nz, N = structure(KKT)
    plan = plan_lu(nz, N)
    _, pivots = eliminate(nz, N, plan.order)
    assert all(pivots), (plan.order, pivots)
    assert sorted(plan.order) == list(range(N))
    # a multiplier's column waits for a coordinate it constrains
    pos = {c: k for k, c in enumerate(plan.order)}
    assert pos[4] > min(pos[0], pos[1]) and pos[5] > min(pos[1], pos[2])


def test_the_factor_structure_is_the_dense_elimination_s():
    for rows in (KKT, ["x.x", ".xx", "xx."], ["xxxx", "xxxx", "xxxx", "xxxx"]):
        nz, N = structure(rows)
        plan = plan_lu(nz, N)
        P, _ = eliminate(nz, N, plan.order)
        for k in range(N):
            assert plan.lower[k] == tuple(i for i in range(k + 1, N) if P[i, k])
            assert plan.upper[k] == tuple(j for j in range(k + 1, N) if P[k, j])
        assert plan.factor_positions() == [int(f) for f in np.flatnonzero(P)]
        inv = np.argsort(plan.order)
        assert sorted(plan.nonzeros) == sorted(int(inv[f // N] * N + inv[f % N]) for f in nz)
        assert sorted(plan.k_positions()) == sorted(nz)
        assert plan.updates == sum(len(lo) * len(up) for lo, up in zip(plan.lower, plan.upper))


def test_minimum_degree_keeps_an_arrow_matrix_free_of_fill():
    # the hub (column 0) couples to everyone: eliminated first it fills everything; after
    # all leaves but one (then it ties with that leaf) it fills nothing
    N = 6
    rows = ["x" * N] + ["x" + "." * (i - 1) + "x" + "." * (N - 1 - i) for i in range(1, N)]
    nz, _ = structure(rows)
    plan = plan_lu(nz, N)
    assert 0 in plan.order[-2:]
    assert len(plan.factor_positions()) == len(nz)
    assert plan.updates == N - 1


def test_the_plan_stops_at_its_update_limit():
    nz, N = structure(["xxxx", "xxxx", "xxxx", "xxxx"])
    full = plan_lu(nz, N)
    assert full.updates == 9 + 4 + 1
    assert plan_lu(nz, N, max_updates=full.updates) == full
    assert plan_lu(nz, N, max_updates=full.updates - 1) is None


def test_no_order_without_a_structurally_nonzero_diagonal():
    # every diagonal zero and none filled by an elimination: the core analyses the values
    assert plan_lu(structure([".x", "x."])[0], 2) is None
    assert plan_lu(structure([".xx", "x..", "x.."])[0], 3) is None


def test_the_written_code_names_every_factor_entry_and_solves_in_order():
    nz, N = structure(KKT)
    plan = plan_lu(nz, N)
    text = "\n".join(lu_lines(plan))
    for fn in ("written_lu_factor", "written_lu_solve", "written_lu_solve_t"):
        kind = "int" if fn == "written_lu_factor" else "void"
        assert f"static {kind} {fn}(" in text          # the C definition
        assert f"    {kind} {fn}(" in text             # its Cython declaration
    # every update of the elimination is one line
    updates = [ln for ln in text.splitlines() if " -= l * B[" in ln]
    assert len(updates) == plan.updates
    # the solves read b in the order and write it back there
    for k, c in enumerate(plan.order):
        assert f"x{k} = b[{c}];" in text and f"b[{c}] = x{k};" in text


def test_the_block_solve_applies_every_multiplier_to_pairs_then_one_direction(monkeypatch):
    nz, N = structure(KKT)
    plan = plan_lu(nz, N)
    text = "\n".join(solve_block_lines(plan))
    pairs, single = text.split("for (; d < nd; d++) {")
    # the forward substitution's multipliers without the rows solve's zero tests, then the
    # back substitution's, in each loop
    mults = [f"x{i} -= B[{i * N + k}] * s;" for k in range(N) for i in plan.lower[k]]
    backs = [f"s -= B[{k * N + j}] * x{j};" for k in range(N - 1, -1, -1) for j in plan.upper[k]]
    for part in (pairs, single):
        lines = [ln.strip() for ln in part.splitlines()]
        assert [ln for ln in lines if ln.startswith("x") and " -= " in ln] == mults
        assert [ln for ln in lines if ln.startswith("s -= ")] == backs
        assert "if (s != 0.0)" not in part
    for k, c in enumerate(plan.order):
        assert f"x{k} = sd_load_pair(b + {c} * nd + d);" in pairs
        assert f"sd_store_pair(b + {c} * nd + d, x{k});" in pairs
        assert f"x{k} = b[{c} * nd + d];" in single and f"b[{c} * nd + d] = x{k};" in single
    # above the limit: the rows solve per direction
    monkeypatch.setattr(lu_plan, "MAX_BLOCK_SOLVE", len(mults) + len(backs) - 1)
    text = "\n".join(solve_block_lines(plan))
    assert "written_lu_solve_rows(B, b + d, nd);" in text and "sd_pair" not in text


def test_the_emitter_writes_the_lu_into_the_table_or_leaves_it_out(monkeypatch):
    model, _ = symdae.load_model("engine_mount")
    ds = symdae.derive(model)
    source = symdae.emit_cython(ds)
    assert "_model.lu_factor = written_lu_factor" in source
    assert "static int written_lu_factor(" in source
    monkeypatch.setattr(emit, "MAX_UPDATES", -1)
    source = symdae.emit_cython(ds)
    assert "_model.lu_factor = NULL" in source
    assert "written_lu_factor" not in source


@pytest.mark.parametrize("graph", [False, True])
def test_the_planned_structure_is_what_the_newton_kernel_writes(graph):
    # tree and graph kernels write the same entries of K (the plan reads them from either)
    model, _ = symdae.load_model("slider_crank")
    ds = symdae.derive(model)
    source = symdae.emit_cython(ds, graph=graph)
    # a tree kernel reading the state terms writes K in its body (emit.py)
    head = "_k_newton_body(" if "_k_newton_body(" in source else "_k_newton("
    kernel = source.split(f"static void {head}")[1].split("\n    }\n")[0]
    written = sorted({int(m) for m in re.findall(r"^\s+out\[(\d+)\] [+-]?= ", kernel, re.M)})
    nm = ds.n + ds.m
    plan_line = next(ln for ln in source.splitlines() if ln.startswith("_lu_kpos[:] = "))
    kpos = sorted(int(x) for x in plan_line.split("[", 2)[2].rstrip("]").split(","))
    assert kpos == written
    assert all(0 <= f < nm * nm for f in kpos)
