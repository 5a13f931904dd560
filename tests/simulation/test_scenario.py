"""The Scenario record, and experiments evaluated serially and on an executor."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from symdae import Experiment, LeastSquares, Measurement, Scenario, evaluate_many
from symdae.errors import InputError
from symdae.simulation.scenario import physical_memory


@pytest.fixture(scope="module")
def oscillator(bundled):
    return bundled("oscillator")[0]


def test_grid():
    sc = Scenario(t_end=1.0, h=0.25, t0=0.5 - 0.5)
    assert sc.n_steps == 4
    np.testing.assert_array_equal(sc.times, [0.0, 0.25, 0.5, 0.75, 1.0])
    assert Scenario(t_end=2.0, h=0.5, t0=1.0).n_steps == 2


def test_the_grid_is_one_read_only_array():
    import pickle
    sc = Scenario(t_end=1.0, h=0.25)
    assert sc.times is sc.times and not sc.times.flags.writeable
    back = pickle.loads(pickle.dumps(sc))
    assert back == sc and not back.times.flags.writeable
    np.testing.assert_array_equal(back.times, sc.times)


@pytest.mark.parametrize("fields, message", [
    (dict(t_end=1.0, h=0.3), "not a whole multiple"),
    (dict(t_end=1.0, h=-0.1), "must be positive"),
    (dict(t_end=1.0, h=math.nan), "h must be a finite number"),
    (dict(t_end=0.0, h=0.1), "must be greater than t0"),
    (dict(t_end=1.0, h=0.1, alpha=0.1), r"alpha must lie in \[-1/3, 0\]"),
    (dict(t_end=1.0, h=0.1, rtol=0.0), r"rtol must lie in \(0, 1\)"),
    (dict(t_end=1.0, h=0.1, max_iter=2.9), "max_iter must be a whole number"),
    (dict(t_end=1.0, h=0.1, max_iter=0), "max_iter must be a whole number"),
    (dict(t_end=1.0, h=0.1, init_tol=-1.0), "init_tol must be positive"),
    (dict(t_end=1.0, h=0.1, inputs=[1.0]), "inputs must be a mapping"),
    (dict(t_end=1.0, h=1e-320), "steps, more than any trajectory can hold"),
])
def test_bad_fields_are_named(fields, message):
    with pytest.raises(InputError, match=message):
        Scenario(**fields)


def test_make_and_replace():
    base = Scenario(t_end=1.0, h=0.1)
    assert Scenario.make(base) is base
    assert Scenario.make(base, h=0.05).n_steps == 20
    assert Scenario.make({"t_end": 2.0, "h": 0.5}, alpha=-0.3).alpha == -0.3
    assert base.replace(alpha=-0.2).alpha == -0.2 and base.alpha == -0.1
    with pytest.raises(InputError, match=r"unknown scenario field\(s\) \['dt'\]"):
        Scenario.make({"t_end": 1.0, "dt": 0.1})
    with pytest.raises(InputError, match="needs h"):
        Scenario.make(t_end=1.0)
    with pytest.raises(InputError, match=r"rtol must lie in \(0, 1\), got 2.0"):
        base.replace(rtol=2.0)  # validated again

def test_simulate_takes_a_scenario_or_its_fields(oscillator):
    sc = Scenario(t_end=0.5, h=0.01, alpha=-0.2)
    a = oscillator.simulate(sc, params={"c": 30.0})
    b = oscillator.simulate(t_end=0.5, h=0.01, alpha=-0.2, params={"c": 30.0})
    c = oscillator.simulate(sc.replace(alpha=0.0), params={"c": 30.0})
    np.testing.assert_array_equal(a.q, b.q)
    assert a.scenario == sc and a.h == 0.01 and a.alpha == -0.2
    assert not np.array_equal(a.q, c.q)
    with pytest.raises(InputError):
        oscillator.simulate()


def test_memory_is_checked_before_allocating(oscillator):
    steps = 2 * physical_memory() // 8   # > the machine's memory in doubles
    with pytest.raises(InputError, match=f"the trajectory needs about .* \\({steps + 1} grid "
                       "points x 64 bytes\\), .* of memory is available; shrink it with"):
        oscillator.simulate(t_end=steps * 1e-8, h=1e-8)


def test_experiments_serial_and_on_threads_agree(oscillator):
    truth = Scenario(t_end=1.0, h=1e-3)
    exps = []
    for q_init in (1.0, -0.4, 0.3):
        data = Measurement.from_trajectory(
            oscillator.simulate(truth, params={"q_init": q_init}), ["a"])
        exps.append(Experiment(oscillator, LeastSquares(data), truth,
                               params={"q_init": q_init}, name=f"q0={q_init}"))
    p = {"c": 37.0, "d": 0.5}
    serial = evaluate_many(exps, p)
    with ThreadPoolExecutor(2) as pool:
        threaded = evaluate_many(exps, p, pool)
    for s, t in zip(serial, threaded):
        assert s.cost == t.cost and s.cost > 0
        np.testing.assert_array_equal(s.gradient, t.gradient)
    # one parameter set per experiment
    each = evaluate_many(exps, [p, {"c": 40.0, "d": 0.4}, p], gradient=False)
    assert each[1].cost == 0.0 and each[1].gradient is None
    with pytest.raises(InputError, match="2 parameter sets for 3 experiments"):
        evaluate_many(exps, [p, p])


def test_experiment_takes_only_a_cost(oscillator):
    with pytest.raises(InputError, match="cost must be a symdae Cost"):
        Experiment(oscillator, lambda s, tr: (0.0, None), Scenario(t_end=1.0, h=0.1))
