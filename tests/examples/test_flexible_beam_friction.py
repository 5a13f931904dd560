"""The flexible beam's supports with dry friction: the friction variant of the POD paper's
uncertain joints (models/flexible_beam.py, ``model_friction``: Fs tanh(y' / v_eps) in each
support, Fs = 2 N, v_eps = 1 cm/s).

1. The friction beam is smooth (regularised law): adjoint = tangent to round-off.
2. Twin identification of EI and the friction force Fs from the 11 displacements finds both
   from a 20 % / 50 % wrong start.
3. The friction matters: the plain beam (viscous supports only) fitted to the friction beam's
   data puts EI 5.1 times too high (the supports stick most of the time, so the beam looks
   stiffer), and with the spec's mismatched supports (UNCERTAIN_JOINTS) still 50 % too high.
   (v_eps = 1 mm/s is too stiff for h = 1e-4: Newton on the tanh stalls at Fs = 3 N.)
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import symdae
from symdae import Experiment, LeastSquares, Measurement, identify
from symdae.simulation.sensitivity import adjoint_gradient, tangent


@functools.cache
def beams():
    model, ns = symdae.load_model("flexible_beam")
    friction = symdae.compile_model(ns["model_friction"])
    data = Measurement.from_trajectory(friction.simulate(ns["SCENARIO"]), ns["OUTPUTS"])
    return symdae.compile_model(model), friction, data, ns


def test_friction_beam_gradient_is_exact():
    _, friction, _, ns = beams()
    sc = ns["SCENARIO"].replace(t_end=0.1)
    cost = LeastSquares(Measurement.from_trajectory(friction.simulate(sc), ns["OUTPUTS"]),
                        ns["OUTPUTS"])
    names = friction.model.parameter_names
    traj = friction.simulate(sc, params={"EI": 450.0, "Fs": 2.5}, store_factorizations=True)
    J, dPhi = cost.evaluate(friction, traj)
    g_adj = adjoint_gradient(friction, traj, dPhi)
    g_tlm = np.einsum("is,isd->d", dPhi, tangent(friction, traj, names).ds)
    p = friction.parameter_vector({"EI": 450.0, "Fs": 2.5})
    err = np.max(np.abs(g_adj - g_tlm) * p) / np.max(np.abs(g_tlm) * p)
    print(f"\nfriction beam: adjoint vs tangent {err:.1e}")
    assert err <= 1e-10


def test_twin_identification_of_stiffness_and_joint_friction():
    _, friction, data, ns = beams()
    exp = Experiment(friction, LeastSquares(data, ns["OUTPUTS"]), ns["SCENARIO"])
    res = identify(exp, ["EI", "Fs"], {"EI": 400.0, "Fs": 3.0}, progress=False)
    err = res.relative_error({"EI": 500.0, "Fs": 2.0})
    print(f"\nfriction beam, twin data: {res.values}, relative errors {err}")
    assert max(err.values()) <= 1e-8


@pytest.mark.slow     # two identifications of the beam; the gradient and the twin fit above
def test_ignoring_the_joint_friction_biases_the_stiffness():
    plain, _, data, ns = beams()
    out = []
    for params in ({}, ns["UNCERTAIN_JOINTS"]):
        exp = Experiment(plain, LeastSquares(data, ns["OUTPUTS"]), ns["SCENARIO"],
                         params=params)
        out.append(identify(exp, ["EI"], ns["START"], progress=False).values["EI"] / 500.0)
    print(f"\nplain beam on the friction beam's data: EI / true = {out[0]:.3f} (nominal "
          f"supports), {out[1]:.3f} (UNCERTAIN_JOINTS)")
    assert out[0] > 4.0 and out[1] > 1.3
