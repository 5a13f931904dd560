"""Memory-bounded gradients: a run in checkpointed segments takes the very steps of one long
run (outputs bit for bit), and its adjoint gradient and tangent sensitivities equal those of
the fully stored run bit for bit, on both backends and on constrained models."""
from __future__ import annotations

import numpy as np
import pytest

import symdae
from symdae import Experiment, LeastSquares, Scenario
from symdae.errors import InputError
from symdae.model.kernels import Sizes
from symdae.simulation.checkpoint import (
    _checkpoint_bytes,
    checkpointed_sensitivities,
    cost_and_gradient,
    plan,
)
from symdae.simulation.sensitivity import adjoint_gradient


def budget_for(system, steps: int, segments: int) -> int:
    """A budget that makes about ``segments`` segments of a ``steps``-step run."""
    sz = system.sizes
    return max(2 * sz.gradient_row_bytes * (steps // segments + 2),
               2 * (segments + 1) * _checkpoint_bytes(sz))


def case(name, backend, steps, scheme="hht-paper"):
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model, backend=backend)
    sc = Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3})
    sc = sc.replace(t_end=sc.t0 + steps * sc.h, scheme=scheme)
    data = system.simulate(sc).outputs
    cost = LeastSquares({k: data[k] for k in model.output_names},
                        weights={k: 1 / np.mean(data[k] ** 2) for k in model.output_names})
    moved = {k: v * 1.03 for k, v in zip(model.parameter_names, system.parameter_vector())
             if v}
    return system, sc, cost, moved


@pytest.mark.parametrize("name, backend, steps, scheme", [
    ("engine_mount", "compiled", 3000, "hht-paper"), ("slider_crank", "compiled", 2000, "hht-paper"),
    ("pendulum", "compiled", 1000, "hht-paper"), ("slider_crank", "numpy", 120, "hht-paper"),
    ("pendulum", "numpy", 90, "hht-paper"), ("fourbar", "compiled", 1000, "hht-ga"),
    ("andrews_squeezer", "compiled", 1500, "hht-ga"), ("fourbar", "numpy", 90, "hht-ga")])
def test_checkpointed_gradient_is_the_stored_gradient(name, backend, steps, scheme):
    system, sc, cost, moved = case(name, backend, steps, scheme)
    full = cost_and_gradient(system, sc, cost, moved)
    seg = cost_and_gradient(system, sc, cost, moved,
                            memory_budget=budget_for(system, steps, 6))
    assert full.plan.segments == 1 and not full.plan.recomputes
    # every segment but the last is recomputed once (the last one's states are still there)
    last = steps - (seg.plan.segments - 1) * seg.plan.segment
    assert seg.plan.segments >= 5 and seg.recomputed_steps == steps - last
    assert seg.trajectory.q is None                      # the states were not kept
    with pytest.raises(InputError, match="kept its outputs only"):
        seg.trajectory.coordinate(system.model.coordinate_names[0])
    np.testing.assert_array_equal(seg.trajectory.S, full.trajectory.S)
    assert seg.cost == full.cost
    np.testing.assert_array_equal(seg.gradient, full.gradient)
    # and the stored run's gradient is the adjoint of the tangent: the real thing
    tr = system.simulate(sc, params=moved)
    _, dS = cost.evaluate(system, tr)
    ds = symdae.tangent(system, tr, np.eye(system.sizes.n_p)).ds
    want = np.einsum("is,isk->k", dS, ds)
    assert np.max(np.abs(full.gradient - want)) <= 1e-10 * np.max(np.abs(want))


@pytest.mark.parametrize("name, scheme", [("slider_crank", "hht-paper"),
                                          ("engine_mount", "hht-paper"), ("fourbar", "hht-ga")])
def test_checkpointed_tangent_is_the_stored_tangent(name, scheme):
    system, sc, _, moved = case(name, "compiled", 1500, scheme)
    which = system.model.parameter_names[:3]
    full = symdae.tangent(system, system.simulate(sc, params=moved), which).ds
    seg = checkpointed_sensitivities(system, sc, which, moved,
                                     memory_budget=budget_for(system, 1500, 7))
    np.testing.assert_array_equal(seg, full)


def test_experiment_evaluates_within_its_budget():
    system, sc, cost, moved = case("engine_mount", "compiled", 2000)
    free = {k: moved[k] for k in ("cE1", "dE")}
    small = Experiment(system, cost, sc, memory_budget=budget_for(system, 2000, 4))
    full = Experiment(system, cost, sc)
    a, b = small.evaluate(free, gradient=True), full.evaluate(free, gradient=True)
    assert a.cost == b.cost
    np.testing.assert_array_equal(a.gradient, b.gradient)
    assert a.trajectory.q is None and b.trajectory.q is not None


def test_plan():
    sz = Sizes(n=26, m=16, n_p=40, n_u=0, n_s=2)
    big = plan(sz, 2_000_000, budget=256 * 2**20)       # a 2e6-step run-up in 256 MiB
    assert big.recomputes and big.segments * big.segment >= 2_000_000
    assert big.state_bytes + big.checkpoint_bytes <= 256 * 2**20
    assert plan(sz, 1000, budget=256 * 2**20).segments == 1
    with pytest.raises(InputError, match="needs a memory budget of at least about"):
        plan(sz, 2_000_000, budget=2**20)
    with pytest.raises(InputError, match="positive number of bytes"):
        plan(sz, 10, budget=-1)


def test_a_cost_derivative_of_the_wrong_shape_is_refused_before_the_sweep():
    """A user's cost returning dS of the wrong shape or with NaN: an InputError, never a read
    past the array in the compiled adjoint (checkpointed path and whole-run path)."""
    system, sc, cost, moved = case("pendulum", "compiled", 200)

    class Bad(LeastSquares):
        def __init__(self, base, dS_of):
            self.__dict__.update(base.__dict__)
            self.dS_of = dS_of

        def evaluate(self, system, traj):
            J, dS = super().evaluate(system, traj)
            return J, self.dS_of(dS)

    for dS_of, match in ((lambda d: d[:-1], "dPhi has shape"),
                         (lambda d: np.where(np.arange(len(d))[:, None] == 7, np.nan, d),
                          "dPhi .* is nan")):
        for budget in (None, budget_for(system, 200, 4)):
            with pytest.raises(InputError, match=match):
                cost_and_gradient(system, sc, Bad(cost, dS_of), moved, memory_budget=budget)


def test_a_gradient_factorises_again_instead_of_storing():
    """A gradient run kept whole keeps the time and state terms but not the factorised
    Newton matrices: the adjoint factorises each state's again (in the module's compiled
    steps), and its gradient is the one over stored factorisations bit for bit."""
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    sc = Scenario(t_end=0.02, h=1e-4, alpha=-0.1)
    ref = system.simulate(sc)
    cost = LeastSquares({"a1": 1.01 * ref.outputs["a1"]}, ["a1"])
    run = cost_and_gradient(system, sc, cost, ns["START"])
    fwd = run.trajectory.sweep.forward
    assert fwd.saved[0] is None and fwd.saved[2] is not None
    stored = system.simulate(sc, params=ns["START"], store_factorizations=True)
    assert stored.sweep.forward.saved[0] is not None
    J, dS = cost.evaluate(system, stored)
    assert J == run.cost
    np.testing.assert_array_equal(adjoint_gradient(system, stored, dS), run.gradient)
