"""Standard errors on coloured noise: the white-noise ones are labelled, the Newey-West (HAC)
ones cover the truth.

References: the HAC formula against sums written out by hand (lag 0 is White's sandwich, a
mean's long-run variance lag by lag); the Monte Carlo against the exact covariance of the
least-squares estimate under AR(1) noise, A^-1 X^T Sigma X A^-1 with Sigma_ij =
sigma^2 rho^|i - j| (dense linear algebra, not the package), and against the spread of the
estimates over the replicates.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sympy as sp
from scipy.linalg import toeplitz
from scipy.signal import lfilter
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae import (
    Experiment,
    LeastSquares,
    Scenario,
    bartlett_bandwidth,
    hac_covariance,
    identification_statistics,
    identify,
    long_run_covariance,
)

TRUTH = {"a": 1.0, "b": 2.0}
SIGMA, RHO = 0.05, 0.9


@pytest.fixture(scope="module")
def line():
    """y = a + b t: identification is linear least squares (one Gauss-Newton step)."""
    t = dynamicsymbols._t
    q = dynamicsymbols("q")
    a, b = sp.symbols("a b")
    model = symdae.Model("line_coloured", coordinates=[q], mass_matrix=[[1]], forces=[-q],
                         parameters={a: TRUTH["a"], b: TRUTH["b"]}, outputs={"y": a + b * t})
    return symdae.compile_model(model)


def ar1(rng, n, rho=RHO, sigma=SIGMA):
    """Stationary AR(1) noise: x_0 ~ N(0, sigma^2), x_t = rho x_{t-1} + e_t."""
    e = rng.normal(0.0, sigma * math.sqrt(1.0 - rho ** 2), n)
    e[0] = rng.normal(0.0, sigma)
    return lfilter([1.0], [1.0, -rho], e)


def fit(system, sc, y, name="experiment"):
    exp = Experiment(system, LeastSquares({"y": y}, ["y"], quadrature="sum"), sc, name=name)
    return identify(exp, ["a", "b"], TRUTH, method="least_squares", progress=False)


# ---------------------------------------------------------------------------- the formula
def test_lag_zero_is_the_classical_sandwich():
    rng = np.random.default_rng(1)
    S = rng.normal(size=(50, 3))
    r = rng.normal(size=50)
    w = rng.uniform(0.5, 2.0, 50)
    hac = hac_covariance(["p", "q", "s"], [("y", S, r, w)], bandwidth=0)
    A = S.T @ np.diag(w) @ S
    meat = sum(w[i] ** 2 * r[i] ** 2 * np.outer(S[i], S[i]) for i in range(50))
    by_hand = 50 / 47 * np.linalg.inv(A) @ meat @ np.linalg.inv(A)
    assert np.allclose(hac.covariance, by_hand, rtol=1e-12, atol=0)
    assert hac.bandwidths == {"y": 0}


def test_the_long_run_variance_of_a_mean_lag_by_lag():
    """One parameter, S = 1: Omega = sum_l (1 - |l| / (L + 1)) sum_t r_t r_{t-l}."""
    r = np.random.default_rng(2).normal(size=40)
    L = 3
    by_hand = sum(r[t] * r[t - lag] * (1 - abs(lag) / (L + 1))
                  for lag in range(-L, L + 1) for t in range(40) if 0 <= t - lag < 40)
    assert long_run_covariance(r[:, None], L)[0, 0] == pytest.approx(by_hand, rel=1e-13)
    # prewhitened with c: the same sum over r_t - c r_{t-1}, divided by (1 - c)^2
    c = 0.6
    u = r[1:] - c * r[:-1]
    white = sum(u[t] * u[t - lag] * (1 - abs(lag) / (L + 1))
                for lag in range(-L, L + 1) for t in range(39) if 0 <= t - lag < 39)
    assert long_run_covariance(r[:, None], L, c)[0, 0] == pytest.approx(
        white / (1 - c) ** 2, rel=1e-13)
    # the covariance of a mean estimate: A = n, so A^-1 Omega A^-1 = Omega / n^2
    hac = hac_covariance(["m"], [("y", np.ones(40), r, np.ones(40))], bandwidth=L)
    assert hac.covariance[0, 0] == pytest.approx(40 / 39 * by_hand / 40 ** 2, rel=1e-13)


def test_andrews_bandwidth():
    # floor(1.1447 (alpha n)^(1/3)), alpha = 4 rho^2 / ((1 - rho)^2 (1 + rho)^2)
    alpha = 4 * 0.81 / (0.01 * 3.61)
    assert bartlett_bandwidth(0.9, 1000) == math.floor(1.1447 * (alpha * 1000) ** (1 / 3))
    assert bartlett_bandwidth(0.9, 1000) == 51
    assert bartlett_bandwidth(0.0, 1000) == 0
    assert bartlett_bandwidth(0.999, 10) == 9        # at most n - 1


def test_series_are_summed_without_cross_terms():
    rng = np.random.default_rng(3)
    S1, S2 = rng.normal(size=(30, 2)), rng.normal(size=(20, 2))
    r1, r2 = rng.normal(size=30), rng.normal(size=20)
    w1, w2 = np.ones(30), np.full(20, 2.0)
    both = hac_covariance(["p", "q"], [("y", S1, r1, w1), ("z", S2, r2, w2)], bandwidth=2)
    A = S1.T @ S1 + 2 * S2.T @ S2
    omega = long_run_covariance(r1[:, None] * S1, 2) + long_run_covariance(
        (2 * r2)[:, None] * S2, 2)
    Ainv = np.linalg.inv(A)
    assert np.allclose(both.covariance, 50 / 48 * Ainv @ omega @ Ainv, rtol=1e-12, atol=0)


# ---------------------------------------------------------------------------- identify
def test_white_residuals_give_the_white_noise_standard_errors(line):
    sc = Scenario(t_end=2.0, h=0.001)
    t = sc.times
    y = TRUTH["a"] + TRUTH["b"] * t + np.random.default_rng(4).normal(0.0, SIGMA, t.size)
    st = fit(line, sc, y).statistics
    assert st.white_residual and st.covariance_kind == "white"
    ratio = np.array(list(st.standard_errors_hac.values())) / np.array(
        list(st.standard_errors.values()))
    # the HAC estimate's own spread: a few per cent at 2001 samples and a small bandwidth
    assert np.all(np.abs(ratio - 1) < 0.1), ratio
    assert "NOT valid" not in st.summary()
    assert st.recommended_standard_errors == st.standard_errors


def test_a_correlated_residual_is_labelled(line):
    sc = Scenario(t_end=2.0, h=0.002)
    t = sc.times
    rng = np.random.default_rng(5)
    e1 = Experiment(line, LeastSquares({"y": TRUTH["a"] + TRUTH["b"] * t + ar1(rng, t.size)},
                                       ["y"], quadrature="sum"), sc, name="e1")
    e2 = Experiment(line, LeastSquares({"y": TRUTH["a"] + TRUTH["b"] * t
                                        + rng.normal(0.0, SIGMA, t.size)},
                                       ["y"], quadrature="sum"), sc, name="e2")
    res = identify([e1, e2], ["a", "b"], TRUTH, method="least_squares", progress=False)
    st = res.statistics
    assert st.correlated == ("y (e1)",) and not st.white_residual
    assert st.covariance_kind == "hac"
    assert set(st.hac.bandwidths) == {"y (e1)", "y (e2)"}
    assert st.hac.prewhitening["y (e1)"] > 0.8 > abs(st.hac.prewhitening["y (e2)"])
    text = res.summary()
    assert "NOT valid here: the residual of y (e1) is correlated" in text
    assert "standard errors for correlated residuals (Newey-West" in text
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))["statistics"]
    assert d["standard_errors_assume"] == "white noise" and d["residual_white"] is False
    assert d["correlated_residuals"] == ["y (e1)"] and d["covariance_kind"] == "hac"
    assert d["hac"]["standard_errors"] == pytest.approx(st.standard_errors_hac, rel=1e-15)
    # the statistics alone say the same
    alone = identification_statistics([e1, e2], ["a", "b"], res.values)
    assert alone.correlated == st.correlated


def test_hac_covers_the_truth_on_coloured_noise(line):
    """AR(1) noise, rho = 0.9, 2001 samples, 300 replicates of identify.

    The white-noise 95 % intervals cover far less than 95 % (the variance is about 19 times
    larger than F^-1 says); the HAC ones cover within three binomial standard deviations of
    95 % (sqrt(0.95 0.05 / 300) = 0.0126: [0.912, 0.988])."""
    sc = Scenario(t_end=2.0, h=0.001)
    t = sc.times
    n, R = t.size, 300
    X = np.column_stack([np.ones(n), t])
    Ainv = np.linalg.inv(X.T @ X)
    exact = np.sqrt(np.diag(Ainv @ X.T @ (SIGMA ** 2 * toeplitz(RHO ** np.arange(n))) @ X
                            @ Ainv))
    rng = np.random.default_rng(6)
    truth = np.array([TRUTH["a"], TRUTH["b"]])
    est, se_white, se_hac, flagged = [], [], [], 0
    for _ in range(R):
        res = fit(line, sc, X @ truth + ar1(rng, n))
        st = res.statistics
        est.append([res.values["a"], res.values["b"]])
        se_white.append(list(st.standard_errors.values()))
        se_hac.append(list(st.standard_errors_hac.values()))
        flagged += st.covariance_kind == "hac"
    est, se_white, se_hac = np.array(est), np.array(se_white), np.array(se_hac)
    # the reference: the estimates' spread agrees with the exact covariance (the standard
    # deviation's relative standard error over 300 replicates is 1 / sqrt(600) = 0.04)
    spread = est.std(axis=0, ddof=1)
    assert np.all(np.abs(spread / exact - 1) < 0.15), (spread, exact)
    cover_white = np.mean(np.abs(est - truth) <= 1.96 * se_white, axis=0)
    cover_hac = np.mean(np.abs(est - truth) <= 1.96 * se_hac, axis=0)
    band = 3 * math.sqrt(0.95 * 0.05 / R)
    print(f"coverage of the 95 % intervals over {R} replicates: white {cover_white}, "
          f"HAC {cover_hac} (band 0.95 +- {band:.3f}); mean se / exact: white "
          f"{se_white.mean(axis=0) / exact}, HAC {se_hac.mean(axis=0) / exact}")
    assert flagged == R                   # every residual is seen to be correlated
    assert np.all(cover_white < 0.6), cover_white
    assert np.all(np.abs(cover_hac - 0.95) <= band), cover_hac
    assert np.all(se_white.mean(axis=0) / exact < 0.4)
    assert np.all(np.abs(se_hac.mean(axis=0) / exact - 1) < 0.15)


def test_a_residual_at_round_off_is_not_checked(line):
    """Noise-free data with the noise level given: the residual is round-off, which says
    nothing of the noise's correlation; no HAC standard errors of round-off."""
    sc = Scenario(t_end=2.0, h=0.01)
    exp = Experiment(line, LeastSquares({"y": TRUTH["a"] + TRUTH["b"] * sc.times}, ["y"],
                                        quadrature="sum"), sc)
    st = identification_statistics(exp, ["a", "b"], TRUTH, noise=SIGMA)
    assert st.hac is None and st.standard_errors_hac is None and st.correlated == ()
    assert st.covariance_kind == "white" and st.standard_errors is not None
    assert "could not be checked for correlation: it is at round-off" in st.summary()
