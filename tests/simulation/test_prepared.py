"""A prepared run (System.prepare) and the one an Experiment keeps: the same trajectory as
System.simulate bit for bit, the scenario's inputs read once, a replaced scenario or system
prepared again, and q0, v0 given as numbers validated once (initial.given_start)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import symdae
from symdae import Experiment, LeastSquares
from symdae.errors import ModelError
from symdae.simulation.initial import constant_start, given_start, initial_state
from symdae.simulation.prepared import PreparedRun


@pytest.fixture(scope="module")
def oscillator(bundled):
    return bundled("two_mass_oscillator")


def forcing(calls):
    def F(t):
        calls.append(np.shape(t))
        return 0.5 * np.sin(20.0 * t)
    return F


def test_run_of_a_prepared_scenario_is_simulate(oscillator):
    system, ns = oscillator
    sc = ns["SCENARIO"].replace(t_end=0.3, inputs={"F": forcing([])}, q0=[1e-3, 0.0])
    prep = system.prepare(sc)
    assert isinstance(prep, PreparedRun) and system.prepare(prep) is prep
    assert not prep.U.flags.writeable and prep.t is sc.times and prep.grid == sc.grid()
    run = system.run(prep, {"c2": 900.0})
    ref = system.simulate(sc, params={"c2": 900.0})
    for kind in ("q", "v", "a", "lam"):
        np.testing.assert_array_equal(getattr(run, kind), getattr(ref, kind))
    np.testing.assert_array_equal(run.S, ref.S)
    assert system.prepare(sc, t_end=0.2).scenario.n_steps == 200
    assert system.prepare(prep, t_end=0.2).scenario == sc.replace(t_end=0.2)


def test_the_segmented_runs_take_a_prepared_run(oscillator):
    """simulate_segments and checkpointed_sensitivities read a prepared run's inputs (the
    callable is not called again) and take the very steps of the one long run."""
    from symdae.simulation.checkpoint import checkpointed_sensitivities, simulate_segments
    system, ns = oscillator
    calls = []
    sc = ns["SCENARIO"].replace(t_end=0.3, inputs={"F": forcing(calls)}, q0=[1e-3, 0.0])
    prep = system.prepare(sc)
    assert calls == [(301,)]
    ref = system.run(prep, {"c2": 900.0})
    budget = 120 * system.sizes.gradient_row_bytes         # segments of about 60 steps
    mplan, pieces = simulate_segments(system, prep, {"c2": 900.0}, memory_budget=budget)
    pieces = list(pieces)
    assert mplan.segments == len(pieces) > 1 and calls == [(301,)]
    q = np.concatenate([pieces[0].q] + [piece.q[1:] for piece in pieces[1:]])
    np.testing.assert_array_equal(q, ref.q)
    assert pieces[-1].params == ref.params and pieces[-1].scenario is sc
    dS = checkpointed_sensitivities(system, prep, ["c2"], {"c2": 900.0}, memory_budget=budget)
    assert calls == [(301,)]
    whole = checkpointed_sensitivities(system, sc, ["c2"], {"c2": 900.0})
    assert calls == [(301,), (301,)]                 # a scenario is prepared, inputs and all
    np.testing.assert_array_equal(dS, whole)       # the tangent carried across, bit for bit


def test_trajectory_of_a_run_s_pieces(oscillator):
    system, ns = oscillator
    sc = ns["SCENARIO"].replace(t_end=0.01)
    t = sc.times
    S = np.arange(len(t) * system.sizes.n_s, dtype=float).reshape(len(t), -1)
    p = system.parameter_vector({"c2": 900.0})
    traj = system.trajectory(t, S, sc, p, {"steps": 10})
    assert traj.q is None and traj.lam is None and traj.counters == {"steps": 10}
    assert traj.params == system.trajectory(t, S, sc, traj.params, {}).params
    assert traj.params["c2"] == 900.0 and list(traj.params) == system.model.parameter_names
    for j, name in enumerate(system.model.output_names):
        assert np.shares_memory(traj.outputs[name], S)
        np.testing.assert_array_equal(traj.outputs[name], S[:, j])
    # the names are the trajectory's own lists
    traj.coordinate_names.append("x")
    assert system.model.coordinate_names[-1] != "x"


def test_experiment_reads_its_inputs_once_and_again_for_a_new_scenario(oscillator):
    system, ns = oscillator
    calls = []
    sc = ns["SCENARIO"].replace(t_end=0.2, inputs={"F": forcing(calls)})
    data = system.simulate(sc).outputs["x2"].copy()
    calls.clear()
    exp = Experiment(system, LeastSquares({"x2": data}), sc)
    first = exp.evaluate({"c2": 1000.0}, gradient=True)
    second = exp.evaluate({"c2": 1000.0}, gradient=True)
    assert calls == [(201,)]                         # once, on the whole grid
    assert first.cost == second.cost > 0
    np.testing.assert_array_equal(first.gradient, second.gradient)
    # a new scenario with other inputs is prepared again: the cost of its own run
    exp.scenario = sc.replace(inputs={"F": 0.1})
    moved = exp.evaluate({"c2": 1000.0})
    fresh = Experiment(system, LeastSquares({"x2": data}), sc.replace(inputs={"F": 0.1}))
    assert moved.cost == fresh.evaluate({"c2": 1000.0}).cost != first.cost
    assert len(calls) == 1


def test_a_pickled_experiment_prepares_again(oscillator):
    system, ns = oscillator
    sc = ns["SCENARIO"].replace(t_end=0.1)
    data = system.simulate(sc).outputs["x2"].copy()
    exp = Experiment(system, LeastSquares({"x2": data}), sc)
    J = exp.evaluate({"c2": 1050.0}).cost
    assert exp._prepared is not None
    back = pickle.loads(pickle.dumps(exp))
    assert back._prepared is None
    assert back.evaluate({"c2": 1050.0}).cost == J
    assert not back.prepared().U.flags.writeable


def test_given_start(oscillator):
    system, ns = oscillator
    model = system.model
    assert given_start(model, None, [0.0, 0.0]) is None
    assert given_start(model, [0.0, 0.0], {"x1": 1.0}) is None      # partly the model's
    q, q_model, v, v_model = given_start(model, [1e-3, 0.0], (0.0, 0.2))
    np.testing.assert_array_equal(q, [1e-3, 0.0])
    np.testing.assert_array_equal(v, [0.0, 0.2])
    assert not q_model.any() and not v_model.any()
    assert not any(x.flags.writeable for x in (q, q_model, v, v_model))
    with pytest.raises(ModelError, match="q0 contains NaN"):
        given_start(model, [np.nan, 0.0], [0.0, 0.0])
    with pytest.raises(ModelError, match="v0 has shape"):
        system.prepare(ns["SCENARIO"].replace(q0=[0.0, 0.0], v0=[0.0]))
    p = system.parameter_vector()
    x0 = initial_state(system.backend, model, p, 0.0, np.array([0.3]), [1e-3, 0.0], (0.0, 0.2))
    x1 = initial_state(system.backend, model, p, 0.0, np.array([0.3]), None, None,
                       given=given_start(model, [1e-3, 0.0], (0.0, 0.2)))
    for a, b in zip((x0.q, x0.v, x0.a, x0.lam), (x1.q, x1.v, x1.a, x1.lam)):
        np.testing.assert_array_equal(a, b)


def test_a_start_from_the_model_s_numbers_is_given_once(oscillator):
    """q0, v0 the model's initial-state expressions give as numbers (from rest) are worked
    out when the run is prepared, by the backend's own kernel, and are the very start of a
    run that asks the model at its parameters; expressions in p are left to each run."""
    system, ns = oscillator
    model, backend = system.model, system.backend
    assert constant_start(model)
    calls = []

    def model_start():
        calls.append(1)
        return backend.model_start(0.0, system.parameter_vector(), [0.3])

    q, q_model, v, v_model = given_start(model, None, None, model_start)
    assert calls == [1] and q_model.all() and v_model.all()
    ref = backend.model_start(0.0, system.parameter_vector({"c2": 700.0}), [0.0])
    np.testing.assert_array_equal(q, ref[0])
    np.testing.assert_array_equal(v, ref[1])
    # partly given: the given entries are not the model's
    q, q_model, v, v_model = given_start(model, [1e-3, 0.0], {"x1": 0.2}, model_start)
    np.testing.assert_array_equal(v_model, [False, True])
    assert not q_model.any() and v[0] == 0.2 and calls == [1, 1]
    # numbers given for both: the model is not asked
    given_start(model, [1e-3, 0.0], [0.0, 0.0], lambda: pytest.fail("asked the model"))
    p = system.parameter_vector({"c2": 700.0})
    prep = system.prepare(ns["SCENARIO"].replace(t_end=0.05))
    assert prep.start is not None
    x0 = initial_state(backend, model, p, 0.0, prep.U[0], None, None)
    x1 = initial_state(backend, model, p, 0.0, prep.U[0], None, None, given=prep.start)
    for a, b in zip((x0.q, x0.v, x0.a, x0.lam, x0.from_model),
                    (x1.q, x1.v, x1.a, x1.lam, x1.from_model)):
        np.testing.assert_array_equal(a, b)
    # a start in the parameters is worked out at each run
    pendulum, _ = symdae.load_model("double_pendulum")
    assert not constant_start(pendulum)
    assert given_start(pendulum, None, None, lambda: pytest.fail("asked the model")) is None


def test_prepare_refuses_a_grid_larger_than_memory(oscillator):
    system, ns = oscillator
    from symdae.simulation.scenario import physical_memory
    steps = 2 * physical_memory() // 8
    with pytest.raises(symdae.errors.InputError,
                       match=f"the time grid and the inputs on it needs about .* "
                             f"\\({steps + 1} grid points x 16 bytes\\)"):
        system.prepare(ns["SCENARIO"].replace(t_end=steps * 1e-8, h=1e-8))
