"""Exact gradients of non-smooth models (README, "Non-smooth forces").

The discrete cost J(p) of a model with sign / Max / Heaviside terms is smooth in p as long as
no switching function changes sign *at a grid point* (a switch inside a step only changes which
branch the residual at its end point evaluates). There the discrete adjoint is exact: it must
equal the tangent-linear sweep to round-off (1e-10) and central finite differences to their
truncation error, which must fall like delta^2 (Richardson check), with FD steps that move no
switch across a grid point (asserted: every switching function has the same signs on the grid
at p +- delta).

Cases: the mass on a belt with the sign law (transient slip, 3 switches inside steps), its
smooth regularisation (tanh law) over stick-slip cycles, and the end stop (Max(0, pen)
(k_c + d_c x'), 12 switches). ``pytest -s`` prints the measured errors.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import symdae
from symdae.costs.time_domain import LeastSquares
from symdae.simulation.sensitivity import adjoint_gradient, tangent

TLM_TOL = 1e-10
FD_TOL = 1e-6
RATIO = (3.2, 5.0)      # err(delta) / err(delta / 2) for an O(delta^2) error


@functools.cache
def case(name: str):
    model, ns = symdae.load_model("belt_friction")
    if name == "belt_sign":
        # J carries Newton's tolerance (about 1e-10 of this gradient's size over the FD step,
        # either way): at delta = 1e-6 that is a tenth of the truncation error, enough to
        # move the Richardson ratio out of its band; at 4e-6 it is a hundredth
        return symdae.compile_model(ns["model_sign"]), ns["SCENARIO_SLIP"], ["x", "v"], 4e-6
    if name == "belt_tanh":
        return symdae.compile_model(model), ns["SCENARIO"], ["x", "v"], 1e-6
    model, ns = symdae.load_model("end_stop")
    return symdae.compile_model(model), ns["SCENARIO"], ["x", "contact"], 1e-5


def run(system, sc, p, store=False):
    return system.simulate(sc, params=dict(zip(system.model.parameter_names, p)),
                           store_factorizations=store)


def pattern(system, traj, p):
    """The signs of every switching function at every grid point."""
    U = np.zeros((len(traj.t), 0))
    if not system.switch_counter.functions:
        return np.zeros((len(traj.t), 0))
    return np.sign(system.switch_counter.values(traj.t, traj.q, traj.v, traj.a, traj.lam, p, U))


@pytest.mark.parametrize("name", ["belt_sign", "belt_tanh", "end_stop"])
def test_adjoint_equals_tangent_and_central_differences(name):
    system, sc, outputs, delta = case(name)
    names = system.model.parameter_names
    p0 = np.array(system.model.nominal_values)
    ref = run(system, sc, p0 * (1.0 + 0.01 * np.sin(np.arange(len(p0)) + 1.0)))
    cost = LeastSquares({k: ref.outputs[k] for k in outputs},
                        weights={k: 1.0 / np.mean(ref.outputs[k] ** 2) for k in outputs})
    traj = run(system, sc, p0, store=True)
    # the sign law and the end stop switch inside steps, never on a grid point; the tanh law
    # (tanh(z / v_eps), sqrt(z^2 + v_eps^2)) is smooth: no switching function at all
    assert (traj.counters.get("switches", 0) > 0) == (name != "belt_tanh")
    assert traj.counters.get("on_switch", 0) == 0
    J, dPhi = cost.evaluate(system, traj)
    g_adj = adjoint_gradient(system, traj, dPhi)
    g_tlm = np.einsum("is,isd->d", dPhi, tangent(system, traj, names).ds)
    scale = np.max(np.abs(g_tlm * p0))
    e_tlm = np.max(np.abs(g_adj - g_tlm) * np.abs(p0)) / scale
    assert e_tlm <= TLM_TOL, e_tlm

    def central(k, rel):
        d = rel * abs(p0[k])
        pp, pm = p0.copy(), p0.copy()
        pp[k] += d
        pm[k] -= d
        tp, tm = run(system, sc, pp), run(system, sc, pm)
        # away from switching boundaries: no switch crossed a grid point between p - d and p + d
        assert np.array_equal(pattern(system, tp, pp), pattern(system, tm, pm))
        return (cost.evaluate(system, tp)[0] - cost.evaluate(system, tm)[0]) / (2 * d)

    errs = []
    for k, pname in enumerate(names):
        if p0[k] == 0:
            continue
        e1 = abs(central(k, delta) - g_adj[k]) * abs(p0[k]) / scale
        e2 = abs(central(k, delta / 2) - g_adj[k]) * abs(p0[k]) / scale
        errs.append((pname, e1, e2))
        assert e2 <= FD_TOL, (pname, e1, e2)
    worst = max(errs, key=lambda r: r[1])
    print(f"\n{name}: J = {J:.4g}, switches {traj.counters.get('switches', 0)}, adjoint vs "
          f"tangent "
          f"{e_tlm:.1e}, adjoint vs FD {worst[1]:.1e} ({worst[0]}, delta = {delta:g}) -> "
          f"{worst[2]:.1e} (delta / 2)")
    # the dominant FD error is truncation: it falls like delta^2
    assert worst[1] > 1e-9 and RATIO[0] <= worst[1] / worst[2] <= RATIO[1], worst
