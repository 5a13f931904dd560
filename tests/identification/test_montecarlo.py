"""Monte Carlo check of the statistics: Gaussian noise on synthetic two-mass data (the spec's
F0 and comparison sine, section 6.4), identifications in a thread pool; the spread of the
identified c2 against the Fisher prediction sigma / sqrt(F(c2_true)).

Few runs keep this fast; benchmarks/bench_gauss_newton.py runs the full study (200 runs,
two noise levels, a Dask cluster).
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import symdae
from symdae import Experiment, InputError, LeastSquares, Measurement, monte_carlo
from symdae.identification.fisher import output_sensitivities

SIGMA = 1e-6
RUNS = 40
# the spec's prototype Fisher information of F0 at the true c2 = 1100 (section 8.2)
F0_FISHER_AT_TRUTH = 2.470533774939947e-10


@pytest.fixture(scope="module")
def two_mass(bundled):
    return bundled("two_mass_oscillator")


def experiment(system, ns, inp):
    sc = ns["SCENARIO"].replace(inputs={"F": ns["REFERENCE_INPUTS"][inp]})
    data = Measurement.from_trajectory(system.simulate(sc), ["x2"])      # c2 = 1100
    return Experiment(system, LeastSquares(data, ["x2"], quadrature="sum"), sc, name=inp)


@pytest.mark.parametrize("inp", ["F0", "sine"])
def test_spread_matches_the_fisher_prediction(two_mass, inp):
    system, ns = two_mass
    exp = experiment(system, ns, inp)
    with ThreadPoolExecutor(2) as pool:
        mc = monte_carlo([exp], ["c2"], ns["START"], {"x2": SIGMA}, RUNS, seed=2024,
                         executor=pool)
    print("\n" + mc.table())
    assert mc.n_runs == RUNS and mc.failures == ()
    assert mc.truth["c2"] == pytest.approx(1100.0, rel=1e-12)   # noise-free identification
    if inp == "F0":
        assert mc.predicted[0] == pytest.approx(SIGMA / math.sqrt(F0_FISHER_AT_TRUTH),
                                                rel=1e-9)
    # the predicted standard deviation lies in the sample's 99.9 % interval (chi-square)
    assert mc.agrees(0.999) == {"c2": True}, mc.table()
    # unbiased within its sampling error
    assert abs(mc.mean[0] - 1100.0) < 4 * mc.std[0] / math.sqrt(RUNS)
    # every run reports (noise estimated from its own residual) about the same standard error
    assert np.nanmean(mc.reported[:, 0]) == pytest.approx(mc.predicted[0], rel=0.02)
    assert np.all(np.abs(mc.reported[:, 0] / mc.predicted[0] - 1) < 0.15)
    # at this noise level the estimator is nearly linear: each identified c2 equals the
    # linearised estimate c2 + (S^T e) / (S^T S) for its own noise draw e (same seeds), up to
    # the second-order term (about 1e-3 of the spread here)
    traj = system.simulate(exp.scenario, store_factorizations=True)
    S = output_sensitivities(system, traj, ["c2"], ["x2"]).S[:, 0, 0]
    draws = [np.random.default_rng(s).normal(0.0, SIGMA, S.size)
             for s in np.random.SeedSequence(2024).spawn(RUNS)]
    linear = 1100.0 + np.array([S @ e for e in draws]) / (S @ S)
    assert np.max(np.abs(mc.values[:, 0] - linear)) < 1e-2 * mc.predicted[0]


def test_runs_do_not_depend_on_the_executor(two_mass):
    system, ns = two_mass
    exp = experiment(system, ns, "F0")
    serial = monte_carlo([exp], ["c2"], ns["START"], SIGMA, 4, truth={"c2": 1100.0},
                         method="gauss-newton-plain")
    with ThreadPoolExecutor(2) as pool:
        threads = monte_carlo(lambda: [exp], ["c2"], ns["START"], SIGMA, 4,
                              truth={"c2": 1100.0}, method="gauss-newton-plain",
                              executor=pool, batch=3)
    assert np.array_equal(serial.values, threads.values)
    assert serial.executor == "serial" and threads.executor == "ThreadPoolExecutor"
    d = serial.to_dict()
    assert d["runs"] == 4 and d["rows"][0]["parameter"] == "c2"


def test_bad_input(two_mass):
    system, ns = two_mass
    exp = experiment(system, ns, "F0")
    with pytest.raises(InputError, match="runs must be a whole number >= 2"):
        monte_carlo([exp], ["c2"], ns["START"], SIGMA, 1)
    with pytest.raises(InputError, match="must be a positive finite"):
        monte_carlo([exp], ["c2"], ns["START"], {"x2": 0.0}, 4)
    with pytest.raises(InputError, match="must be a positive finite"):
        monte_carlo([exp], ["c2"], ns["START"], float("nan"), 4)


def test_a_study_that_cannot_fit_is_refused_before_any_run(two_mass, monkeypatch):
    """The memory of one identification times the runs done at once, checked first."""
    import symdae.simulation.memory as memory
    from symdae.simulation.memory import MemoryLimitError

    system, ns = two_mass
    exp = experiment(system, ns, "F0")
    one = symdae.identification.identify.identification_estimate(exp, 1, "least_squares")
    monkeypatch.setattr(memory, "available_memory", lambda: int(1.5 * one.total))
    monkeypatch.setattr(memory, "free_memory", lambda: 0)
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)        # two cores: two runs at once
    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(MemoryLimitError, match=r"2 runs at once.*or fewer workers"):
            monte_carlo([exp], ["c2"], ns["START"], {"x2": SIGMA}, RUNS, executor=pool)
    # one at a time fits
    mc = monte_carlo([exp], ["c2"], ns["START"], {"x2": SIGMA}, 2, seed=1)
    assert mc.n_runs == 2
