"""What users pass at run time, in the forms they write: parameters by name or by Symbol,
q0/v0 as {coordinate: value}, input callables with an ``if`` on the time."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import symdae
from symdae import Experiment, LeastSquares, Measurement, UnknownNameError, identify
from symdae.errors import InputError

c, d, q_init = sp.symbols("c d q_init")


@pytest.fixture(scope="module")
def oscillator(bundled):
    return bundled("oscillator")[0]


def test_parameters_by_symbol_or_by_name(oscillator):
    by_name = oscillator.simulate(t_end=0.5, h=1e-3, params={"c": 41.0})
    by_symbol = oscillator.simulate(t_end=0.5, h=1e-3, params={c: 41.0})
    np.testing.assert_array_equal(by_name.q, by_symbol.q)
    data = Measurement.from_trajectory(by_name, ["q"])
    exp = Experiment(oscillator, LeastSquares(data, ["q"]), symdae.Scenario(t_end=0.5, h=1e-3))
    for free, start, bounds in (([c], {c: 30.0}, {c: (1.0, 100.0)}),
                                (["c"], {c: 30.0}, None), ([c], {"c": 30.0}, {"c": (1, 99)})):
        res = identify(exp, free, start, bounds=bounds, progress=False)
        assert res.free == ["c"] and res.values["c"] == pytest.approx(41.0, rel=1e-9)
    with pytest.raises(InputError, match="parameter 'c' is given twice"):
        identify(exp, [c], {c: 30.0, "c": 31.0}, progress=False)
    S = symdae.output_sensitivities(oscillator, by_name, c, ["q"]).S
    S_name = symdae.output_sensitivities(oscillator, by_name, ["c"], ["q"]).S
    np.testing.assert_array_equal(S, S_name)


def test_initial_state_as_a_mapping(oscillator):
    """q0 = {coordinate: value} (by name or by the coordinate); the entries given do not
    depend on the parameters, the others still do (the tangent sensitivity of q to q_init
    is then 0 at t0 instead of 1)."""
    model = oscillator.model
    q = model.coordinates[0]
    sc = symdae.Scenario(t_end=0.2, h=1e-3)
    free = oscillator.simulate(sc, store_factorizations=True)
    for q0 in ({"q": 0.5}, {q: 0.5}):
        run = oscillator.simulate(sc.replace(q0=q0), store_factorizations=True)
        assert run.q[0, 0] == 0.5 and run.v[0, 0] == 0.0
        sens = symdae.output_sensitivities(oscillator, run, ["q_init"], ["q"]).S
        assert np.all(sens == 0.0)
    # from the model's expression q0 = q_init: dq/dq_init = 1 at t0
    assert symdae.output_sensitivities(oscillator, free, ["q_init"], ["q"]).S[0, 0, 0] == 1.0
    # an array still works; so does v0 as a mapping
    run = oscillator.simulate(sc.replace(q0=[0.5], v0={"q": -1.0}))
    assert run.q[0, 0] == 0.5 and run.v[0, 0] == -1.0
    with pytest.raises(UnknownNameError, match=r"q0: 'x' is not a coordinate of the model; "
                                               r"its coordinates are \['q'\]"):
        oscillator.simulate(sc.replace(q0={"x": 1.0}))
    with pytest.raises(InputError, match=r"q0\['q'\] is not a number: 'one'"):
        oscillator.simulate(sc.replace(q0={"q": "one"}))
    with pytest.raises(InputError, match="q0 must be an array of 1 numbers"):
        oscillator.simulate(sc.replace(q0=["a", None]))


def test_input_callable_with_an_if():
    model, ns = symdae.load_model("cart_pendulum")
    system = symdae.compile_model(model)
    sc = ns["SCENARIO"]

    def step(t):                     # a scalar function: `if` on an array would be ambiguous
        return 1.0 if t < 0.5 else 0.0

    run = system.simulate(sc.replace(inputs={"F": step}))
    ref = system.simulate(sc.replace(inputs={"F": np.where(sc.times < 0.5, 1.0, 0.0)}))
    np.testing.assert_array_equal(run.q, ref.q)
