"""Snapshot POD (symdae.analysis.pod): modes, energies, ratios, signs, spectra, bad input.

Reference values come from snapshot sets built here with known modes: Y = sum_i a_i(t) w_i^T
with orthonormal w_i and coefficients a_i orthogonal in the quadrature's inner product, so
lambda_i = sum_k mu_k a_i(t_k)^2 and w_i are known exactly (spec pod.md 7.2, items 1-3).
"""
from __future__ import annotations

import numpy as np
import pytest

from symdae import Measurement, PODModeError, pod
from symdae.analysis.pod import fix_signs, mac
from symdae.errors import DataError, InputError

K, ND = 401, 6
ENERGIES = np.array([3.0, 1.0, 0.2, 0.03, 4e-3, 5e-4])


def left_mu(t):
    mu = np.zeros_like(t)
    mu[:-1] = np.diff(t)
    return mu


def synthetic(energies=ENERGIES, seed=0, k=K):
    """(t, Y, W, A): Y = A W^T, W orthonormal with the sign rule, A mu-orthogonal with
    sum_k mu_k A[:, i]^2 = energies[i]."""
    rng = np.random.default_rng(seed)
    nd = len(energies)
    t = np.linspace(0.0, 2.0, k)
    mu = left_mu(t)
    W = fix_signs(np.linalg.qr(rng.standard_normal((nd, nd)))[0])
    B = rng.standard_normal((k - 1, nd))                 # the weighted samples (mu > 0)
    Q = np.linalg.qr(np.sqrt(mu[:-1])[:, None] * B)[0]   # orthonormal columns
    A = np.zeros((k, nd))
    A[:-1] = Q / np.sqrt(mu[:-1])[:, None] * np.sqrt(energies)
    A[-1] = rng.standard_normal(nd)                      # mu_N = 0: any value
    return t, A @ W.T, W, A


def test_recovers_modes_energies_and_ratios():
    t, Y, W, A = synthetic()
    P = pod(Y, t=t)
    np.testing.assert_allclose(P.eigenvalues, ENERGIES, rtol=1e-12)
    np.testing.assert_allclose(P.modes, W, atol=1e-12)
    np.testing.assert_allclose(P.coefficients, A, atol=1e-12 * np.abs(A).max())
    assert abs(P.ratios.sum() - 1.0) <= 1e-15
    np.testing.assert_allclose(P.ratios, ENERGIES / ENERGIES.sum(), rtol=1e-12)
    assert P.rank == ND and P.outputs == tuple(f"s{j}" for j in range(ND))
    np.testing.assert_array_equal(P.mode(2), P.modes[:, 1])
    np.testing.assert_array_equal(P.coefficient(3), P.coefficients[:, 2])


@pytest.mark.parametrize("k", [0, 1, 3, ND])
def test_rank_k_reconstruction_error_is_eckart_young(k):
    t, Y, _, _ = synthetic(seed=3)
    P = pod(Y, t=t)
    mu = left_mu(t)
    err = float(np.sum(mu[:, None] * (Y - P.reconstruct(k)) ** 2))
    assert err == pytest.approx(ENERGIES[k:].sum(), rel=1e-11, abs=1e-13 * ENERGIES.sum())


def test_svd_and_eigh_agree():
    t, Y, _, _ = synthetic(seed=5)
    a, b = pod(Y, t=t, method="svd"), pod(Y, t=t, method="eigh")
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(a.modes * b.modes, axis=0)), 1.0, atol=1e-10)


def test_svd_of_a_tall_and_ill_conditioned_set_matches_lapack():
    """The triangular-factor path (CholeskyQR2) against LAPACK's SVD of the weighted samples,
    with energies over 12 orders of magnitude (like the beam's POMs 1..11)."""
    energies = np.logspace(0, -12, 7)
    t, Y, _, _ = synthetic(energies, seed=2, k=3001)
    P = pod(Y, t=t)
    _, s, Vt = np.linalg.svd(np.sqrt(left_mu(t))[:, None] * Y, full_matrices=False)
    np.testing.assert_allclose(P.eigenvalues, s ** 2, rtol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(P.modes * Vt.T, axis=0)), 1.0, atol=1e-12)


def test_sign_rule_is_deterministic_under_a_negated_column():
    t, Y, _, _ = synthetic(seed=7)
    Y2 = Y.copy()
    Y2[:, 2] *= -1
    for P in (pod(Y, t=t), pod(Y2, t=t)):
        k = np.argmax(np.abs(P.modes), axis=0)
        assert np.all(P.modes[k, np.arange(ND)] > 0)
    a, b = pod(Y, t=t), pod(Y2, t=t)
    flipped = b.modes.copy()
    flipped[2] *= -1                                     # the same modes, row 2 negated
    np.testing.assert_allclose(np.abs(np.sum(a.modes * flipped, axis=0)), 1.0, atol=1e-12)
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-12)


def test_center_subtracts_the_weighted_mean():
    t, Y, _, _ = synthetic(seed=1)
    offset = np.arange(1.0, ND + 1.0)
    P = pod(Y + offset, t=t, center=True)
    mu = left_mu(t)
    mean = mu @ (Y + offset) / mu.sum()
    np.testing.assert_allclose(P.mean, mean, rtol=1e-13)
    np.testing.assert_allclose(mu @ P.coefficients, 0.0, atol=1e-12)
    np.testing.assert_allclose(P.reconstruct(ND), Y + offset, atol=1e-12)


def test_sources_trajectory_measurement_mapping_agree():
    t, Y, _, _ = synthetic(seed=4)
    names = [f"w{j}" for j in range(ND)]
    m = Measurement(t, {n: Y[:, j] for j, n in enumerate(names)})
    parts = [Measurement(t, {n: Y[:, j]}) for j, n in enumerate(names)]
    a = pod(m, names)
    b = pod(parts)
    c = pod({n: Y[:, j] for j, n in enumerate(names)}, t=t)
    for P in (b, c):
        np.testing.assert_array_equal(P.eigenvalues, a.eigenvalues)
        assert P.outputs == tuple(names)
    sub = pod(m, ["w3", "w1"])
    assert sub.outputs == ("w3", "w1")


def test_spectrum_finds_a_sinusoid_with_its_amplitude():
    t = np.arange(0, 2.0, 1e-3)
    f0, amp = 37.3, 2.5
    a1 = amp * np.sin(2 * np.pi * f0 * t)
    a2 = 0.1 * np.cos(2 * np.pi * 90.0 * t)
    W = fix_signs(np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))[0])
    Y = np.outer(a1, W[:, 0]) + np.outer(a2, W[:, 1])
    sp = pod(Y, t=t).spectrum(1)
    df = 1.0 / (len(t) * 1e-3 * 8)
    assert abs(sp.peak_frequency() - f0) <= df
    assert np.max(sp.amplitude) == pytest.approx(amp, rel=5e-3)   # Hann, padded x8
    sp2 = pod(Y, t=t).spectrum(2, window="boxcar", pad=4)
    assert abs(sp2.peak_frequency() - 90.0) <= 1.0 / (len(t) * 1e-3 * 4)
    assert sp.window == "hann"


def test_mac_of_identical_and_orthogonal_vectors():
    Q = np.linalg.qr(np.random.default_rng(1).standard_normal((5, 5)))[0]
    np.testing.assert_allclose(mac(Q, -2 * Q), np.eye(5), atol=1e-14)


# ---------------------------------------------------------------------------- bad input
def test_outputs_with_mismatched_sample_times_are_named():
    t = np.linspace(0, 1, 11)
    a = Measurement(t, {"w0": np.sin(t)})
    b = Measurement(t * 1.01, {"w1": np.cos(t)})
    with pytest.raises(DataError, match=r"output 'w1'.*other times than 'w0'"):
        pod([a, b])
    with pytest.raises(DataError, match="different numbers of samples"):
        pod({"w0": np.ones(5), "w1": np.ones(6)})


def test_nan_zero_energy_and_unknown_output():
    t = np.linspace(0, 1, 11)
    Y = np.ones((11, 2))
    Y[4, 1] = np.nan
    with pytest.raises(DataError, match=r"output 's1' is NaN or infinite at sample 4"):
        pod(Y, t=t)
    with pytest.raises(DataError, match="no energy"):
        pod(np.zeros((11, 3)), t=t)
    with pytest.raises(DataError, match=r"no samples of output\(s\) \['x'\]"):
        pod({"a": np.ones(11)}, ["x"], t=t)


def test_mode_numbers_are_checked():
    t, Y, _, _ = synthetic()
    P = pod(Y, t=t)
    with pytest.raises(PODModeError, match=r"POD mode 7 does not exist: there are 6 modes"):
        P.mode(7)
    with pytest.raises(PODModeError, match="POD mode 0"):
        P.coefficient(0)
    with pytest.raises(InputError, match="whole numbers"):
        P.mode(1.5)
    with pytest.raises(InputError, match="reconstruct"):
        P.reconstruct(7)


def test_mode_beyond_rank_and_fewer_snapshots_than_modes():
    from symdae.analysis.pod import check_modes

    t = np.linspace(0, 1, 50)
    Y = np.outer(np.sin(3 * t), [1, 2, 0, 1]) + np.outer(np.cos(5 * t), [0, 1, 1, -1])
    P = pod(Y, t=t)
    assert P.rank == 2
    check_modes(P, [1, 2])
    with pytest.raises(PODModeError, match=r"POD mode 3 of the data lies beyond the rank 2"):
        check_modes(P, [3])
    t3 = np.array([0.0, 0.1, 0.2])                       # 2 weighted snapshots (left rule)
    P3 = pod(np.random.default_rng(0).standard_normal((3, 5)), t=t3)
    assert P3.n_modes == 5
    with pytest.raises(PODModeError, match=r"POD mode 3 of the data: only 2 snapshots"):
        check_modes(P3, [3])


def test_spectrum_needs_uniform_samples():
    t = np.array([0.0, 0.1, 0.3, 0.4, 0.5])
    P = pod(np.random.default_rng(0).standard_normal((5, 2)), t=t)
    with pytest.raises(DataError, match="POD mode 1: the sample times are not uniform"):
        P.spectrum(1)
    t = np.linspace(0, 1, 5)
    with pytest.raises(InputError, match="unknown window"):
        pod(np.random.default_rng(0).standard_normal((5, 2)), t=t).spectrum(1, window="nope")


def test_spectrum_of_a_constant_is_its_value_at_zero_frequency():
    # amplitude correction: divided by the window's sum, the mean is not doubled
    t = np.linspace(0, 1, 101)
    P = pod(np.ones((101, 1)) * 3.0, t=t)
    sp = P.spectrum(1, pad=1)
    assert sp.frequency[0] == 0.0
    assert sp.amplitude[0] == pytest.approx(3.0, rel=1e-12)
