"""State terms (emit.hoist_state_terms): the residual's costly functions of (t, q, v), which
the forward kernels read from x.st instead of evaluating them again.

1. The hoisting by hand on a small table: which subexpressions are state terms (functions of
   t, q, v, p, u and the time terms only; nested ones too; never one in a or lam), and the
   readers' expressions give back the originals exactly when the terms are put back.
2. On bundled models in joint angles and with closed loops: every transcendental
   subexpression of the residual in the state is a state term, no reader evaluates one
   itself, and the emitted text says so (no compiler needed).
3. Compiled: each kernel gives the same output, bit for bit, whether the caller passes the
   state terms (as the sweeps do) or not (the kernel computes them itself); the kernels'
   values against the NumPy reference and finite differences are in test_kernels.py (the
   compiled kernels there run without x.st, so through the same bodies).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import sympy as sp

import symdae
from symdae.model.emit import (
    STATE_TERM_READERS,
    emit_cython,
    hoist_state_terms,
    hoist_time_terms,
    use_graph,
)
from symdae.model.kernels import KERNEL_NAMES, kernel_expressions, weight_size

# in joint angles (q-dependent mass matrix), closed loops, a crank train with exp(cos(.))
MODELS = ["double_pendulum", "slider_crank", "four_bar_joints", "andrews_squeezer",
          "four_cylinder_tvd"]


# the libm calls a kernel can make (written out here, independently of emit.py's test)
LIBM = (sp.sin, sp.cos, sp.tan, sp.asin, sp.acos, sp.atan, sp.atan2, sp.sinh, sp.cosh,
        sp.tanh, sp.exp, sp.log)


def _costly_nodes(exprs) -> set:
    return {node for e in exprs for node in sp.preorder_traversal(e)
            if isinstance(node, LIBM) or (isinstance(node, sp.Pow) and not node.exp.is_Integer)}


def test_state_terms_by_hand():
    t, q0, q1, v0, lam0, a0, p0 = sp.symbols("t q0 q1 v0 lam0 a0 p0", real=True)
    tau0 = sp.Symbol("tau[0]", real=True)
    ds = SimpleNamespace(symbols=SimpleNamespace(t=t, q=(q0, q1), v=(v0,), p=(p0,), u=()))
    inner = sp.cos(q0 - q1)
    residual = [p0 * sp.sin(q0) * a0 + sp.exp(p0 * (inner - 1)),
                sp.sqrt(1 + v0 ** 2) * lam0 + sp.exp(lam0) + tau0 * sp.cos(t * q1),
                q0 ** 2 + sp.Abs(v0) + sp.tanh(v0 * lam0)]
    newton = [p0 * sp.cos(q0), inner * sp.sin(q0 - q1), sp.exp(lam0) * a0]
    outputs = [sp.exp(p0 * (inner - 1)), sp.sin(q1)]
    table = {"residual": (residual, False, []), "newton": (newton, False, []),
             "residual_magnitude": ([sp.Abs(p0 * sp.sin(q0))], False, []),
             "outputs": (outputs, False, []), "jacobians": ([sp.cos(q0)], False, [])}
    out, st, exprs = hoist_state_terms(ds, table, (tau0,))
    # in (t, q, v, p, tau) only, nested cos(q0 - q1) too, sin and cos in pairs; not
    # exp(lam0) nor tanh(v0 lam0) (they read lam), not |v0| (no libm call), not sin(q1)
    # (the residual has no function of q1 alone)
    assert set(exprs) == {sp.sin(q0), sp.cos(q0), sp.exp(p0 * (inner - 1)), inner,
                          sp.sin(q0 - q1), sp.sqrt(1 + v0 ** 2), sp.cos(t * q1),
                          sp.sin(t * q1)}
    assert len(st) == len(exprs) == len(set(st))
    back = dict(zip(st, exprs))
    for name in table:
        assert [e.xreplace(back) for e in out[name][0]] == table[name][0], name
        assert not (_costly_nodes(out[name][0]) & set(exprs)), name
    assert out["newton"][0][1] == st[exprs.index(inner)] * st[exprs.index(sp.sin(q0 - q1))]
    assert out["outputs"][0][1] == sp.sin(q1)           # a term the residual lacks stays
    assert out["residual"][0][2] == table["residual"][0][2]


def test_a_model_without_state_terms_keeps_its_table():
    t, q0, p0 = sp.symbols("t q0 p0", real=True)
    ds = SimpleNamespace(symbols=SimpleNamespace(t=t, q=(q0,), v=(), p=(p0,), u=()))
    table = {"residual": ([p0 * q0 ** 3], False, [])}
    assert hoist_state_terms(ds, table, ()) == (table, (), [])


# the four-bar in joint angles emitted again costs a minute: in the slow set (the other four
# models cover the same code here, and its compiled module's state terms are checked below)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n == "four_bar_joints" else n for n in MODELS])
def test_every_state_transcendental_of_the_residual_is_shared(name):
    model, _ = symdae.load_model(name)
    ds = symdae.derive(model)
    assert not use_graph(ds)
    table, tau, _, _ = hoist_time_terms(ds, {k: v for k, v in kernel_expressions(ds).items()})
    out, st, exprs = hoist_state_terms(ds, table, tau)
    S = ds.symbols
    state = set((S.t,) + tuple(S.q) + tuple(S.v) + tuple(S.p) + tuple(S.u) + tau)
    found = {n for n in _costly_nodes(table["residual"][0]) if n.free_symbols <= state}
    pairs = {(sp.cos if isinstance(n, sp.sin) else sp.sin)(n.args[0])
             for n in found if isinstance(n, (sp.sin, sp.cos))}
    assert found and set(exprs) == found | pairs
    for reader in STATE_TERM_READERS:
        left = {n for n in _costly_nodes(out[reader][0]) if n.free_symbols <= state}
        assert not (left & found), (reader, sorted(map(str, left & found))[:3])
        back = dict(zip(st, exprs))
        assert [e.xreplace(back) for e in out[reader][0]] == list(table[reader][0])

    source = emit_cython(ds)
    assert f"_model.n_st = {len(st)}" in source
    body = source.split("static void _k_residual_body(")[1].split("\n    }\n")[0]
    assert "st[" in body and "sin(" not in body and "cos(" not in body
    readers = [r for r in STATE_TERM_READERS if set(st) & set().union(
        *(sp.sympify(e).free_symbols for e in out[r][0]))]
    assert {"residual", "newton", "jacobians", "state_vjp"} <= set(readers)
    for reader in STATE_TERM_READERS:
        wrapper = source.split(f"static void _k_{reader}(")[1].split("\n    }\n")[0]
        if reader in readers:
            assert "_k_state_terms(x, NULL, st);" in wrapper
            assert f"_k_{reader}_body(&xs, w, out);" in wrapper
        else:       # no wrapper where the kernel reads none
            assert "_body(" not in wrapper and "st[" not in wrapper


def test_the_engine_mount_has_no_state_terms():
    """Its only transcendental functions are of t (the excitation: time terms)."""
    source = emit_cython(symdae.derive(symdae.load_model("engine_mount")[0]))
    assert "_model.n_st = 0" in source and "_body(" not in source


@pytest.mark.parametrize("name", MODELS)
def test_kernels_give_the_same_bits_with_and_without_the_state_terms(name):
    system = symdae.compile_model(symdae.load_model(name)[0])
    k, sz = system.backend.kernels, system.sizes
    assert k.n_st > 0
    rng = np.random.default_rng(7)
    p = np.array(system.model.nominal_values, dtype=float)
    for _ in range(3):
        args = [rng.uniform(-1.0, 1.0, max(size, 1)) for size in (sz.n, sz.n, sz.n, sz.m)]
        args += [p, rng.uniform(-1.0, 1.0, max(sz.n_u, 1))]
        t = rng.uniform(0.0, 1.0)
        st = k.evaluate(KERNEL_NAMES.index("state_terms"), t, *args, np.zeros(1))
        assert st.shape == (k.n_st,) and np.all(np.isfinite(st))
        for reader in STATE_TERM_READERS:
            idx = KERNEL_NAMES.index(reader)
            w = rng.uniform(0.5, 1.5, max(weight_size(reader, sz), 1))
            own = k.evaluate(idx, t, *args, w)
            given = k.evaluate(idx, t, *args, w, pass_state_terms=True)
            assert np.all(np.isfinite(own)), reader
            np.testing.assert_array_equal(given, own, err_msg=f"{name} {reader}")



def test_state_terms_beyond_the_stack_budget_go_to_the_heap(monkeypatch):
    """A kernel whose caller passes no state terms computes them into a buffer of its own:
    on the stack, or on the heap (freed on return) beyond _STACK_DOUBLES. Compiled that way,
    the double pendulum's kernels give the bits of the stack build, with and without x.st."""
    import symdae.model.emit as emit
    from symdae.compilation.cache import build_cached, cache_key
    from symdae.simulation.backends.compiled import CompiledBackend

    model = symdae.load_model("double_pendulum")[0]
    stack = symdae.compile_model(model).backend.kernels
    monkeypatch.setattr(emit, "_STACK_DOUBLES", 1)
    source = emit.emit_cython(symdae.derive(model), definition_hash=model.definition_hash())
    wrapper = source.split("static void _k_newton(")[1].split("\n    }\n")[0]
    assert "malloc(" in wrapper and "free(st);" in wrapper
    module, _ = build_cached(model.name + "_heap_state_terms",
                             cache_key("state terms on the heap\0" + model.definition()),
                             lambda: (source, {}))
    heap = CompiledBackend(module).kernels
    sz = symdae.compile_model(model).sizes
    rng = np.random.default_rng(11)
    args = [rng.uniform(-1.0, 1.0, max(size, 1)) for size in (sz.n, sz.n, sz.n, sz.m)]
    args += [np.array(model.nominal_values, dtype=float), np.zeros(max(sz.n_u, 1))]
    for reader in STATE_TERM_READERS:
        idx = KERNEL_NAMES.index(reader)
        w = rng.uniform(0.5, 1.5, max(weight_size(reader, sz), 1))
        want = stack.evaluate(idx, 0.2, *args, w)
        np.testing.assert_array_equal(heap.evaluate(idx, 0.2, *args, w), want, err_msg=reader)
        np.testing.assert_array_equal(heap.evaluate(idx, 0.2, *args, w, pass_state_terms=True),
                                      want, err_msg=reader)


@pytest.mark.parametrize("name", ["double_pendulum", "four_bar_joints"])
def test_the_derivative_sweeps_read_the_state_terms_the_forward_sweep_kept(name):
    """A forward sweep that keeps its time terms keeps the state terms of every accepted state
    too (at the Newton iterate it accepted); the adjoint and tangent sweeps then read them
    instead of evaluating them again. Same gradient and sensitivities, bit for bit, as from a
    run that keeps nothing; and they are what the sweeps read: perturbed, the results move."""
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sc = symdae.Scenario(t_end=0.3, h=1e-3, alpha=-0.1)
    plain = system.simulate(sc)
    kept = system.simulate(sc, keep_time_terms=True)
    ST = kept.sweep.forward.saved[3]
    assert ST.shape == (sc.n_steps + 1, system.sizes.n_st)
    # the memory estimate (checkpoint plans, MemoryEstimate) counts what is kept
    kept_bytes = sum(x.nbytes for x in kept.sweep.forward.saved if x is not None)
    assert kept_bytes == (sc.n_steps + 1) * system.sizes.kept_term_bytes
    np.testing.assert_array_equal(kept.q, plain.q)
    dS = np.zeros_like(plain.sweep.forward.S)
    dS[:, 0] = np.linspace(-1.0, 1.0, sc.n_steps + 1)
    g_plain = symdae.adjoint_gradient(system, plain, dS)
    g_kept = symdae.adjoint_gradient(system, kept, dS)
    np.testing.assert_array_equal(g_kept, g_plain)
    free = list(model.parameter_names[:2])
    t_plain = symdae.tangent(system, plain, free, states=False)
    t_kept = symdae.tangent(system, kept, free, states=False)
    np.testing.assert_array_equal(t_kept.ds, t_plain.ds)
    ST += 1e-3 * np.abs(ST) + 1e-6          # what the sweeps read, if they read it
    assert not np.array_equal(symdae.adjoint_gradient(system, kept, dS), g_plain)
    assert not np.array_equal(symdae.tangent(system, kept, free, states=False).ds, t_plain.ds)
