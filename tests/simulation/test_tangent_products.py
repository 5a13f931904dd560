"""The tangent sweep's products with the state Jacobian blocks written out in the kernel module
(symdae/model/tangent_products.py) against the core's entry lists (tangent.pxd): the same
sensitivities bit for bit for one to four directions (the written-out ones) on models with
constraints or none, q-dependent mass matrices, parameters inside the constraints, both
schemes, factorisations stored or refactorised; five directions keep to the lists; the
emitted code lists the entries in the order of the core's structure pass and leaves out
products too large to write out."""
from __future__ import annotations

import numpy as np
import pytest

import symdae
from symdae.model.derivation import derive
from symdae.model.emit import emit_cython
from symdae.model.tangent_products import MAX_ENTRIES, state_products, tangent_lines
from symdae.simulation.sensitivity import tangent

FIELDS = ("dq", "dv", "da", "dlam", "ds")

# (model, scenario changes, steps)
CASES = [
    ("engine_mount", {}, 400),
    ("engine_mount", {"scheme": "hht-paper"}, 400),
    # q-dependent M, nonlinear constraints with the link lengths inside them
    ("fourbar", {}, 300),
    ("four_bar_joints", {}, 300),
    # joint angles without constraints (m = 0)
    ("double_pendulum", {}, 300),
    # an input force, redundant coordinates
    ("cart_pendulum_redundant", {}, 300),
]


def run(name, changes, steps, store=False):
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sc = symdae.Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3, "alpha": -0.1})
    sc = sc.replace(**changes)
    sc = sc.replace(t_end=sc.t0 + steps * sc.h)
    traj = system.simulate(sc, params=ns.get("START"), store_factorizations=store)
    return system, traj


def directions(system, nd: int) -> np.ndarray:
    """nd directions, each moving every parameter by a random fraction of itself."""
    p = np.abs(np.array(system.model.nominal_values, dtype=float))
    rng = np.random.default_rng(nd)
    return rng.uniform(-1.0, 1.0, (len(p), nd)) * np.where(p > 0, p, 1.0)[:, None]


def both(system, traj, D, states=True):
    """The sensitivities with the written-out products and with the lists, and the steps each
    took in the module's compiled steps, which call the written-out products (the sweep's
    counter; without them the generic step calls the written-out products itself,
    test_compiled_steps.py)."""
    be = system.backend
    sz = system.sizes
    zeros = tuple(np.zeros((D.shape[1], k)) for k in (sz.n, sz.n, sz.n, sz.m))

    def sweep():
        return (tangent(system, traj, D, states=states),
                be.tangent(traj.sweep.forward, D, zeros, states=False).report)
    try:
        be.use_compiled_steps = True
        written, wrep = sweep()
        be.use_compiled_steps = False
        lists, lrep = sweep()
    finally:
        be.use_compiled_steps = True
    return written, lists, wrep.counters.compiled_steps, lrep.counters.compiled_steps


@pytest.mark.parametrize("name, changes, steps", CASES,
                         ids=[f"{c[0]}-{c[1].get('scheme', 'default')}" for c in CASES])
def test_written_products_give_the_lists_numbers_bit_for_bit(name, changes, steps):
    system, traj = run(name, changes, steps)
    for nd in (1, 2, 3, 4, 5):
        D = directions(system, nd)
        written, lists, taken, generic = both(system, traj, D)
        assert generic == 0
        # one to four directions take the module's products at every step, five the lists
        assert taken == (steps if nd <= 4 else 0), (name, nd, taken)
        assert np.any(written.ds != 0.0)
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(written, f), getattr(lists, f),
                                          err_msg=f"{name} nd={nd} {f}")


def test_written_products_with_stored_factorisations():
    """The sweep that reads the forward sweep's factorisations, outputs only."""
    system, traj = run("fourbar", {"scheme": "hht-paper"}, 300, store=True)
    D = directions(system, 4)
    written, lists, taken, _ = both(system, traj, D, states=False)
    assert taken == 300
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(written, f), getattr(lists, f), err_msg=f)


def test_the_entries_follow_the_core_structure_pass():
    """n = 2, m = 1, one output: J_M (c_M) and J_G, G_V (1) and C_q (1/s) into the new state's
    rows in block order; -alpha_p (J_G, G_V, C_q^T) for the old state's; S_x for the outputs."""
    n, m, n_s = 2, 1, 1
    jac = [False] * (3 * n * n + m * n)
    for at in (0, 3,          # J_M diagonal
               5,             # J_G (0, 1)
               8, 11,         # G_V diagonal
               12, 13):       # C_q
        jac[at] = True
    out = [False] * (n_s * (3 * n + m + 4))
    out[4] = True             # d s / d a_0
    prods = state_products(jac, out, n, m, n_s)
    new = [(e.row, e.col, e.at, e.coef) for e in prods["new_state"]]
    assert new == [(0, 0, 0, "coef[0]"), (1, 1, 3, "coef[0]"), (0, 1, 5, "1.0"),
                   (0, 2, 8, "1.0"), (1, 3, 11, "1.0"), (2, 0, 12, "coef[1]"),
                   (2, 1, 13, "coef[1]")]
    old = [(e.row, e.col, e.at, e.coef) for e in prods["old_state"]]
    # C_q^T: row k of y, column 3n + r of x (dlam_r)
    assert old == [(0, 1, 5, "coef[2]"), (0, 2, 8, "coef[2]"), (1, 3, 11, "coef[2]"),
                   (0, 6, 12, "coef[2]"), (1, 6, 13, "coef[2]")]
    assert [(e.row, e.col, e.at) for e in prods["outputs"]] == [(0, 4, 4)]
    text = "\n".join(tangent_lines(jac, out, n, m, n_s).code)
    # three directions: a pair and the odd one, with the offsets of entry (2, 0) of C_q
    assert ("sd_store_pair(y + 6, sd_load_pair(y + 6) + c * sd_load_pair(x + 0));\n"
            "        y[8] += c * x[2];") in text
    assert "static void sd_tangent_old_state_4(" in text


def test_too_many_entries_keep_to_the_lists():
    n, m, n_s = 12, 0, 2
    jac = [True] * (3 * n * n)
    out = [True] * (n_s * (3 * n + 1))
    assert sum(map(len, state_products(jac, out, n, m, n_s).values())) > MAX_ENTRIES
    lines = tangent_lines(jac, out, n, m, n_s)
    assert lines.code == []
    assert "_model.tangent.fn[4][0] = NULL" in lines.table


@pytest.mark.parametrize("graph", [False, True])
def test_graph_modules_have_no_written_products(graph):
    model, _ = symdae.load_model("double_pendulum")
    text = emit_cython(derive(model), graph=graph)
    assert ("_model.tangent.fn[4][0] = sd_tangent_new_state_4" in text) is not graph
    assert ("_model.tangent.fn[4][0] = NULL" in text) is graph
