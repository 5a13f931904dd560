"""The sweeps' array pool: an array comes back only when nothing refers to it any more, so a
result the caller keeps is never overwritten by a later run, and repeated runs reuse memory."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import symdae
from symdae.simulation.backends.workspace import ArrayPool


def test_a_released_array_is_handed_out_again():
    pool = ArrayPool()
    a = pool.empty((100, 3))
    first = id(a)
    del a
    b = pool.empty((100, 3))
    assert id(b) == first
    assert pool.nbytes == b.nbytes
    c = pool.empty(7, dtype=np.intc)            # another shape and dtype: another array
    assert c.shape == (7,) and c.dtype == np.intc and not np.shares_memory(b, c)


def test_an_array_in_use_or_viewed_is_never_handed_out():
    pool = ArrayPool()
    a = pool.empty((50, 2))
    b = pool.empty((50, 2))
    assert not np.shares_memory(a, b)
    view = a[10:, 1]                             # a column of a kept result (an output)
    view[:] = 1.5
    del a
    c = pool.empty((50, 2))
    c[:] = -1.0
    assert not np.shares_memory(c, view)
    assert np.all(view == 1.5)


def test_zeros_are_zero_on_reuse():
    pool = ArrayPool()
    a = pool.empty((20, 4))
    a[:] = np.nan
    del a
    z = pool.zeros((20, 4))
    assert np.all(z == 0.0)


def test_the_pool_keeps_at_most_its_budget():
    pool = ArrayPool(max_bytes=1000)
    a = pool.empty(200)                          # 1600 bytes: not kept
    assert pool.nbytes == 0
    del a
    keep = [pool.empty(10) for _ in range(5)]    # two kept per shape, the rest plain
    assert pool.nbytes == 2 * 80
    assert len({id(x) for x in keep}) == 5
    for k in range(100):                          # shapes beyond the budget leave no entry
        pool.empty(1000 + k)
    assert pool.shapes == 1
    pool.clear()
    assert pool.nbytes == 0


def test_concurrent_requests_never_share_an_array():
    pool = ArrayPool()
    got, barrier = [], threading.Barrier(4)

    def take():
        barrier.wait()
        for _ in range(200):
            x = pool.empty((64,))
            x[:] = threading.get_ident()
            got.append(bool(np.all(x == threading.get_ident())))
            del x

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 800 and all(got)


@pytest.fixture(scope="module")
def engine_mount(bundled):
    return bundled("engine_mount")


def test_a_kept_trajectory_survives_later_runs(engine_mount):
    system, ns = engine_mount
    sc = symdae.Scenario.make(ns["SCENARIO"]).replace(t_end=0.05)
    kept = system.simulate(sc, params=ns["START"])
    q, a1 = kept.q.copy(), kept.outputs["a1"].copy()
    for k in range(3):                           # other parameters: other trajectories
        other = system.simulate(sc, params={**ns["START"], "cE1": 7e4 * (2 + k)})
        assert not np.shares_memory(other.q, kept.q)
        del other
    assert np.array_equal(kept.q, q) and np.array_equal(kept.outputs["a1"], a1)


def test_repeated_runs_reuse_the_pool(engine_mount):
    system, ns = engine_mount
    sc = symdae.Scenario.make(ns["SCENARIO"]).replace(t_end=0.05)
    ref = system.simulate(sc, params=ns["START"])
    q_ref, lam_ref = ref.q.copy(), ref.lam.copy()
    owner = id(ref.q.base)          # the pool keeps that array alive: its id stays its own
    del ref
    again = system.simulate(sc, params=ns["START"])
    assert id(again.q.base) == owner             # the released arrays came back
    assert np.array_equal(again.q, q_ref) and np.array_equal(again.lam, lam_ref)


def test_an_identically_zero_output_reads_zero_from_a_reused_array(tmp_path):
    """The outputs kernel never writes an output that is identically 0: a run on an array
    that an earlier run left NaN in must still read 0 there (the sweep's outputs start
    zeroed)."""
    import sympy as sp
    from sympy.physics.mechanics import dynamicsymbols
    x = dynamicsymbols("x")
    k = sp.Symbol("k")
    model = symdae.Model("workspace_zero_output", [x], mass_matrix=[[1]], forces=[-k * x],
                         parameters={k: 4.0}, initial_state={x: 1.0},
                         outputs={"x": x, "nothing": sp.Integer(0)})
    system = symdae.compile_model(model, cache_dir=tmp_path)
    first = system.simulate(t_end=0.2, h=0.01)
    owner = id(first.outputs["x"].base)
    for name in first.outputs:               # views of the run's output array
        first.outputs[name][:] = np.nan
    del first
    again = system.simulate(t_end=0.2, h=0.01)
    assert id(again.outputs["x"].base) == owner        # the same array, reused
    assert np.array_equal(again.outputs["nothing"], np.zeros(21))
    assert np.all(np.isfinite(again.outputs["x"]))
    # the column zeroed before each run is that one alone (the kernel writes the other),
    # as the generated module lists it
    assert system.backend.zero_outputs.tolist() == [1]
    assert "ZERO_OUTPUTS = [1]" in Path(system.build_info["folder"], "kernels.pyx").read_text()
