"""Multiple shooting with what single shooting already handles: inputs, several experiments,
bounds, fixed parameters, the other forms of the time-domain cost, and a segment whose run
fails.

The data are each model's own runs at the true parameters (on its grid, or its grid values
interpolated linearly to off-grid sample times, as the cost compares them), so the truth is
the exact optimum; where it is not (an active bound), single shooting started at the answer
is the reference.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae import Experiment, MultipleShooting, Scenario, identify
from symdae.costs.time_domain import LeastSquares
from symdae.data.measurement import Measurement
from symdae.errors import NewtonError, SimulationError
from symdae.identification import shooting as shooting_module
from symdae.identification.segments import run_segment
from symdae.identification.shooting import ShootingProblem

P_TRUE = 10.0
SHORT = Scenario(t_end=4.0, h=0.02, alpha=-0.05)     # two periods of the pendulum


def fit(exps, free, start, shooting, **kw):
    return identify(exps, free, start, shooting=shooting, progress=False, statistics=False,
                    **kw)


def experiment(system, scenario, truth, outputs, name="experiment", params=None, **cost):
    traj = system.simulate(scenario, params={**(params or {}), **truth})
    data = Measurement.from_trajectory(traj, outputs)
    return Experiment(system, LeastSquares(data, outputs, **cost), scenario,
                      params=dict(params or {}), name=name)


@pytest.fixture(scope="module")
def pendulum(bundled):
    return bundled("pendulum_angle")[0]


# ---------------------------------------------------------------------------- an input
def test_a_model_with_an_input(bundled):
    """The two-mass oscillator driven by F(t) (every segment has the input on its stretch of
    the grid): c1, c2 from 0.3 and 0.27 times the truth, where single shooting stops in a
    local minimum (c1 = 833, c2 = 31)."""
    system, _ = bundled("two_mass_oscillator")
    scenario = Scenario(t_end=1.0, h=2e-3, alpha=-0.1,
                        inputs={"F": lambda t: 0.5 + np.sin(2 * np.pi * 7.0 * t)})
    truth = {"c1": 1000.0, "c2": 1100.0}
    exp = experiment(system, scenario, truth, ["x1", "x2"])
    start = {"c1": 300.0, "c2": 300.0}
    single = fit(exp, ["c1", "c2"], start, None)
    assert max(single.relative_error(truth).values()) > 0.1     # a local minimum
    res = fit(exp, ["c1", "c2"], start, MultipleShooting(segment_length=0.05))
    assert max(res.relative_error(truth).values()) <= 1e-6, (res.summary(), single.summary())
    assert res.shooting.state_sources == {"experiment": "data"}
    assert res.shooting.success and res.shooting.max_gap <= 1e-10
    # the input matters: without it the data are not explained
    unforced = Experiment(system, exp.cost, scenario.replace(inputs={"F": 0.0}))
    assert fit(unforced, ["c1", "c2"], res.values, None).cost > 1e3 * max(res.cost, 1e-30)


# ---------------------------------------------------------------------------- experiments
def test_two_experiments_reach_the_single_shooting_optimum(pendulum):
    """Two swings of different amplitude (theta0 fixed per experiment) fitted together: the
    answer is single shooting's optimum of the summed cost."""
    exps = [experiment(pendulum, SHORT, {"p": P_TRUE}, ["theta"], name=name,
                       params={"theta0": th0})
            for name, th0 in (("small", 0.3), ("large", 1.2))]
    res = fit(exps, ["p"], {"p": 4.0}, MultipleShooting(segment_length=1.0))
    assert res.shooting.segments == {"small": 4, "large": 4}
    assert set(res.shooting.gaps) == {"small", "large"} and res.shooting.max_gap <= 1e-10
    again = fit(exps, ["p"], res.values, None)
    assert abs(again.values["p"] / res.values["p"] - 1) <= 1e-8
    assert res.relative_error({"p": P_TRUE})["p"] <= 1e-8
    # each experiment counts: the large swing alone is slower (p is identified with theta0
    # = 1.2 in the model), so a stage that ignored it or used the nominal theta0 would miss
    assert res.shooting.values["p"] == pytest.approx(P_TRUE, rel=1e-3)


# ---------------------------------------------------------------------------- bounds, fixed
def test_fixed_parameters_and_a_respected_bound(pendulum):
    """theta0 = 1.0 is fixed by the experiment (the model's nominal is pi/6): the fit reaches
    the truth from p0 = 3 with a bound p <= 12 that the iterates respect."""
    exp = experiment(pendulum, SHORT, {"p": P_TRUE}, ["theta"], params={"theta0": 1.0})
    seen = []
    res = identify(exp, ["p"], {"p": 3.0}, {"p": (1.0, 12.0)}, progress=seen.append,
                   statistics=False, shooting=MultipleShooting(segment_length=1.0))
    assert res.relative_error({"p": P_TRUE})["p"] <= 1e-8, res.summary()
    stages = [e for e in seen if e.get("stage") == "multiple shooting"]
    assert stages and all(1.0 <= e["values"]["p"] <= 12.0 for e in stages)


def test_an_active_bound(pendulum):
    """A bound p <= 9 below the truth: the multiple-shooting stage stops on it, and the answer
    is single shooting's bounded optimum, on the bound."""
    exp = experiment(pendulum, SHORT, {"p": P_TRUE}, ["theta"])
    bounds = {"p": (None, 9.0)}
    res = fit(exp, ["p"], {"p": 4.0}, MultipleShooting(segment_length=1.0), bounds=bounds)
    assert res.shooting.values["p"] <= 9.0
    assert res.values["p"] == pytest.approx(9.0, rel=1e-12)
    again = fit(exp, ["p"], {"p": 8.5}, None, bounds=bounds)
    assert abs(again.values["p"] / res.values["p"] - 1) <= 1e-8


# ---------------------------------------------------------------------------- cost variants
def test_weights_and_off_grid_samples(pendulum):
    """theta and omega at their own weights, sampled off the grid (every 0.03 s from 0.013 s:
    the cost interpolates the model's grid values to them, so do the data), with the
    trapezoidal quadrature."""
    truth = pendulum.simulate(SHORT, params={"p": P_TRUE})
    ts = np.arange(0.013, SHORT.t_end, 0.03)
    data = Measurement.from_arrays(ts, theta=np.interp(ts, truth.t, truth.outputs["theta"]),
                                   omega=np.interp(ts, truth.t, truth.outputs["omega"]))
    cost = LeastSquares(data, ["theta", "omega"], weights={"theta": 1.0, "omega": 0.01},
                        quadrature="trapezoid")
    exp = Experiment(pendulum, cost, SHORT)
    res = fit(exp, ["p"], {"p": 4.0}, MultipleShooting(segment_length=1.0))
    assert res.relative_error({"p": P_TRUE})["p"] <= 1e-8, res.summary()
    assert res.shooting.state_sources == {"experiment": "data"}
    # the stage's data residuals are the cost's: at the truth (zero gaps up to the restart
    # error) its cost is tiny, and it weighs omega by 0.01
    prob = ShootingProblem([exp], ["p"], {"p": P_TRUE}, MultipleShooting(segment_length=1.0))
    n_theta = sum(len(s.values) for segs in prob.segments for seg in segs
                  for s in seg.samples if s.output == "theta")
    assert n_theta == ts.size
    w = {s.output: s.sqrt_weight for seg in prob.segments[0] for s in seg.samples}
    assert np.all(w["omega"] < 0.11 * np.max(w["theta"]))


# ---------------------------------------------------------------------------- a failed run
SOFT = Scenario(t_end=12.0, h=0.05, alpha=-0.05)
SOFT_TRUTH = {"p": 1.0, "a": 1.0}


@pytest.fixture(scope="module")
def softening():
    """x'' = -p x + a x^3 from x0 = 0.8 at rest: bounded below the barrier |x| = sqrt(p / a)
    = 1, off to infinity in finite time above it, where a step's Newton iteration has no
    solution to converge to. Six segments of 2 s."""
    t = dynamicsymbols._t
    x = dynamicsymbols("x")
    p, a, x0, v0 = sp.symbols("p a x0 v0")
    model = symdae.Model("softening", coordinates=[x], mass_matrix=[[1]],
                         forces=[-p * x + a * x ** 3],
                         parameters={p: 1.0, a: 1.0, x0: 0.5, v0: 0.0},
                         outputs={"x": x, "v": x.diff(t)},
                         initial_state={x: x0, x.diff(t): v0})
    system = symdae.compile_model(model)
    return experiment(system, SOFT, SOFT_TRUTH, ["x"], params={"x0": 0.8})


def test_a_failed_segment_is_named_by_segment_and_time(softening):
    """Segment 2 started at (x, v) = (3, 3), far over the barrier: its run fails, and the
    error's message (what the CLI prints) names the segment, and the time in it."""
    prob = ShootingProblem([softening], ["p", "a"], SOFT_TRUTH,
                           MultipleShooting(segment_length=2.0))
    assert prob.segment_counts() == {"experiment": 6}
    x = prob.x0.copy()
    x[4:6] = np.array([3.0, 3.0]) / prob.state_scales[0]     # after p, a and segment 1's
    with pytest.raises(NewtonError) as info:
        prob.residuals(x)
    t_fail = info.value.time
    assert 4.0 < t_fail <= 6.0
    # the step counts from the record's start, within the segment's steps 80 .. 120
    assert re.match(r"multiple shooting, segment 2 \(t = 4 \.\. 6 s\) of experiment "
                    r"'experiment': Newton's method [\w ]+? at t = "
                    f"{re.escape(f'{t_fail:.9g}')} \\(step {round(t_fail / SOFT.h)} of the "
                    r"record, in this run's steps 80 \.\. 120, h = 0\.05\)", str(info.value)), \
        str(info.value)
    assert math.isfinite(float(np.concatenate(prob.residuals(prob.x0)) @
                               np.concatenate(prob.residuals(prob.x0))))
    # from a start where the first segment already fails there is no step to back off
    # from: identify refuses, naming the segment and the time
    with pytest.raises(NewtonError, match=r"^multiple shooting, segment 0 \(t = 0 \.\. 2 s\) "
                                          r"of experiment 'experiment': Newton's method .* at "
                                          r"t = 1\.\d+ \(step \d+ of 40,"):
        fit(softening, ["p", "a"], {"p": 1.0, "a": 2.5}, MultipleShooting(segment_length=2.0))


def test_a_trial_point_whose_segment_fails_is_backed_off_from(softening, monkeypatch):
    """From p = 2, a = 0.5 the trust-region solver tries a point (p = 0.66, a = 1.4) at which
    segment 1 escapes over the barrier and its Newton iteration fails: the solver shrinks its
    step and carries on to the truth. The spy only records the segments' real failures."""
    failures = []

    def spy(seg, *args, **kw):
        try:
            return run_segment(seg, *args, **kw)
        except SimulationError as exc:
            failures.append((seg, exc))
            raise

    monkeypatch.setattr(shooting_module, "run_segment", spy)
    res = fit(softening, ["p", "a"], {"p": 2.0, "a": 0.5}, MultipleShooting(segment_length=2.0))
    assert failures, "no trial point failed: the case no longer exercises the back-off"
    for seg, exc in failures:
        assert isinstance(exc, NewtonError) and seg.t0 < exc.time <= seg.t_end
    assert res.shooting.success and res.shooting.max_gap <= 1e-10, res.shooting.summary()
    assert max(res.relative_error(SOFT_TRUTH).values()) <= 1e-8, res.summary()
