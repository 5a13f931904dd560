"""Experiments in parallel: Systems and Experiments pickle (a worker reloads the kernels from
the cache, it compiles nothing), evaluate_many on thread and process pools gives the serial
numbers, and the engine mount identified on a Dask LocalCluster (processes) is the serial
result."""
from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

from symdae import Experiment, LeastSquares, Measurement, Scenario, evaluate_many, identify

SCENARIO = Scenario(t_end=0.3, h=1e-4, alpha=-0.1)
START = {"cE1": 7.38e4, "cE2": 4.0e9, "dE": 0.5, "dH2": 1.2}


@pytest.fixture(scope="module")
def engine_mount(bundled):
    return bundled("engine_mount")[0]


def experiments(system):
    """Two experiments: released from rest, and with an initial deflection of the mount."""
    a, b = 0.095, 0.0036       # the lever: x2 (a + b) - x3 b - x4 a = 0
    out = []
    for label, q0 in (("rest", np.zeros(4)),
                      ("deflected", np.array([2e-3, 1e-3, 0.0, 1e-3 * (a + b) / a]))):
        sc = SCENARIO.replace(q0=q0, v0=np.zeros(4))
        data = Measurement.from_trajectory(system.simulate(sc), ["a1"])
        out.append(Experiment(system, LeastSquares(data, ["a1"]), sc, name=label))
    return out


def _cache_hit(system):
    return system.build_info["cache_hit"], system.backend.name


def test_system_and_experiment_pickle(engine_mount):
    again = pickle.loads(pickle.dumps(engine_mount))
    assert again.build_info["cache_hit"] is True           # loaded, not built
    assert again.build_info["key"] == engine_mount.build_info["key"]
    np.testing.assert_array_equal(again.simulate(SCENARIO).q, engine_mount.simulate(SCENARIO).q)
    (e, _) = experiments(engine_mount)
    e2 = pickle.loads(pickle.dumps(e))
    a, b = e.evaluate(START, gradient=True), e2.evaluate(START, gradient=True)
    assert a.cost == b.cost
    np.testing.assert_array_equal(a.gradient, b.gradient)


def test_process_pool_reloads_from_the_cache_and_agrees(engine_mount):
    exps = experiments(engine_mount)
    serial = evaluate_many(exps, START)
    spawn = multiprocessing.get_context("spawn")      # fresh interpreters: nothing inherited
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        hits = list(pool.map(_cache_hit, [engine_mount, engine_mount]))
        parallel = evaluate_many(exps, START, pool)
    assert hits == [(True, "compiled")] * 2
    for s, p in zip(serial, parallel):
        assert s.cost == p.cost
        np.testing.assert_array_equal(s.gradient, p.gradient)
    with ThreadPoolExecutor(2) as pool:
        threaded = evaluate_many(exps, START, pool)
    for s, t in zip(serial, threaded):
        assert s.cost == t.cost
        np.testing.assert_array_equal(s.gradient, t.gradient)


def test_identification_on_a_dask_cluster_equals_serial(engine_mount):
    distributed = pytest.importorskip("distributed")   # in the test extras: runs in CI
    exps = experiments(engine_mount)
    serial = identify(exps, list(START), START, progress=False, max_iterations=25)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        parallel = identify(exps, list(START), START, progress=False, max_iterations=25,
                            executor=client.get_executor())
    assert parallel.values == serial.values
    assert parallel.cost == serial.cost and parallel.n_iterations == serial.n_iterations
    assert serial.cost < 1e-3 * serial.start_cost
