"""Time-term tables (symdae/simulation/backends/time_tables.py): a run that reads the time
terms from a table takes the very steps of one that evaluates them, bit for bit, and so do
the adjoint and tangent sweeps that read the table as the kept time terms; a table is made
only for a key asked for again; a change of anything the time terms read (a parameter of the
excitation, an input, the grid) is a new key, a change of anything else is not."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.model.emit import time_term_reads
from symdae.simulation.backends.time_tables import TimeTermTables
from symdae.simulation.sensitivity import adjoint_gradient, tangent

# bundled models with time terms: an excitation in t (engine mount); parameter-only terms of
# the initial state in redundant coordinates with nonlinear constraints whose parameters they
# read, and state terms (slider crank); a closed loop in joint angles (four-bar)
CASES = {
    "engine_mount": (symdae.Scenario(t_end=0.2, h=1e-4, alpha=-0.1, q0=np.zeros(4),
                                     v0=np.zeros(4)), {"cE1": 7.38e4, "dE": 0.5},
                     ["cE1", "cE2", "dE", "dH2", "omega0", "C"]),
    "slider_crank": (symdae.Scenario(t_end=0.3, h=1e-3, alpha=-0.1), {"k": 1.8e3},
                     ["k", "d", "l", "r", "phi0"]),
    "fourbar": (symdae.Scenario(t_end=0.5, h=2e-3, alpha=-0.3), {"k": 40.0},
                ["k", "d", "l1", "th10"]),
}
STATE = ("q", "v", "a", "lam")


@pytest.fixture(scope="module")
def systems():
    return {name: symdae.compile_model(symdae.load_model(name)[0]) for name in CASES}


@contextmanager
def evaluating(system):
    """Every run evaluates its time terms (no tables): the reference."""
    system.backend.use_time_tables = False
    try:
        yield
    finally:
        system.backend.use_time_tables = True


def same_run(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in STATE) and all(
        np.array_equal(a.outputs[k], b.outputs[k]) for k in a.outputs)


def table_of(tr):
    saved = tr.sweep.forward.saved
    return None if saved is None else saved[2]


def derivatives(system, tr, free):
    """(adjoint gradient of sum of squares of every output, tangent output sensitivities)."""
    dS = 2.0 * np.stack([tr.outputs[k] for k in system.model.output_names], axis=1)
    idx = [system.model.parameter_names.index(k) for k in free]
    return adjoint_gradient(system, tr, dS)[idx], tangent(system, tr, free, states=False).ds


@pytest.mark.parametrize("name", list(CASES))
def test_runs_that_read_a_table_are_the_runs_that_evaluate_the_time_terms(systems, name):
    system = systems[name]
    sc, params, free = CASES[name]
    tables = system.backend.time_tables
    assert system.sizes.n_tau > 0
    with evaluating(system):
        ref = system.simulate(sc, params=params)
        ref_store = system.simulate(sc, params=params, store_factorizations=True)
        ref_grad, ref_ds = derivatives(system, ref_store, free)
    tables.clear()
    first = system.simulate(sc, params=params)
    assert len(tables) == 0 and table_of(first) is None      # asked once: no table
    runs = [system.simulate(sc, params=params) for _ in range(2)]
    assert len(tables) == 1                                  # asked twice: made, then read
    table = table_of(runs[0])
    assert table is not None and np.shares_memory(table_of(runs[1]), table)
    assert table.shape == (sc.n_steps + 1, system.sizes.n_tau)
    assert np.array_equal(table, ref_store.sweep.forward.saved[2])
    for tr in [first] + runs:
        assert same_run(tr, ref)
        assert tr.counters == ref.counters and tr.counters["compiled_steps"] > 0
    # the derivative sweeps on a plain run read the table as the kept time terms
    grad, ds = derivatives(system, runs[1], free)
    assert np.array_equal(grad, ref_grad) and np.array_equal(ds, ref_ds)
    # a gradient's forward sweep stores its factorisations beside the table it reads
    stored = system.simulate(sc, params=params, store_factorizations=True)
    assert np.shares_memory(table_of(stored), table)
    assert stored.sweep.forward.saved[0] is not None
    assert same_run(stored, ref_store)
    grad, ds = derivatives(system, stored, free)
    assert np.array_equal(grad, ref_grad) and np.array_equal(ds, ref_ds)


def test_a_gradient_run_asked_twice_keeps_a_copy_of_its_time_terms(systems):
    system = systems["engine_mount"]
    sc, params, free = CASES["engine_mount"]
    tables = system.backend.time_tables
    tables.clear()
    runs = [system.simulate(sc, params=params, store_factorizations=True) for _ in range(3)]
    assert len(tables) == 1
    kept = [table_of(tr) for tr in runs]
    assert not np.shares_memory(kept[2], kept[1])
    assert np.array_equal(kept[2], kept[1]) and np.array_equal(kept[0], kept[1])
    assert same_run(runs[0], runs[2])
    g = [derivatives(system, tr, free)[0] for tr in runs]
    assert np.array_equal(g[0], g[2])


def test_the_steps_read_the_table(systems):
    """A table that is not the time terms' changes the run: the compiled steps take their
    excitation from it (this one doubles the engine mount's force on the engine mass)."""
    system = systems["engine_mount"]
    sc, params, _ = CASES["engine_mount"]
    tables = system.backend.time_tables
    tables.clear()
    ref = system.simulate(sc, params=params)
    ref2 = system.simulate(sc, params=params)           # the table made
    (key, table), = tables._tables.items()
    fake = table.copy()
    fake[:, 0] *= 2.0                                    # -(mL g + A sin(...)): twice as large
    tables.put(key, fake)
    doubled = system.simulate(sc, params=params)
    assert same_run(ref, ref2)
    assert np.shares_memory(table_of(doubled), fake)
    # the generic steps (the first few) evaluate their own time terms; the compiled ones,
    # which take the rest, read the table's doubled force: the response roughly doubles
    assert doubled.counters["compiled_steps"] > 0.99 * sc.n_steps
    change = np.abs(doubled.q[:, 0] - ref.q[:, 0]).max() / np.abs(ref.q[:, 0]).max()
    assert change > 0.5
    tables.clear()


def test_what_the_time_terms_read_is_the_key(systems):
    system = systems["engine_mount"]
    sc, params, _ = CASES["engine_mount"]
    model = system.model
    assert [model.parameter_names[k] for k in system.backend.time_tables.p_index] == \
        ["mL", "g", "A", "omega0", "C"]                  # F + mL g = A sin(omega0 C^t t) + mL g
    tables = system.backend.time_tables
    tables.clear()
    base = [system.simulate(sc, params=params) for _ in range(2)]
    table = table_of(base[1])
    other = system.simulate(sc, params={**params, "cE2": 3e9, "dH2": 1.5})
    assert np.shares_memory(table_of(other), table)      # not read by the time terms
    shifted = {**params, "omega0": 13.0}
    runs = [system.simulate(sc, params=shifted) for _ in range(3)]
    assert table_of(runs[0]) is None and not np.shares_memory(table_of(runs[1]), table)
    with evaluating(system):
        ref = system.simulate(sc, params=shifted)
    assert all(same_run(tr, ref) for tr in runs)
    # a longer or a shifted grid is another table
    assert table_of(system.simulate(sc, params=params)) is not None
    for other_grid in (symdae.Scenario.make(sc, t_end=0.25),
                       symdae.Scenario.make(sc, t0=0.1, t_end=0.3)):
        assert table_of(system.simulate(other_grid, params=params)) is None
    tables.clear()


@pytest.fixture(scope="module")
def driven():
    """A mass on a spring, excited by A sin(w t + u): a time term that reads the input."""
    t = dynamicsymbols._t
    x = dynamicsymbols("x")
    m, k, A, w, d = sp.symbols("m k A w d")
    u = sp.Symbol("u")
    model = symdae.Model("driven_mass", coordinates=[x], mass_matrix=sp.Matrix([[m]]),
                         forces=[A * sp.sin(w * t + u) - k * x - d * x.diff(t)],
                         parameters={m: 1.0, k: 400.0, A: 2.0, w: 15.0, d: 0.5},
                         inputs=[u], outputs={"x": x})
    return symdae.compile_model(model)


def test_a_time_term_that_reads_an_input_is_keyed_by_it(driven):
    system = driven
    assert system.backend.time_tables.u_index.tolist() == [0]
    assert system.backend.time_tables.p_index.tolist() == [2, 3]        # A, w
    tables = system.backend.time_tables
    sc = symdae.Scenario(t_end=0.4, h=1e-3, alpha=-0.1, q0=[0.01], v0=[0.0])
    t = np.arange(sc.n_steps + 1) * sc.h
    U1, U2 = 0.3 * np.sin(7 * t), 0.3 * np.cos(7 * t)
    with evaluating(system):
        ref1, ref2 = (system.simulate(sc, inputs={"u": U}) for U in (U1, U2))
    tables.clear()
    runs1 = [system.simulate(sc, inputs={"u": U1}) for _ in range(3)]
    runs2 = [system.simulate(sc, inputs={"u": U2}) for _ in range(3)]
    assert table_of(runs1[2]) is not None and table_of(runs2[0]) is None
    assert not np.shares_memory(table_of(runs2[2]), table_of(runs1[2]))
    assert all(same_run(tr, ref1) for tr in runs1) and all(same_run(tr, ref2) for tr in runs2)
    assert not np.array_equal(ref1.q, ref2.q)


def test_time_term_reads_by_hand():
    from symdae.model.derivation import derive
    model = symdae.load_model("engine_mount")[0]
    ds = derive(model)
    A, omega0, C, mL, g = (ds.symbols.p[model.parameter_names.index(k)]
                           for k in ("A", "omega0", "C", "mL", "g"))
    t = ds.symbols.t
    reads = time_term_reads(ds, [A * sp.sin(omega0 * C ** t * t), mL * g])
    assert reads == {"p": sorted(model.parameter_names.index(k)
                                 for k in ("A", "omega0", "C", "mL", "g")), "u": []}
    assert time_term_reads(ds, []) == {"p": [], "u": []}


def test_the_tables_keep_the_latest_within_their_budget():
    tables = TimeTermTables(2, {"p": [1], "u": []}, max_bytes=10_000, count=2)
    U = np.zeros((101, 0))
    p = np.array([1.0, 2.0, 3.0])
    key = tables.key(0.0, 0.01, p, U)
    assert key == tables.key(0.0, 0.01, p + [5.0, 0.0, 5.0], U)     # p[1] alone is read
    assert key != tables.key(0.0, 0.01, p + [0.0, 1.0, 0.0], U)
    assert key != tables.key(0.0, 0.02, p, U) != tables.key(0.1, 0.01, p, U)
    assert tables.key(0.0, 0.01, p, np.zeros((700, 0))) is None      # 700 x 2 x 8 > 10 000
    other = tables.key(0.0, 0.02, p, U)
    assert tables.lookup(key) == (None, False)
    assert tables.lookup(other) == (None, False)
    assert tables.lookup(key) == (None, True)        # asked again: experiments taking turns
    assert tables.lookup(key) == (None, False)       # (the caller made and put its table)
    keys = [tables.key(0.0, 0.01, np.array([0.0, float(k), 0.0]), U) for k in range(3)]
    for k, kk in enumerate(keys):
        tables.put(kk, np.full((101, 2), float(k)))
    assert len(tables) == 2 and tables.lookup(keys[0]) == (None, False)
    assert tables.lookup(keys[1])[0][0, 0] == 1.0
    tables.put(keys[0], np.zeros((101, 2)))          # keys[2] is now the least recently used
    assert tables.lookup(keys[2])[0] is None and tables.lookup(keys[1])[0] is not None
    assert TimeTermTables(0, {"p": [], "u": []}).key(0.0, 0.01, p, U) is None
    # the bytes bound: three tables of 1 616 bytes do not fit in 4 000
    small = TimeTermTables(2, {"p": [1], "u": []}, max_bytes=4000, count=8)
    for k, kk in enumerate(keys):
        small.put(kk, np.full((101, 2), float(k)))
    assert len(small) == 2 and small.nbytes == 2 * 1616
    assert small.lookup(keys[0])[0] is None and small.lookup(keys[2])[0] is not None
    # keys differ by the inputs the time terms read (a digest of them)
    by_input = TimeTermTables(2, {"p": [], "u": [1]})
    V = np.zeros((101, 2))
    W = V.copy()
    W[50, 0] = 1.0                                   # an input the time terms do not read
    assert by_input.key(0.0, 0.01, p, V) == by_input.key(0.0, 0.01, p, W)
    W[50, 1] = 1.0
    assert by_input.key(0.0, 0.01, p, V) != by_input.key(0.0, 0.01, p, W)


def test_the_core_checks_a_table_before_reading_it(systems):
    system = systems["engine_mount"]
    be = system.backend
    p = system.parameter_vector({})
    with pytest.raises(ValueError, match="time_term_table"):
        be.hht.time_term_table(be.kernels, 0.0, 1e-3, p, np.zeros((5, 0)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="time_term_table"):
        be.hht.time_term_table(be.kernels, 0.0, 1e-3, p, np.zeros((4, 0)), np.zeros((5, 9)))
    table = be.time_term_table(0.0, 1e-3, p, np.zeros((5, 0)))
    # the forward term of the engine mass's row, by hand: -(mL g + A sin(omega0 C^t t))
    P = dict(zip(system.model.parameter_names, p))
    t = 1e-3 * np.arange(5)
    force = -(P["mL"] * P["g"] + P["A"] * np.sin(P["omega0"] * P["C"] ** t * t))
    np.testing.assert_allclose(table[:, 0], force, rtol=1e-14)
