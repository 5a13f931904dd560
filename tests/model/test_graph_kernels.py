"""Graph kernels (derivatives on the common-subexpression graph, graph_kernels.py) against the
tree kernels: every kernel of every bundled model in test_kernels.py, compiled in graph form,
equals the lambdified tree expressions of the NumPy reference at the same states and weights
(the tree kernels are checked against finite differences there), with the same tolerance
RTOL_REF (|A - B| <= 1e-12 (|B| + F), F the entry's term size). The large cart pendulum takes
the graph form by default; its Jacobians are checked against finite differences of its own
residual kernel.
"""
from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from test_kernel_spec import check_declared_time_terms, check_time_terms_are_all_of_them
from test_kernels import MODELS, case, central, check_against_reference

import symdae
from symdae.compilation.cache import build_cached, cache_key
from symdae.model.emit import ColumnPass, color_columns, emit_cython, use_graph
from symdae.model.graph import adjoint, straight_line, tangent
from symdae.model.graph_kernels import COLUMN_KERNELS
from symdae.model.kernels import KERNELS
from symdae.simulation.backends.compiled import CompiledBackend

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def backend_in_form(model, graph: bool = True) -> CompiledBackend:
    """The model's kernels compiled in graph or tree form, whatever use_graph would pick (a
    cache entry of its own per form)."""
    form = "graph" if graph else "tree"

    def make_source():
        return emit_cython(symdae.derive(model), definition_hash=model.definition_hash(),
                           graph=graph), {}

    key = cache_key(f"{form} kernels\0" + model.definition())
    module, _ = build_cached(f"{model.name}_{form}", key, make_source)
    return CompiledBackend(module)


@functools.cache
def graph_case(name: str) -> CompiledBackend:
    return backend_in_form(case(name).model)


# with switches (Piecewise, sign, Max): conditions shared as subexpressions
NONSMOOTH = ["end_stop", "belt_friction"]


@pytest.mark.parametrize("name", MODELS + NONSMOOTH)
def test_graph_kernels_equal_tree_kernels(name):
    c, g = case(name), graph_case(name)
    for spec in KERNELS:
        if not spec.internal:
            check_against_reference(c, spec.name, g.evaluate, "graph kernel")


@pytest.mark.parametrize("name", ["engine_mount", "slider_crank"])
def test_graph_kernels_declare_the_time_terms_they_read(name):
    """A column kernel reads the time terms of the helper programs it calls, a program kernel
    those of its assignments: with the undeclared ones NaN, every kernel's output is exact;
    the sensitivity kernel writes all of them, the forward ones as the forward kernel does."""
    c = case(name)
    check_declared_time_terms(graph_case(name).kernels, c.sizes, c.model.nominal_values)
    check_time_terms_are_all_of_them(graph_case(name).kernels, c.sizes, c.model.nominal_values)


def test_tangent_and_adjoint_are_the_chain_rule():
    """On a two-level program, by hand: with r = x y + 1, f = sin(r) + r^3 has
    df = (cos(r) + 3 r^2) (y dx + x dy); the gradient of w f is w (cos(r) + 3 r^2) (y, x)."""
    x, y, dx, dy, w = sp.symbols("x y dx dy w", real=True)
    r = x * y + 1
    f = sp.sin(r) + r ** 3
    prog, (red,) = straight_line([f])
    assert prog.assignments, "x y + 1 is a common subexpression"
    inner = sp.cos(r) + 3 * r ** 2

    def expand(e, extra):
        for z, rhs in reversed(prog.assignments + extra):
            e = e.xreplace({z: rhs})
        return sp.expand(e)

    new, (df,) = tangent(prog, [red], {x: dx, y: dy})
    assert expand(df, new) == sp.expand(inner * (y * dx + x * dy))
    new, grad = adjoint(prog, [red], [w], [x, y])
    assert [expand(gk, new) for gk in grad] == [sp.expand(w * inner * y),
                                                  sp.expand(w * inner * x)]


@functools.cache
def cart_pendulum(n: int):
    sys.path.insert(0, str(BENCH))
    try:
        from bench_mechanics import pendulum_on_cart
    finally:
        sys.path.remove(str(BENCH))
    return pendulum_on_cart(n)


@functools.cache
def cart_derived(n: int):
    """The n-link cart's DerivedSystem, derived once for the cases that read it."""
    return symdae.derive(cart_pendulum(n))


@functools.cache
def cart_graph_source(n: int) -> str:
    """The n-link cart's module text in graph form, emitted once for the cases that read it."""
    return emit_cython(cart_derived(n), graph=True)


def test_cart_pendulum_takes_graph_kernels_whose_jacobians_match_fd():
    model = cart_pendulum(5)
    assert use_graph(cart_derived(5))
    system = symdae.compile_model(model)
    k = system.backend
    n, n_p = model.n, len(model.parameters)
    rng = np.random.default_rng(4)
    q, v, a = (rng.uniform(-1, 1, n) for _ in range(3))
    lam, u = np.zeros(0), np.zeros(0)
    p = system.parameter_vector()

    def res(q_, v_, p_):
        return k.evaluate("residual", 0.1, q_, v_, a, lam, p_, u)

    J = k.evaluate("jacobians", 0.1, q, v, a, lam, p, u)
    JM, JG, GV = (J[i * n * n:(i + 1) * n * n].reshape(n, n) for i in range(3))
    h = 1e-6 * np.ones(n)
    fd_q = central(lambda x: res(x, v, p), q, h)
    fd_v = central(lambda x: res(q, x, p), v, h)
    scale = np.abs(fd_q).max()
    np.testing.assert_allclose(np.vstack([JM, JG]), fd_q, rtol=1e-6, atol=1e-8 * scale)
    np.testing.assert_allclose(GV, fd_v[n:], rtol=1e-6, atol=1e-8 * scale)
    P = k.evaluate("param_jacobians", 0.1, q, v, a, lam, p, u)
    fd_p = central(lambda x: res(q, v, x), p, 1e-6 * np.abs(p))
    np.testing.assert_allclose(P.reshape(2 * n, n_p), fd_p, rtol=1e-6,
                               atol=1e-8 * np.abs(fd_p).max())


@pytest.mark.slow     # two builds of the 5-link cart (its tree form alone takes a minute)
def test_graph_modules_refresh_later_and_run_the_same_scheme():
    """A graph module forms its Newton matrix by a vector pass over the whole residual
    program, so Newton refreshes it later (emit.REFRESH_HORIZON_GRAPH against
    REFRESH_HORIZON). The run is the same discrete scheme: the 5-link cart swinging from 1 rad
    (h = 5 ms: K, taken at each step's start value, is refreshed in a quarter of the steps)
    takes fewer refreshes and more iterations from graph kernels, and its trajectory equals
    the tree kernels' to Newton's tolerance as the chaotic motion amplifies it (measured:
    2e-16 at step 10, 1e-12 at step 100, 6e-12 at step 200 against |q| up to 8.9); its
    adjoint gradient equals its tangent one to round-off."""
    from symdae.costs.time_domain import LeastSquares
    from symdae.model.emit import REFRESH_HORIZON, REFRESH_HORIZON_GRAPH
    from symdae.simulation.sensitivity import adjoint_gradient, tangent as tangent_sweep
    from symdae.simulation.system import System

    model = cart_pendulum(5)
    graph = symdae.compile_model(model)          # graph kernels by default at this size
    tree = System(model, backend_in_form(model, graph=False), {})
    assert (graph.backend.kernels.refresh_horizon, tree.backend.kernels.refresh_horizon) == \
        (REFRESH_HORIZON_GRAPH, REFRESH_HORIZON)
    sc = symdae.Scenario(t_end=1.0, h=5e-3, alpha=-0.1, q0=[0.0] + [1.0] * 5)
    g, t = graph.simulate(sc), tree.simulate(sc)
    cg, ct = g.counters, t.counters
    assert ct["jacobian_refreshes"] > 0.2 * ct["steps"]
    assert cg["jacobian_refreshes"] < 0.7 * ct["jacobian_refreshes"]
    assert cg["newton_iterations"] > ct["newton_iterations"]
    assert np.max(np.abs(g.q - t.q)) <= 1e-9 * np.max(np.abs(t.q))
    assert np.max(np.abs(g.q[:101] - t.q[:101])) <= 1e-11 * np.max(np.abs(t.q))

    short = sc.replace(t_end=0.2)
    names = model.parameter_names
    data = tree.simulate(short, params={"m": 0.55}).outputs["x"]
    cost = LeastSquares({"x": data}, ["x"])
    tr = graph.simulate(short)
    _, dPhi = cost.evaluate(graph, tr)
    g_adj = adjoint_gradient(graph, tr, dPhi)
    g_tlm = np.einsum("is,isd->d", dPhi, tangent_sweep(graph, tr, names).ds)
    assert np.max(np.abs(g_adj - g_tlm)) <= 1e-10 * np.max(np.abs(g_tlm)), (g_adj, g_tlm)


@pytest.mark.parametrize("h, why", [
    (6e-3, "failed"),   # with K at the last accepted state Newton failed at step 81
    (4e-3, "far"),      # without the second solve: a root far off, accelerations of 1e26
])
def test_a_step_whose_extrapolated_start_fails_or_leads_far_is_solved_from_the_last_state(h, why):
    """The 5-link cart whipping at h = 6 ms and 4 ms: where a changes fast, a step's quadratic
    extrapolation overshoots, and Newton from there (K taken at the start value, newton.pxd)
    fails (6 ms) or converges to a root of the step's equations far from the trajectory, after
    which the run runs away (4 ms: without the check, accelerations of 1e26 from step 119 on).
    The forward sweep solves such a step again from the last state's (a, lam) and the run
    stays on the trajectory. Every state it accepted satisfies the equations of motion
    M(q) a + g(q, v, t) = 0 (hht-ga: they hold at each grid point) to round-off of their
    terms, the restarted steps' included."""
    model = cart_pendulum(5)
    system = symdae.compile_model(model)
    sc = symdae.Scenario(t_end=1.2, h=h, alpha=-0.1, q0=[0.0] + [1.0] * 5)
    tr = system.simulate(sc)
    assert tr.counters["steps"] == round(1.2 / h) and tr.counters["newton_restarts"] >= 1, \
        tr.counters
    n, p, u, lam = model.n, system.parameter_vector(), np.zeros(0), np.zeros(0)
    worst = 0.0
    for i in range(tr.counters["steps"] + 1):
        res = system.backend.evaluate("residual", tr.t[i], tr.q[i], tr.v[i], tr.a[i], lam, p, u)
        scale = np.max(np.abs(res[:n])) + np.max(np.abs(res[n:2 * n]))
        worst = max(worst, np.max(np.abs(res[:n] + res[n:2 * n])) / scale)
    assert worst < 1e-10, worst
    assert np.max(np.abs(tr.a)) < 1e5      # the whip's 1.4e4 rad/s^2, not a run-away


def test_graph_source_is_deterministic():
    """Two derivations of the same model emit the same graph source (the cache and the
    reader rely on it), whatever symbols were created in between."""
    model = case("slider_crank").model
    one = emit_cython(symdae.derive(model), graph=True)
    sp.Dummy("between")
    assert emit_cython(symdae.derive(model), graph=True) == one


def test_wide_sums_and_products_are_computed_in_parts():
    """split_wide: no sum or product wider than the limit is left, and substituting the new
    assignments back gives the original expressions."""
    from symdae.model.graph import split_wide

    xs = sp.symbols("x0:300", real=True)
    exprs = [sp.Add(*xs), sp.Mul(*xs[:70]) * sp.sin(sp.Add(*xs[:130]))]
    assigns, out = split_wide([], exprs, 64)
    for e in [f for _, f in assigns] + out:
        for node in sp.preorder_traversal(e):
            assert not (node.is_Add or node.is_Mul) or len(node.args) <= 64
    for e, want in zip(out, exprs):
        for z, f in reversed(assigns):
            e = e.xreplace({z: f})
        assert e == want


# ---------------------------------------------------------------------------- column kernels
def written_entries(source: str, name: str) -> set:
    """The output entries kernel ``name`` assigns in an emitted module (its function and its
    chunk functions ``_k_<name>_<k>``; a reader of the state terms: its body
    ``_k_<name>_body``): the indices of every ``out[<int>] =`` line."""
    head = re.compile(rf"\s*static void _k_{name}(_body)?(_\d+)?\(")
    entries, inside = set(), False
    for line in source.splitlines():
        if line.strip().startswith(("static ", "// kernel")):
            inside = bool(head.match(line))
        elif inside:
            hit = re.match(r"\s+out\[(\d+)\] = ", line)
            if hit:
                entries.add(int(hit.group(1)))
    return entries


@pytest.mark.parametrize("name", MODELS + NONSMOOTH)
def test_column_kernels_write_the_structure_of_the_tree_kernels(name):
    """The graph form's column kernels write exactly the entries the tree kernels write (the
    structurally nonzero ones): none is missed (the values are compared in
    test_graph_kernels_equal_tree_kernels) and no structural zero is written, so the sparse
    LU and the tangent sweep's products see the same structure in both forms."""
    ds = symdae.derive(case(name).model)
    tree, graph = emit_cython(ds, graph=False), emit_cython(ds, graph=True)
    for kernel in COLUMN_KERNELS:
        # massless_rows copies gdot (its first n entries) whole, in a loop
        whole = set(range(ds.n)) if kernel == "massless_rows" else set()
        assert written_entries(graph, kernel) | whole == written_entries(tree, kernel) | whole, \
            f"{name} {kernel}"


def test_columns_that_touch_disjoint_rows_share_a_call():
    """A tridiagonal Jacobian (row i depends on columns i-1, i, i+1): columns two apart or
    closer share a row, so greedy colouring in column order groups {0, 3}, {1, 4}, {2, 5}; a
    dense one needs a call per column."""
    n = 6
    cp = ColumnPass("dir_residual", range(n), lambda j: [(j, "1.0")],
                    lambda j: [((i * n + j,), f"r[{i}]", (i,)) for i in range(n)])
    tri = [sum(1 << j for j in (i - 1, i, i + 1) if 0 <= j < n) for i in range(n)]
    groups = color_columns(cp, tri)
    assert [cols for cols, _ in groups] == [[0, 3], [1, 4], [2, 5]]
    # each column writes the rows that depend on it, and only those
    entries = {j: sorted(o for outs, _, _ in e[j] for o in outs) for _, e in groups for j in e}
    assert entries[0] == [0 * n + 0, 1 * n + 0] and entries[3] == [2 * n + 3, 3 * n + 3, 4 * n + 3]
    dense = [(1 << n) - 1] * n
    assert [cols for cols, _ in color_columns(cp, dense)] == [[j] for j in range(n)]


def chain(N: int):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))
    try:
        from pendulum_chain import make_chain
    finally:
        sys.path.pop(0)
    return make_chain(N)


def test_many_small_rows_keep_tree_kernels():
    """The 80-pendulum chain's residual is large (more than GRAPH_MIN_NODES) but made of rows
    of a few nodes, whose tree derivatives are small: it keeps tree kernels (faster per
    step there); the 5-link cart pendulum's rows are large: graph kernels."""
    from symdae.model.emit import GRAPH_MIN_NODES, tree_size

    ds = symdae.derive(chain(80))
    assert tree_size(list(ds.Ma) + list(ds.g) + list(ds.C) + list(ds.s)) > GRAPH_MIN_NODES
    assert not use_graph(ds)
    assert use_graph(cart_derived(5))


def test_a_banded_newton_matrix_takes_the_same_calls_at_any_size():
    """The chain of N pendula (banded Newton matrix) in graph form: the newton kernel calls
    its directional helper as often for N = 10 as for N = 20 (one call per column would be
    4 N); the dependence of each helper row is what the chain couples."""
    calls = []
    for N in (10, 20):
        source = emit_cython(symdae.derive(chain(N)), graph=True)
        head = next(l for l in source.splitlines() if l.strip().startswith("// kernel newton:"))
        calls.append(int(re.search(r"(\d+) call", head).group(1)))
    assert calls[0] == calls[1] <= 10, calls


def test_dependence_follows_the_assignments():
    """By hand: z1 = x y, z2 = sin(z1) + u, outputs z2 (x, y, u), z1 w (x, y) and w (none of
    the inputs)."""
    from symdae.model.graph import dependence

    x, y, u, w = sp.symbols("x y u w", real=True)
    z1, z2 = sp.symbols("z1 z2", real=True)
    assigns = [(z1, x * y), (z2, sp.sin(z1) + u)]
    assert dependence(assigns, [z2, z1 * w, w], [x, y, u]) == [0b111, 0b011, 0]


def test_linearize_splits_the_tangent_into_partials_and_their_combination():
    """By hand, on f = sin(x y) + x^3 (x y shared): the partials are cos(z) y, cos(z) x and
    3 x^2 (z = x y; the constant partials, here none, stay numbers), and putting their values
    back into the linear program gives tangent()'s result, (cos(x y) y + 3 x^2) dx +
    cos(x y) x dy."""
    from symdae.model.graph import linearize

    x, y, dx, dy = sp.symbols("x y dx dy", real=True)
    f = sp.sin(x * y) + x ** 3 + sp.sin(x * y) ** 2
    prog, (red,) = straight_line([f])
    slots = sp.symbols("P0:20", real=True)
    partials, new, (out,) = linearize(prog, [red], {x: dx, y: dy}, lambda k: slots[k])
    assert all(not p.is_Number for p in partials) and len(set(partials)) == len(partials)
    back = {slots[k]: p for k, p in enumerate(partials)}
    e = out
    for z, g in reversed(new):
        e = e.xreplace({z: g})
    e = e.xreplace(back)
    for z, g in reversed(prog.assignments):
        e = e.xreplace({z: g})
    want = sp.diff(f, x) * dx + sp.diff(f, y) * dy
    assert sp.simplify(e - want) == 0
    # the linear program reads the partials and the direction only
    for _, g in new:
        assert g.free_symbols <= set(slots) | {dx, dy} | {z for z, _ in new}


def test_column_kernels_take_their_partials_from_the_heap_when_large(monkeypatch):
    """The vector-mode column kernels (newton, jacobians, param_jacobians) keep directions,
    partials, outputs and scratch on the heap (freed on return); massless_rows does when
    its direction and partials exceed the stack budget. Compiled that way, the
    slider-crank's column kernels equal the reference as in
    test_graph_kernels_equal_tree_kernels."""
    import symdae.model.emit as emit

    monkeypatch.setattr(emit, "_STACK_DOUBLES", 8)
    c = case("slider_crank")
    model = c.model
    source = emit.emit_cython(symdae.derive(model), definition_hash=model.definition_hash(),
                              graph=True)

    def kernel(name):
        text = source[source.index(f"static void _k_{name}("):]
        return text[:text.index("\n\n")]

    for name, array in (("newton", "D"), ("jacobians", "D"), ("massless_rows", "d")):
        assert "malloc(" in kernel(name) and f"free({array})" in kernel(name), name

    key = cache_key("graph kernels, heap\0" + model.definition())
    module, _ = build_cached(model.name + "_graph_heap", key, lambda: (source, {}))
    heap = CompiledBackend(module)
    for kernel in COLUMN_KERNELS:
        check_against_reference(c, kernel, heap.evaluate, "graph kernel, partials on the heap")


def test_program_kernels_share_the_residual_program():
    """The residual's program is printed once (``_k_primal``); a kernel that needs most of it
    calls that instead of holding a copy (on the 5-link cart pendulum: every derivative
    kernel), one that needs little keeps its own few assignments; the values are checked in
    test_graph_kernels_equal_tree_kernels and against finite differences above."""
    source = cart_graph_source(5)
    assert source.count("static void _k_primal(") == 1
    for k in ("residual", "state_jvp", "param_jvp", "state_vjp", "param_vjp", "state_hvp",
              "residual_partials"):
        wrapper = source[source.index(f"static void _k_{k}(const symdae_args* x, const double* "
                                      "w, double* out) {"):].split("\n\n")[0]
        assert "    _k_primal(x, w, z);" in wrapper, k


def test_the_newton_matrix_takes_one_vector_call():
    """The Newton matrix's column groups fill the lanes of one call of the vector
    dir_residual (a dense K: a lane per column, made even); the Jacobians of the derivative
    sweeps take as many calls as their groups need; the values are checked against the tree
    kernels in test_graph_kernels_equal_tree_kernels."""
    from symdae.model.emit import MAX_LANES

    source = cart_graph_source(5)
    heads = {m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4))) for m in re.finditer(
        r"// kernel (\w+): (\d+) call\(s\) of dir_residual, (\d+) column group\(s\) in (\d+) "
        r"lanes", source)}
    n = 6                                    # the cart and five links: K is dense
    assert heads["newton"] == (1, n, n + n % 2)
    calls, groups, lanes = heads["jacobians"]
    assert n < groups <= 2 * n and calls == -(-groups // lanes) == 2   # q dense, v fewer
    assert f"{n + n % 2} lanes" in source and n + n % 2 <= MAX_LANES


def _lane_values(plan, values: dict, lanes: int) -> dict:
    """What the emitted loops compute (emit._lane_statement), lane by lane: each part over
    its lanes, set where no earlier part set a lane and added where one did; the span's
    lanes no part covers are zero; a statement with no span reads as zero."""
    out = {}

    def value(e, c):
        return float(e.xreplace({s: (out[s][c] if s in out else values[s][c])
                                 for s in e.free_symbols if s in out or s in values}))

    for st in plan:
        if st.span is None:
            out[st.target] = np.zeros(lanes)
            continue
        row, assigned = np.full(lanes, np.nan), set()
        for (lo, hi), terms in st.parts:
            for c in range(lo, hi):
                add = sum(value(t, c) for t in terms)
                row[c] = row[c] + add if c in assigned else add
                assigned.add(c)
        row[[c for c in range(lanes) if c not in assigned and st.span[0] <= c < st.span[1]]] = 0
        row[:st.span[0]] = row[st.span[1]:] = 0       # never written: zero in the callers
        out[st.target] = row
    return out


def test_lane_ranges_compute_each_statement_where_it_can_be_nonzero():
    """By hand, on 6 lanes with w0 seeded in lane 0, w1 in lane 3, w2 in lane 5 and w3 in
    none: z1 = 2 w0 lives in lanes [0, 2) (ranges are made even), z2 = z1 + 3 w1 in [0, 4)
    (each term over its own lanes), r = p z2 + w2 + z4 in [0, 6), z4 = 5 w3 nowhere. With
    random directions that are zero outside their seeded lanes, every lane's value is the
    full expression's (summed in the order of the terms' lane ranges); a term that is not a
    multiple of one lane symbol gives no plan."""
    from symdae.model.emit import lane_ranges
    from symdae.model.graph import FreeSymbols

    w = sp.symbols("w0:4", real=True)
    z1, z2, z4, r, p = sp.symbols("z1 z2 z4 r p", real=True)
    seeded = {w[0]: {0}, w[1]: {3}, w[2]: {5}, w[3]: set()}
    items = [(z1, 2 * w[0]), (z4, 5 * w[3]), (z2, z1 + 3 * w[1]), (r, p * z2 + w[2] + z4)]
    plan = lane_ranges(items, seeded, 6, FreeSymbols())
    spans = {st.target: st.span for st in plan}
    assert spans == {z1: (0, 2), z4: None, z2: (0, 4), r: (0, 6)}
    parts = {st.target: st.parts for st in plan}
    assert parts[z2] == (((0, 2), (z1,)), ((2, 4), (3 * w[1],)))
    assert parts[r] == (((0, 4), (p * z2,)), ((4, 6), (w[2],)))          # z4 dropped
    # on four lanes per instruction: the same terms in the same order, in fewer loops
    wide = lane_ranges(items, seeded, 8, FreeSymbols(), width=4)
    assert [st.span for st in wide] == [(0, 4), None, (0, 4), (0, 8)]
    assert wide[2].parts == (((0, 4), (z1, 3 * w[1])),)

    rng = np.random.default_rng(2)
    values = {s: np.array([rng.uniform(1, 2) if c in seeded[s] else 0.0 for c in range(6)])
              for s in w}
    values[p] = np.full(6, 1.7)
    got = _lane_values(plan, values, 6)
    for c in range(6):
        at = {s: v[c] for s, v in values.items()}
        full = {}
        for target, e in items:
            full[target] = float(e.xreplace({**at, **full}))
        for target in (z1, z2, r, z4):
            assert got[target][c] == pytest.approx(full[target], rel=1e-15, abs=0), (target, c)

    assert lane_ranges([(z1, w[0] * w[1])], seeded, 6, FreeSymbols()) is None
    assert lane_ranges([(z1, sp.sin(w[0]))], seeded, 6, FreeSymbols()) is None


def test_the_column_kernels_seed_a_column_in_the_same_lane():
    """On the 5-link cart, the Jacobians' column groups take the lanes the Newton matrix gives
    their columns (so the vector dir_residual's statements keep narrow lane ranges), in as
    few calls as filling the lanes in order; the emitted dir_residual's loops stay within the
    lanes and some are narrower."""
    source = cart_graph_source(5)
    body = source[source.index("// kernel dir_residual"):source.index("// kernel gdot")]
    lanes = int(re.search(r"(\d+) lanes", body).group(1))
    loops = re.findall(r"for \(c = (\d+); c < (\d+); c\+\+\)", body)
    assert loops and all(0 <= int(lo) < int(hi) <= lanes for lo, hi in loops)
    assert any(int(hi) - int(lo) < lanes for lo, hi in loops)

    def calls(kernel):
        """[{lane: first column}] per call, from the kernel's lane comments."""
        text = source[source.index(f"static void _k_{kernel}("):]
        text = text[:text.index("\n\n")]
        return [{int(lane): int(cols.split(",")[0]) for lane, cols in
                 (part.split(": ") for part in line.split("; "))}
                for line in re.findall(r"// lanes: (.*)", text)]

    (newton,) = calls("newton")
    home = {column: lane for lane, column in newton.items()}
    jacobians = calls("jacobians")
    groups = sum(len(call) for call in jacobians)
    assert len(jacobians) == -(-groups // lanes) == 2
    assert all(lane == home[column] for call in jacobians for lane, column in call.items())


def test_the_vector_program_for_avx2_computes_the_same_numbers():
    """The vector dir_residual compiled for AVX2 (four lanes per instruction, no FMA) gives
    the Newton matrix and the Jacobians of the 5-link cart bit for bit as the base build does:
    every lane performs the same operations in the same order. Its lanes and ranges are
    multiples of four and only its functions carry the target attribute."""
    from symdae.compilation.cache import vector_extension

    model = cart_pendulum(5)
    ds = cart_derived(5)
    source = emit_cython(ds, graph=True, vector="avx2")
    body = source[source.index("// kernel dir_residual"):source.index("// kernel gdot")]
    assert source.count('__attribute__((target("avx2")))') == body.count("static void "
                                                                           "_k_dir_residual_")
    assert "8 lanes" in body                     # 6 columns, made a multiple of four
    loops = re.findall(r"for \(c = (\d+); c < (\d+); c\+\+\)", body)
    assert loops and all(int(lo) % 4 == 0 == int(hi) % 4 for lo, hi in loops)
    with pytest.raises(symdae.InputError, match="unknown vector extension 'avx512'"):
        emit_cython(ds, graph=True, vector="avx512")
    if vector_extension() != "avx2":
        pytest.skip("this processor has no AVX2: the base build is checked above and in "
                    "the other tests")
    key = cache_key("graph kernels, avx2\0" + model.definition())
    module, _ = build_cached(model.name + "_avx2", key, lambda: (source, {}))
    avx2, base = CompiledBackend(module), backend_in_form(model)
    rng = np.random.default_rng(11)
    n = model.n
    p = np.array(model.nominal_values, dtype=float)
    for _ in range(3):
        q, v, a = (rng.uniform(-1, 1, n) for _ in range(3))
        args = (0.3, q, v, a, np.zeros(0), p, np.zeros(0))
        for kernel in ("newton", "jacobians", "param_jacobians"):
            extra = {"w": np.array([0.7, 1e5, 300.0])} if kernel == "newton" else {}
            got = avx2.evaluate(kernel, *args, **extra)
            want = base.evaluate(kernel, *args, **extra)
            assert np.any(got != 0) and np.array_equal(got, want), kernel


def test_the_vector_extension_is_part_of_the_cache_key(monkeypatch):
    """A cache shared by machines with and without AVX2 keeps a build for each: the key
    changes with compilation.cache.vector_extension."""
    import symdae.compilation.cache as cache

    keys = set()
    for ext in ("base", "avx2"):
        monkeypatch.setattr(cache, "vector_extension", lambda ext=ext: ext)
        keys.add(cache.cache_key("some model"))
    assert len(keys) == 2
