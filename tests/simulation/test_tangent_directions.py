"""The tangent sweep takes all its directions in one pass: its numbers are those of one sweep
per direction, and keeping only the output sensitivities changes none of them.

The four-bar linkage (models/fourbar.py) has a mass matrix that depends on q and nonlinear
loop-closure constraints with the link lengths l1, l2, l3 inside them, so every block of the
step (the state Jacobians J_M, J_G, G_V, C_q, the parameter Jacobians P_M, P_G, P_C and the
output Jacobians) enters the tangent. Both schemes: hht-paper (alpha != 0 weighs the previous
state's g: the products with x_i's blocks) and hht-ga (its own algorithmic acceleration w).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import symdae
from symdae.simulation.sensitivity import adjoint_gradient, tangent

FIELDS = ("dq", "dv", "da", "dlam", "ds")
# the directions: parameters inside the constraints, in the mass matrix, in the forces and in
# the initial state, then two mixed ones
NAMES = ["l1", "l2", "l3", "m2", "k", "th10"]


@functools.cache
def fourbar():
    model, ns = symdae.load_model("fourbar")
    return symdae.compile_model(model), ns


def run(scheme: str):
    system, ns = fourbar()
    sc = symdae.Scenario(**{**ns["SCENARIO"], "t_end": 0.5, "scheme": scheme})
    return system, system.simulate(sc)


def direction_matrix(system) -> np.ndarray:
    names = system.model.parameter_names
    D = np.zeros((len(names), len(NAMES) + 2))
    for j, name in enumerate(NAMES):
        D[names.index(name), j] = 1.0
    p = np.abs(np.array(system.model.nominal_values, dtype=float))
    D[:, -2:] = np.random.default_rng(3).normal(size=(len(names), 2)) * p[:, None]
    return D


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| over max |b|, per direction (the last axis), the largest of them."""
    scale = np.max(np.abs(b), axis=tuple(range(b.ndim - 1)))
    assert np.all(scale > 0)
    return float(np.max(np.max(np.abs(a - b), axis=tuple(range(b.ndim - 1))) / scale))


@pytest.mark.parametrize("scheme", ["hht-paper", "hht-ga"])
def test_all_directions_at_once_equal_one_sweep_each(scheme):
    """Bit for bit: each direction takes the same operations whatever goes with it (the
    products' pairs of directions and their odd one out, the written-out solve on strided
    right-hand sides, the initial state's sensitivities one direction at a time)."""
    system, traj = run(scheme)
    D = direction_matrix(system)
    alone = [tangent(system, traj, D[:, j:j + 1]) for j in range(D.shape[1])]
    for cols in (range(D.shape[1]), range(3), range(2, 6)):
        together = tangent(system, traj, D[:, list(cols)])
        for k, j in enumerate(cols):
            for f in FIELDS:
                np.testing.assert_array_equal(getattr(together, f)[:, :, k:k + 1],
                                              getattr(alone[j], f), err_msg=f"{scheme} {j} {f}")


@pytest.mark.parametrize("scheme", ["hht-paper", "hht-ga"])
def test_output_sensitivities_without_states_are_the_same_numbers(scheme):
    system, traj = run(scheme)
    D = direction_matrix(system)
    full = tangent(system, traj, D)
    lean = tangent(system, traj, D, states=False)
    np.testing.assert_array_equal(lean.ds, full.ds)
    for f in ("dq", "dv", "da", "dlam"):
        assert getattr(lean, f).shape == (1,) + getattr(full, f).shape[1:]
        np.testing.assert_array_equal(getattr(lean, f)[0], getattr(full, f)[-1])


@pytest.mark.parametrize("scheme", ["hht-paper", "hht-ga"])
def test_multi_direction_tangent_is_the_adjoint_projection(scheme):
    """dPhi . ds along every direction = D^T (adjoint gradient): the adjoint is an independent
    sweep (one backward pass, no directions). dPhi weighs the angle and speed outputs (the
    multipliers' sensitivities carry round-off amplified by 1 / h^2: index 3)."""
    system, traj = run(scheme)
    D = direction_matrix(system)
    dPhi = np.random.default_rng(5).normal(size=(len(traj.t), len(traj.outputs)))
    dPhi[:, [system.model.output_names.index(o) for o in ("Fx", "Fy")]] = 0.0
    lhs = np.einsum("is,isd->d", dPhi, tangent(system, traj, D, states=False).ds)
    rhs = D.T @ adjoint_gradient(system, traj, dPhi)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10, atol=1e-12 * np.max(np.abs(rhs)))
