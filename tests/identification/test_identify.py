"""Parameter identification with the discrete-adjoint gradient.

The oscillator cases are fast checks of the machinery (methods, scalings, bounds, several
experiments, errors); the engine mount reproduces the discrete-adjoint paper's section 5 on
synthetic data: its start values, its scenario (t in [0, 1] s, h = 1e-4, alpha = -0.1), the
acceleration a1 of the engine mass as the measured signal.
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

import symdae
from symdae import Experiment, IdentificationResult, Scenario, UnknownNameError, identify
from symdae.costs.time_domain import LeastSquares
from symdae.data.measurement import Measurement

T_OSC, H_OSC, ALPHA = 2.0, 1e-3, -0.1
TRUTH_OSC = {"c": 40.0, "d": 0.4}
START_OSC = {"c": 28.0, "d": 0.6}  # -30 % and +50 %


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def oscillator(bundled):
    return bundled("oscillator")[0]


def oscillator_experiment(system, q_init=1.0, output="a", name="experiment"):
    """Synthetic data of ``output`` from the true parameters, started at q = q_init."""
    params = {"q_init": q_init}
    traj = system.simulate(t_end=T_OSC, h=H_OSC, alpha=ALPHA, params={**TRUTH_OSC, **params})
    data = Measurement.from_trajectory(traj, [output])
    return Experiment(system, LeastSquares(data, [output]),
                      Scenario(t_end=T_OSC, h=H_OSC, alpha=ALPHA),
                      params=params, name=name)


@pytest.fixture(scope="module")
def experiment(oscillator):
    return oscillator_experiment(oscillator)


def orders(res: IdentificationResult) -> float:
    return math.log10(res.start_cost / res.cost) if res.cost > 0 else math.inf


def assert_recovered(res, truth, rel=1e-8, min_orders=15.0):
    err = res.relative_error(truth)
    assert max(err.values()) <= rel, (err, res.summary())
    assert orders(res) >= min_orders, res.summary()


# ---------------------------------------------------------------------------- oscillator
def test_oscillator_recovers_the_truth(experiment):
    res = identify(experiment, ["c", "d"], START_OSC, progress=False)
    assert_recovered(res, TRUTH_OSC)
    assert res.start == START_OSC
    assert res.history[0]["cost"] == res.start_cost
    assert res.history[0]["values"] == START_OSC
    assert res.n_gradients == res.n_simulations >= res.n_iterations >= 1
    assert res.wall_time > 0
    # the reported gradient is dJ/dp in physical units at the result: tiny there
    assert all(abs(g) < 1e-10 for g in res.gradient.values())
    d = json.loads(json.dumps(res.to_dict()))
    assert d["identified"] == res.values and d["iterations"] == res.n_iterations
    assert d["cost_reduction_orders"] == pytest.approx(orders(res))
    assert "c:" in res.summary()


def test_start_defaults_to_nominal_values(oscillator, experiment):
    # the nominal values of the oscillator are the truth: nothing to improve
    res = identify(experiment, ["c"], progress=False)
    assert res.start == {"c": 40.0}
    assert res.start_cost == 0.0
    assert res.values["c"] == 40.0


@pytest.mark.parametrize("method", ["L-BFGS-B", "BFGS", "trust-constr"])
def test_methods(experiment, method):
    res = identify(experiment, ["c", "d"], START_OSC, method=method, progress=False)
    assert res.method == method
    assert_recovered(res, TRUTH_OSC)


@pytest.mark.parametrize("scaling", ["start", "none", None, {"c": 10.0, "d": 1.0}, {"d": 0.01}],
                         ids=["start", "none", "None", "dict", "partial-dict"])
def test_scalings(experiment, scaling):
    res = identify(experiment, ["c", "d"], START_OSC, scaling=scaling, progress=False)
    assert_recovered(res, TRUTH_OSC)
    expected = {"start": START_OSC, "none": {"c": 1.0, "d": 1.0}, None: {"c": 1.0, "d": 1.0}}
    if isinstance(scaling, dict):
        assert res.scales == {**START_OSC, **scaling}
    else:
        assert res.scales == expected[scaling]


@pytest.mark.parametrize("method", ["L-BFGS-B", "trust-constr"])
def test_bound_that_excludes_the_truth_is_active(experiment, method):
    bounds = {"c": (None, 35.0), "d": (0.0, 10.0)}
    res = identify(experiment, ["c", "d"], START_OSC, bounds=bounds, method=method,
                   progress=False)
    assert res.values["c"] == pytest.approx(35.0, rel=1e-8)
    assert 0.0 <= res.values["d"] <= 10.0
    assert res.cost < res.start_cost
    if method == "L-BFGS-B":  # a feasible-point method: the result and every iterate inside
        assert res.values["c"] <= 35.0
        assert all(e["values"]["c"] <= 35.0 for e in res.history)
    else:  # scipy's trust-constr does not keep iterates feasible; it may end 1 ulp outside
        assert res.values["c"] <= 35.0 * (1.0 + 1e-12)
    # the best d for c = 35: dJ/dd vanishes there (an interior optimum in d)
    exp_c35 = Experiment(experiment.system, experiment.cost, experiment.scenario,
                         params={**experiment.params, "c": 35.0})
    fixed = identify(exp_c35, ["d"], {"d": START_OSC["d"]}, progress=False)
    assert res.values["d"] == pytest.approx(fixed.values["d"], rel=1e-6)


def test_bounds_that_contain_the_truth_change_nothing(experiment):
    res = identify(experiment, ["c", "d"], START_OSC,
                   bounds={"c": (20.0, 60.0), "d": (0.01, None)}, progress=False)
    assert_recovered(res, TRUTH_OSC)


def test_several_experiments_are_summed(oscillator):
    """Two experiments on the same system: different initial positions (Experiment.params)
    and different measured outputs; one objective, their sum."""
    e1 = oscillator_experiment(oscillator, q_init=1.0, output="a", name="released at 1")
    e2 = oscillator_experiment(oscillator, q_init=-0.3, output="q", name="released at -0.3")
    j1 = e1.evaluate(START_OSC).cost
    j2 = e2.evaluate(START_OSC).cost
    assert j1 > 0 and j2 > 0 and j1 != j2
    res = identify([e1, e2], ["c", "d"], START_OSC, progress=False)
    assert res.start_cost == pytest.approx(j1 + j2, rel=1e-14)
    assert_recovered(res, TRUTH_OSC)
    assert set(res.experiment_costs) == {"released at 1", "released at -0.3"}
    assert sum(res.experiment_costs.values()) == pytest.approx(res.cost, rel=1e-12)
    # each experiment keeps its own q_init: the free parameters override only c and d
    assert e2.simulate(res.values).q[0, 0] == -0.3


def test_progress_callable_receives_every_iteration(experiment):
    seen = []
    res = identify(experiment, ["c", "d"], START_OSC, progress=seen.append)
    assert [e["iteration"] for e in seen] == list(range(len(seen)))
    assert seen == res.history
    assert seen[0]["cost"] == res.start_cost


# ---------------------------------------------------------------------------- errors
def test_unknown_free_parameter(experiment):
    with pytest.raises(KeyError, match=r"\['k'\]"):
        identify(experiment, ["c", "k"], {"c": 30.0, "k": 1.0}, progress=False)


def test_bounds_for_a_parameter_that_is_not_free(experiment):
    with pytest.raises(KeyError, match=r"\['m'\]"):
        identify(experiment, ["c", "d"], START_OSC, bounds={"m": (0.5, 2.0)}, progress=False)


def test_bfgs_takes_no_bounds(experiment):
    with pytest.raises(ValueError, match="BFGS does not take bounds"):
        identify(experiment, ["c", "d"], START_OSC, bounds={"c": (1.0, 100.0)}, method="BFGS",
                 progress=False)


def test_other_bad_arguments(experiment):
    with pytest.raises(ValueError, match="method must be one of"):
        identify(experiment, ["c"], {"c": 30.0}, method="Nelder-Mead", progress=False)
    with pytest.raises(ValueError, match="scaling must be"):
        identify(experiment, ["c"], {"c": 30.0}, scaling="unit", progress=False)
    with pytest.raises(ValueError, match="scales must be positive"):
        identify(experiment, ["c"], {"c": 30.0}, scaling={"c": -1.0}, progress=False)
    with pytest.raises(ValueError, match="distinct"):
        identify(experiment, ["c", "c"], {"c": 30.0}, progress=False)
    with pytest.raises(ValueError, match="non-empty"):
        identify(experiment, [], {}, progress=False)
    with pytest.raises(ValueError, match="no experiments"):
        identify([], ["c"], {"c": 30.0}, progress=False)


@pytest.mark.parametrize("method", ["L-BFGS-B", "trust-constr"])
def test_start_outside_the_bounds_is_refused(experiment, method):
    with pytest.raises(ValueError, match=r"start value of c \(41\) lies outside its bounds"):
        identify(experiment, ["c", "d"], {"c": 41.0, "d": 0.4},
                 bounds={"c": (45.0, 60.0)}, method=method, progress=False)


def test_scaling_for_a_parameter_that_is_not_free(experiment):
    # an unknown name is an UnknownNameError (a KeyError), as for every name
    with pytest.raises(UnknownNameError, match=r"scales given for \['cc'\], which are not among"):
        identify(experiment, ["c", "d"], START_OSC, scaling={"cc": 10.0}, progress=False)


def test_a_time_domain_identification_does_not_import_scipy_signal(oscillator):
    """scipy.signal (1-3 s on its first import) is imported only where a window or a filter is
    used: ``import symdae`` and identifications on a least-squares cost (both kinds of
    method, with their statistics) leave it out. A fresh interpreter, so nothing is imported
    already; the fixture has compiled the oscillator into this run's cache, which the child
    reads (the environment passes SYMDAE_CACHE_DIR on)."""
    import os
    import subprocess

    code = ("import sys\n"
            "import symdae\n"
            "model, _ = symdae.load_model('oscillator')\n"
            "system = symdae.compile_model(model)\n"
            "sc = symdae.Scenario(t_end=0.2, h=1e-3, alpha=-0.1)\n"
            "data = symdae.Measurement.from_trajectory(system.simulate(sc), ['a'])\n"
            "exp = symdae.Experiment(system, symdae.LeastSquares(data, ['a']), sc)\n"
            "for method in ('L-BFGS-B', 'least_squares'):\n"
            "    symdae.identify(exp, ['c'], {'c': 30.0}, method=method, max_iterations=3,\n"
            "                    progress=False)\n"
            "print(sorted(m for m in sys.modules if m.startswith('scipy.signal')))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout


def test_experiment_costs_keep_every_experiment(oscillator):
    # two experiments of one name are told apart by their position
    e1 = oscillator_experiment(oscillator, q_init=1.0)
    e2 = oscillator_experiment(oscillator, q_init=-0.3)
    res = identify([e1, e2], ["c", "d"], START_OSC, progress=False)
    assert sorted(res.experiment_costs) == ["experiment[0]", "experiment[1]"], \
        res.experiment_costs


# ---------------------------------------------------------------------------- engine mount
T_EM, H_EM, ALPHA_EM = 1.0, 1e-4, -0.1


@pytest.fixture(scope="module")
def engine_mount():
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    truth = dict(zip(model.parameter_names, model.nominal_values))
    return system, ns, truth


def em_experiment(system, data):
    return Experiment(system, LeastSquares(data, ["a1"]),
                      Scenario(t_end=T_EM, h=H_EM, alpha=ALPHA_EM),
                      name="engine mount a1")


def report(res, truth, record_property, tag):
    err = res.relative_error(truth)
    print(f"\n[{tag}] {res.summary()}")
    print(f"[{tag}] iterations {res.n_iterations}, simulations {res.n_simulations}, "
          f"gradients {res.n_gradients}, wall time {res.wall_time:.2f} s, "
          f"cost {res.start_cost:.4e} -> {res.cost:.4e} ({orders(res):.1f} orders)")
    print(f"[{tag}] relative error: " + ", ".join(f"{k} {v:.2e}" for k, v in err.items()))
    for key, val in (("iterations", res.n_iterations), ("simulations", res.n_simulations),
                     ("wall_time_s", round(res.wall_time, 3)), ("start_cost", res.start_cost),
                     ("cost", res.cost), ("relative_error", err)):
        record_property(f"{tag}_{key}", val)
    return err


def test_engine_mount_reproduction(engine_mount, record_property):
    """Section 5 of the discrete-adjoint paper on synthetic data: identify cE1, cE2, dE, dH2
    from the paper's start values."""
    system, ns, truth = engine_mount
    assert ns["FREE"] == ["cE1", "cE2", "dE", "dH2"]
    data = Measurement.from_trajectory(system.simulate(t_end=T_EM, h=H_EM, alpha=ALPHA_EM), ["a1"])
    res = identify(em_experiment(system, data), ns["FREE"], ns["START"], progress=False)
    err = report(res, truth, record_property, "engine_mount")
    assert res.start == ns["START"]
    assert max(err.values()) <= 1e-8, err
    assert orders(res) >= 20.0, res.summary()
    assert res.n_simulations < 500
    # ends because the line search cannot lower J (ftol = gtol = 0), with the gradient gone
    assert res.success, res.message


def test_engine_mount_data_from_a_finer_step_gives_biased_values(engine_mount, record_property):
    """Data simulated with h = 1e-5, model with h = 1e-4: the model cannot reproduce the data
    exactly, so the optimum sits away from the true parameters (the discretisation error of
    the model is absorbed by the parameters; dH2, the hydro damper, absorbs most)."""
    system, ns, truth = engine_mount
    fine = system.simulate(t_end=T_EM, h=1e-5, alpha=ALPHA_EM)
    data = Measurement.from_trajectory(fine, ["a1"])  # auto: interpolated onto the grid
    exp = em_experiment(system, data)
    res = identify(exp, ns["FREE"], ns["START"], progress=False)
    bias = report(res, truth, record_property, "finer_data")
    J_truth = exp.evaluate(truth).cost
    print(f"[finer_data] cost at the true parameters {J_truth:.4e}, at the identified "
          f"{res.cost:.4e}")
    record_property("finer_data_cost_at_truth", J_truth)

    assert res.cost < res.start_cost
    assert res.cost > 1e-12  # no round-off fit: the data are not a solution of the h = 1e-4 model
    assert res.cost <= J_truth  # the biased values fit the data better than the truth does
    assert max(bias.values()) > 1e-6, bias
    for k in ns["FREE"]:  # biased, not wild
        assert 0.1 * truth[k] < res.values[k] < 10.0 * truth[k], (k, res.values[k])


# ---------------------------------------------------------------------------- failed trial points
class _ModeLostAbove(LeastSquares):
    """A cost whose POD mode matching fails when the response gets too stiff (max |a| above
    ``limit``): a trial point there has no cost, the start values there are a set-up error."""

    def __init__(self, data, outputs, limit):
        super().__init__(data, outputs)
        self.limit = limit

    def evaluate(self, system, traj):
        if abs(traj.outputs["a"]).max() > self.limit:
            raise symdae.PODModeError("POD mode 2: the simulated POM 2 does not correspond")
        return super().evaluate(system, traj)


def test_a_trial_point_that_blew_up_makes_the_line_search_back_off(experiment):
    """Negative damping: the run grows by orders of magnitude and its cost with it. Such a
    point gets ten times the largest cost seen and a zero gradient, like a failed one; a
    point merely worse keeps its own cost and gradient."""
    from symdae.identification.identify import _Objective
    objective = _Objective([experiment], ["c", "d"], [1.0, 1.0], None, progress=None)
    J_good, g = objective([30.0, 0.5])
    assert math.isfinite(J_good) and g.any()
    worse = experiment.evaluate({"c": 60.0, "d": 0.4}, gradient=True)
    assert J_good < worse.cost < 10.0 * J_good         # the premise of the second case
    J, g = objective([60.0, 0.4])
    assert J == worse.cost and g.any() and objective.failures == 0
    blown = experiment.evaluate({"c": 40.0, "d": -6.0}).cost
    assert blown > 100.0 * worse.cost                   # the premise of the first case
    J, g = objective([40.0, -6.0])
    assert J == 10.0 * worse.cost and not g.any() and objective.failures == 1


def test_a_cost_undefined_at_a_trial_point_makes_the_line_search_back_off(oscillator):
    from symdae.identification.identify import _Objective
    base = oscillator_experiment(oscillator)
    a_max = lambda c: abs(oscillator.simulate(   # noqa: E731
        t_end=T_OSC, h=H_OSC, alpha=ALPHA, params={"c": c, "d": 0.4, "q_init": 1.0}
    ).outputs["a"]).max()
    limit = 0.5 * (a_max(45.0) + a_max(60.0))
    cost = _ModeLostAbove(base.cost.data, ["a"], limit)
    exp = Experiment(oscillator, cost, base.scenario, params=base.params)
    objective = _Objective([exp], ["c", "d"], [1.0, 1.0], None, progress=None)
    J, g = objective([30.0, 0.5])
    assert math.isfinite(J) and g.any()
    J_good = J
    J, g = objective([70.0, 0.4])
    assert J == 10.0 * J_good and not g.any() and objective.failures == 1
    with pytest.raises(symdae.PODModeError, match="does not correspond") as info:
        objective([70.0, 0.4], strict=True)
    if sys.version_info >= (3, 11):          # exception notes
        assert "at the start values" in "".join(info.value.__notes__)
    # the identification from a start inside the defined region still gets there
    res = identify(exp, ["c", "d"], start=START_OSC, method="L-BFGS-B", progress=False)
    assert_recovered(res, TRUTH_OSC)
    assert "backed off" in res.message
    with pytest.raises(symdae.PODModeError, match="does not correspond"):
        identify(exp, ["c", "d"], start={"c": 70.0, "d": 0.4}, method="L-BFGS-B",
                 progress=False)


# ---------------------------------------------------------------------------- method="auto"
def test_auto_takes_gauss_newton_for_least_squares_and_l_bfgs_b_otherwise(experiment,
                                                                           monkeypatch):
    from symdae.costs.time_domain import OutputIntegral
    assert symdae.choose_method(experiment, ["c", "d"])[0] == "least_squares"
    res = identify(experiment, ["c", "d"], START_OSC, progress=False)
    assert res.method == "least_squares" and res.n_iterations < 20
    assert_recovered(res, TRUTH_OSC)
    # a cost with a term that is not a sum of squares: the adjoint gradient
    mixed = Experiment(experiment.system, experiment.cost + OutputIntegral("a", weight=1e-9),
                       experiment.scenario, params=experiment.params)
    method, why = symdae.choose_method(mixed, ["c", "d"])
    assert method == "L-BFGS-B" and "not least squares" in why
    assert identify(mixed, ["c", "d"], START_OSC, progress=False, statistics=False,
                    max_iterations=2).method == "L-BFGS-B"
    # states that would not fit the memory budget: the adjoint (checkpointed)
    tight = Experiment(experiment.system, experiment.cost, experiment.scenario,
                       params=experiment.params, memory_budget=1000)
    method, why = symdae.choose_method(tight, ["c", "d"])
    assert method == "L-BFGS-B" and "memory budget" in why
    # more free parameters than Gauss-Newton's tangent directions pay for
    monkeypatch.setattr(symdae.identification.identify, "AUTO_GAUSS_NEWTON_MAX_FREE", 1)
    method, why = symdae.choose_method(experiment, ["c", "d"])
    assert method == "L-BFGS-B" and "2 free parameters (Gauss-Newton up to 1)" in why
    with pytest.raises(symdae.UnknownNameError, match="no parameter"):
        symdae.choose_method(experiment, ["c", "x"])


def test_auto_refuses_options_that_belong_to_one_optimiser(experiment):
    with pytest.raises(symdae.InputError, match="give method"):
        identify(experiment, ["c", "d"], START_OSC, options={"maxcor": 20}, progress=False)
    res = identify(experiment, ["c", "d"], START_OSC, method="L-BFGS-B",
                   options={"maxcor": 20}, progress=False)
    assert res.method == "L-BFGS-B"
    assert_recovered(res, TRUTH_OSC)


def test_settled_at_is_the_first_iteration_that_stays_near_the_result():
    hist = [{"iteration": k, "values": {"a": a, "b": b}} for k, (a, b) in
            enumerate([(1.0, 0.0), (2.0, 0.5), (2.0000001, 0.0), (2.0, 0.0), (2.0, 0.0)])]
    res = IdentificationResult(free=["a", "b"], start={}, values={"a": 2.0, "b": 0.0},
                               scales={}, start_cost=1.0, cost=0.0, gradient={},
                               history=hist, n_iterations=4, n_simulations=5, n_gradients=5,
                               wall_time=0.0, success=True, message="", method="L-BFGS-B",
                               experiment_costs={})
    assert res.settled_at(rel=1e-6) == 2     # 2.0000001 is within 1e-6, b exactly 0
    assert res.settled_at(rel=1e-8) == 3


def test_scan_then_refine_between_the_neighbours(experiment, oscillator):
    """scan_refine: the best grid point of c and a bounded refinement between its
    neighbours recover the true c (d at its true, nominal value)."""
    nominal = dict(zip(oscillator.model.parameter_names, oscillator.model.nominal_values))
    assert nominal["d"] == TRUTH_OSC["d"]
    s, best, res = symdae.scan_refine(experiment, "c", np.linspace(20.0, 60.0, 9))
    assert best.value == 40.0 and best.neighbours == (35.0, 45.0) and not best.at_edge
    assert s.minimum("J") == best
    assert abs(res.values["c"] / TRUTH_OSC["c"] - 1) <= 1e-8


def test_scan_reports_its_progress(experiment, oscillator, capsys):
    from symdae.identification.gridsearch import scan

    quiet = scan(oscillator, experiment.scenario, experiment.cost, "c", np.linspace(20, 60, 20))
    assert capsys.readouterr().err == ""
    s = scan(oscillator, experiment.scenario, experiment.cost, "c", np.linspace(20, 60, 20),
             progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 10 and lines[0].startswith("scan of c: 2 of 20 grid points")
    assert lines[-1].startswith("scan of c: 20 of 20 grid points")
    np.testing.assert_array_equal(s.costs["J"], quiet.costs["J"])


@pytest.mark.parametrize("method", ["L-BFGS-B", "least_squares"])
def test_ctrl_c_reports_the_best_point_so_far(experiment, method):
    from symdae.errors import Interrupted
    seen = []

    def progress(entry):          # Ctrl-C arrives in the fourth iteration
        seen.append(entry)
        if len(seen) == 4:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as info:
        identify(experiment, ["c", "d"], START_OSC, method=method, progress=progress,
                 statistics=False)
    best = min(seen, key=lambda e: e["cost"])
    assert info.value.best == best["values"] and info.value.best_cost == best["cost"]
    assert best["cost"] < seen[0]["cost"]
    assert f"best at iteration {best['iteration']}" in str(info.value)


def test_an_identification_that_cannot_fit_is_refused_before_any_sweep(monkeypatch):
    """One estimate per method, checked before the first simulation: Gauss-Newton keeps the
    states and the tangents of every step, the gradient methods the outputs (their states are
    checkpointed within the budget)."""
    import time

    import symdae.simulation.memory as memory
    from symdae.identification.identify import identification_estimate
    from symdae.simulation.memory import MemoryLimitError

    model, _ = symdae.load_model("oscillator")
    system = symdae.compile_model(model)
    sc = symdae.Scenario(t_end=1e4, h=1e-4, alpha=-0.1)             # 1e8 steps
    exp = symdae.Experiment(system, symdae.LeastSquares({"q": np.zeros(3)}, ["q"]), sc)
    gn = identification_estimate(exp, 2, "least_squares")
    # n = 1, m = 0, 3 outputs, hht-ga: t, q, v, a, w + outputs = 8 doubles; the tangent
    # sweep along 2 parameters: dq, dv, da, dw, dlam (one wide) and 3 outputs = 2 x 8; one
    # fitted output: a Jacobian row of 2, a residual of 1. Gauss-Newton: the larger of (the
    # tangents and 4 Jacobians: 16 + 8) and (ds and 7 Jacobians: 6 + 14), and 12 residuals
    assert gn.per_step == 8 * (8 + max(16 + 8, 6 + 14) + 12) and gn.points == 10**8 + 1
    lbfgs = identification_estimate(exp, 2, "L-BFGS-B")
    # the statistics after it: the trajectory and the larger of the tangents (16) and
    # (ds 6, 2 Jacobians 4, 4 residuals 4); the adjoint's evaluation, where its states fit
    # the budget, needs only 8 + 3 + 3 and the time and state terms it keeps for the
    # adjoint, and beyond it the outputs (1 + 3) + 3 + 3 and the budget
    assert lbfgs.per_step == 8 * (8 + 16) and "statistics" in lbfgs.what
    roomy = symdae.Experiment(system, exp.cost, sc, memory_budget=2**40)
    assert identification_estimate(roomy, 2, "L-BFGS-B", statistics=False).per_step == \
        8 * (8 + 3 + 3) + system.sizes.kept_term_bytes
    tight = symdae.Experiment(system, exp.cost, sc, memory_budget=2**30)
    est = identification_estimate(tight, 2, "L-BFGS-B", statistics=False)
    assert est.per_step == 8 * (4 + 3 + 3) and est.fixed >= 2**30
    assert lbfgs.total < gn.total
    monkeypatch.setattr(memory, "available_memory", lambda: 2**30)
    monkeypatch.setattr(memory, "free_memory", lambda: 0)
    t0 = time.perf_counter()
    with pytest.raises(MemoryLimitError, match=r"experiment 'experiment' \(Gauss-Newton with 2 "
                                               r"free parameters\) needs about 32\.8 GiB.*"
                                               r"method='L-BFGS-B'"):
        symdae.identify(exp, ["c", "d"], method="least_squares", progress=False)
    assert time.perf_counter() - t0 < 1.0
