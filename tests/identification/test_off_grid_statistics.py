"""Statistics count what was measured: data sampled off the simulation grid.

Data at about 99 Hz on a 1 kHz grid (the measured-data case of a bench recording). The cost
compares at the measured samples (the model's outputs interpolated to them), so the noise
model, the degrees of freedom and the Fisher information count the 497 measured samples, not
the 5000 grid points the data could be interpolated onto. A Monte Carlo study over noise seeds
shows the reported standard errors (noise estimated from each run's own residual) match the
spread of the identified values. The same data interpolated onto the grid (align="interpolate")
count every grid point as an independent sample and understate the standard errors by about
sqrt(grid points per measured sample): the check below would fail on them.
"""
from __future__ import annotations

import numpy as np
import pytest

import symdae
from symdae import Experiment, LeastSquares, Measurement, Scenario, identify

T_END, H = 5.0, 1e-3
RATE = 99.3            # Hz, incommensurate with the grid
SIGMA = 2e-3           # noise on q (amplitude 1)
TRUTH = {"c": 40.0, "d": 0.4}
SEEDS = 100


@pytest.fixture(scope="module")
def setup():
    model, _ = symdae.load_model("oscillator")
    system = symdae.compile_model(model)
    scenario = Scenario(t_end=T_END, h=H, alpha=-0.1)
    clean = system.simulate(scenario)
    # sample times off the grid, one before t0 and one after t_end (so that the comparison
    # below can interpolate them onto every grid time; the cost leaves those two out)
    t_data = -0.0063 + np.arange(int(T_END * RATE) + 3) / RATE
    assert t_data[0] < 0 < t_data[1] and t_data[-2] < T_END < t_data[-1]
    # the model's own q at those times (linear interpolation of its grid values: exactly what
    # the cost compares with, so the noise-free data fit with zero residual)
    q_data = np.interp(t_data, clean.t, clean.outputs["q"])
    return system, scenario, t_data, q_data


def run(setup, seed, align):
    system, scenario, t_data, q_data = setup
    rng = np.random.default_rng(seed)
    data = Measurement.from_arrays(t_data, q=q_data + SIGMA * rng.standard_normal(t_data.size))
    exp = Experiment(system, LeastSquares(data, ["q"], align=align), scenario)
    return identify(exp, ["c", "d"], dict(TRUTH), method="least_squares", progress=False)


def test_one_run_counts_the_measured_samples(setup):
    _, _, t_data, _ = setup
    res = run(setup, 0, "auto")
    st = res.statistics
    # the samples inside [t0, t_end], but the last, which the left rule gives weight 0
    inside = t_data.size - 2
    assert st.samples == {"q": inside - 1}
    assert st.degrees_of_freedom == inside - 1 - 2
    # the estimated noise level is the one put in
    assert st.noise["q"] == pytest.approx(SIGMA, rel=0.1)


def test_reported_standard_errors_match_the_spread(setup):
    est, reported, grid_reported = [], [], []
    for seed in range(SEEDS):
        res = run(setup, seed, "auto")
        assert res.success
        est.append([res.values[k] for k in TRUTH])
        reported.append([res.statistics.standard_errors[k] for k in TRUTH])
        if seed < 3:
            grid = run(setup, seed, "interpolate")
            grid_reported.append([grid.statistics.standard_errors[k] for k in TRUTH])
    est, reported = np.array(est), np.array(reported)
    spread = est.std(axis=0, ddof=1)
    mean_reported = reported.mean(axis=0)
    ratio = mean_reported / spread
    print(f"\nspread {spread}, mean reported {mean_reported}, ratio {ratio}")
    # 100 seeds: the sample standard deviation is known to about 7 %
    assert np.all(np.abs(ratio - 1) < 0.2), ratio
    # unbiased within the sampling error of the mean
    truth = np.array(list(TRUTH.values()))
    assert np.all(np.abs(est.mean(axis=0) - truth) < 4 * spread / np.sqrt(SEEDS))
    # the data interpolated onto the grid claim about sqrt(1000 / 99.3) ~ 3x more precision
    over = mean_reported / np.array(grid_reported).mean(axis=0)
    print(f"interpolated onto the grid: standard errors {over} times too small")
    assert np.all(over > 2.0)


def test_gradient_and_jacobian_at_off_grid_samples(setup):
    """The adjoint gradient of the cost on off-grid samples against central differences,
    and the Gauss-Newton Jacobian (tangent sweep, interpolated to the samples) against the
    adjoint: J = 1/2 sum w r^2, so dJ/dp = (dr/dp)^T (w r) exactly."""
    from symdae.identification.residuals import experiment_residuals

    system, scenario, t_data, q_data = setup
    rng = np.random.default_rng(7)
    data = Measurement.from_arrays(t_data, q=q_data + SIGMA * rng.standard_normal(t_data.size))
    exp = Experiment(system, LeastSquares(data, ["q"]), scenario)
    p = {"c": 41.0, "d": 0.37}
    ev = exp.evaluate(p, gradient=True)
    names = system.model.parameter_names
    for k, rel_h in (("c", 1e-6), ("d", 1e-5)):
        step = rel_h * p[k]
        fd = (exp.evaluate({**p, k: p[k] + step}).cost
              - exp.evaluate({**p, k: p[k] - step}).cost) / (2 * step)
        g = ev.gradient[names.index(k)]
        assert g == pytest.approx(fd, rel=1e-7), k
    res = experiment_residuals(exp, p, ["c", "d"])
    assert 0.5 * float(res.r @ res.r) == pytest.approx(ev.cost, rel=1e-13)
    tangent_grad = res.jacobian().T @ res.r
    adjoint = np.array([ev.gradient[names.index(k)] for k in ("c", "d")])
    np.testing.assert_allclose(tangent_grad, adjoint, rtol=1e-10)
