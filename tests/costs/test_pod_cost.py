"""PODCost on given snapshot sets: values from the definition, dJ/dS against finite differences.

The cost only reads the outputs of a trajectory, so these tests hand it trajectories with known
outputs (a stand-in system carries the output names). The simulated-basis derivative (through
the eigenproblem of C = Y^T diag(mu) Y) is checked against central differences of J in random
directions of S, with the step halved to show the truncation error (spec pod.md 7.2, item 4);
the "frozen basis" formula that leaves out dw_i/dS must fail the same check.
"""
from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

from symdae import Measurement, PODCost, PODModeError, PODWarning
from symdae.analysis.quadrature import quadrature_weights
from symdae.errors import DataError, InputError, UnknownNameError

K, ND = 300, 6
NAMES = [f"w{j}" for j in range(ND)]
T = np.linspace(0.0, 1.0, K)


class Stub:
    """What a cost reads of a System: the output names and their count."""

    def __init__(self, names=NAMES):
        self.model = types.SimpleNamespace(output_names=list(names))
        self.sizes = types.SimpleNamespace(n_s=len(names))


def traj_of(Y, t=T, names=NAMES):
    return types.SimpleNamespace(t=t, outputs={n: Y[:, j] for j, n in enumerate(names)})


def sample_sets(seed=0, scales=(5, 3, 2, 1, 0.5, 0.2), noise=0.1):
    """(data Ybar, model Y): smooth random signals with distinct energies, Y = Ybar + noise."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((ND, ND)))[0]
    freqs = rng.uniform(1, 12, ND)
    A = np.column_stack([s * np.sin(2 * np.pi * f * T + rng.uniform(0, 6))
                         for s, f in zip(scales, freqs)])
    Ybar = A @ basis.T
    return Ybar, Ybar + noise * rng.standard_normal((K, ND))


def data_of(Ybar):
    return {n: Ybar[:, j] for j, n in enumerate(NAMES)}


def fd_check(cost, Y, seed=1, delta=1e-4, system=None):
    """Along 3 random directions D of S: (error of central FD with step delta, with delta / 2,
    of their Richardson extrapolation), each relative to |dJ/dS| |D| (Frobenius norms), the
    bound of the directional derivative: a random direction can make the derivative itself
    small, and round-off in J does not scale with it."""
    system = system or Stub()
    J, G = cost.evaluate(system, traj_of(Y))
    rng = np.random.default_rng(seed)
    errs = []
    for _ in range(3):
        D = rng.standard_normal(Y.shape)
        exact = float(np.sum(G * D))
        scale = float(np.linalg.norm(G) * np.linalg.norm(D))
        fd = [(cost.evaluate(system, traj_of(Y + d * D))[0]
               - cost.evaluate(system, traj_of(Y - d * D))[0]) / (2 * d)
              for d in (delta, delta / 2)]
        rich = (4 * fd[1] - fd[0]) / 3
        errs.append([abs(x - exact) / scale for x in (*fd, rich)])
    return np.array(errs)


# ---------------------------------------------------------------------------- values
def test_measured_basis_value_is_the_projected_least_squares():
    Ybar, Y = sample_sets()
    cost = PODCost(data_of(Ybar), mode=2)
    J, G = cost.evaluate(Stub(), traj_of(Y))
    mu = np.concatenate([np.diff(T), [0.0]])
    C = Ybar.T @ (mu[:, None] * Ybar)
    lam, V = np.linalg.eigh(C)
    w = V[:, -2] * np.sign(V[np.argmax(np.abs(V[:, -2])), -2])
    e = Y @ w - Ybar @ w
    assert J == pytest.approx(0.5 * np.sum(mu * e * e), rel=1e-12)
    np.testing.assert_allclose(G, np.outer(mu * e, w), atol=1e-14 * np.abs(G).max())
    assert cost.last.modes == (2,) and cost.last.costs[0] == pytest.approx(J, rel=1e-14)


def test_several_modes_with_weights_and_normalisation_add_up():
    Ybar, Y = sample_sets(seed=2)
    for basis in ("measured", "simulated"):
        parts = [PODCost(data_of(Ybar), mode=i, basis=basis).evaluate(Stub(), traj_of(Y))
                 for i in (1, 3, 4)]
        rho = [1.0, 0.5, 2.0]
        J, G = PODCost(data_of(Ybar), mode=[1, 3, 4], weights=rho,
                       basis=basis).evaluate(Stub(), traj_of(Y))
        assert J == pytest.approx(sum(r * p[0] for r, p in zip(rho, parts)), rel=1e-12)
        np.testing.assert_allclose(G, sum(r * p[1] for r, p in zip(rho, parts)), rtol=0,
                                   atol=1e-13 * np.abs(G).max())
        cost = PODCost(data_of(Ybar), mode=[1, 3], weights={3: 0.5}, basis=basis,
                       normalise=True)
        Jn, _ = cost.evaluate(Stub(), traj_of(Y))
        lam = cost.last.data_pod.eigenvalues
        assert Jn == pytest.approx(parts[0][0] / lam[0] + 0.5 * parts[1][0] / lam[2],
                                   rel=1e-12)


def test_zero_at_the_data_itself():
    Ybar, _ = sample_sets(seed=3)
    for basis in ("measured", "simulated"):
        cost = PODCost(data_of(Ybar), mode=[1, 2, 5], basis=basis)
        J, G = cost.evaluate(Stub(), traj_of(Ybar))
        energy = cost.last.data_pod.eigenvalues.sum()
        # a_i and abar_i are the same products up to the BLAS path's rounding
        assert J <= 1e-28 * energy and np.abs(G).max() <= 1e-13 * np.abs(Ybar).max()


# ---------------------------------------------------------------------------- derivatives
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("mode", [1, 3, 6])
def test_simulated_basis_derivative_against_finite_differences(mode, center):
    Ybar, Y = sample_sets(seed=4)
    cost = PODCost(data_of(Ybar), mode=mode, basis="simulated", center=center)
    errs = fd_check(cost, Y)
    # a truncation error: halving the step divides it by 4, and Richardson extrapolation of
    # the two removes it down to round-off
    assert np.all(errs[:, 1] <= 1e-6), errs
    ratio = errs[:, 0] / errs[:, 1]
    assert np.all((ratio > 3.5) & (ratio < 4.5)), errs
    assert np.all(errs[:, 2] <= 1e-9), errs


@pytest.mark.parametrize("center", [False, True])
def test_measured_basis_derivative_is_exact(center):
    Ybar, Y = sample_sets(seed=5)
    cost = PODCost(data_of(Ybar), mode=[2, 4], weights=[1.0, 3.0], center=center)
    errs = fd_check(cost, Y)      # J is quadratic in S: central differences are exact
    assert np.all(errs[:, :2] <= 1e-9), errs


def test_frozen_basis_formula_fails_the_same_check():
    """The paper's probable shortcut, mu_k e_k w_i with w_i held fixed, is not dJ/dS of the
    simulated-basis cost."""
    Ybar, Y = sample_sets(seed=4)
    cost = PODCost(data_of(Ybar), mode=3, basis="simulated")
    J, G = cost.evaluate(Stub(), traj_of(Y))
    rec = cost.last
    w = rec.model_pod.modes[:, rec.matched[0] - 1]
    w = w * np.sign(w @ rec.data_pod.mode(3))
    mu = quadrature_weights(T, "left")
    frozen = np.outer(mu * (Y @ w - rec.data_coefficients[:, 0]), w)
    D = np.random.default_rng(1).standard_normal(Y.shape)
    d = 5e-5
    fd = (cost.evaluate(Stub(), traj_of(Y + d * D))[0]
          - cost.evaluate(Stub(), traj_of(Y - d * D))[0]) / (2 * d)
    assert abs(np.sum(G * D) - fd) / abs(fd) <= 1e-7
    assert abs(np.sum(frozen * D) - fd) / abs(fd) > 1e-2


def test_data_on_a_coarser_grid_uses_only_those_samples():
    Ybar, Y = sample_sets(seed=6)
    m = Measurement(T[::3], {n: Ybar[::3, j] for j, n in enumerate(NAMES)})
    for basis in ("measured", "simulated"):
        cost = PODCost(m, NAMES, mode=2, basis=basis)
        J, G = cost.evaluate(Stub(), traj_of(Y))
        assert np.all(G[1::3] == 0) and np.all(G[2::3] == 0) and np.any(G[::3])
        ref = PODCost(data_of(Ybar[::3]), mode=2, basis=basis)
        J3, G3 = ref.evaluate(Stub(), traj_of(Y[::3], T[::3]))
        assert J == pytest.approx(J3, rel=1e-13)
        np.testing.assert_allclose(G[::3], G3, atol=1e-14 * np.abs(G3).max())


# ---------------------------------------------------------------------------- mode matching
def swapped_sets():
    """Data with POMs 2 and 3 of energies 3 : 2; the model has them swapped (2 : 3)."""
    rng = np.random.default_rng(8)
    basis = np.linalg.qr(rng.standard_normal((ND, ND)))[0]
    sig = [np.sin(2 * np.pi * f * T) for f in (1, 3, 5, 7, 9, 11)]
    data = np.column_stack([s * a for s, a in zip(sig, (5, 3, 2, 1, .5, .2))]) @ basis.T
    model = np.column_stack([s * a for s, a in zip(sig, (5, 2, 3, 1, .5, .2))]) @ basis.T
    return data, model


def test_swapped_modes_are_refused_by_index_and_found_by_mac():
    data, model = swapped_sets()
    with pytest.raises(PODModeError, match=r"POD mode 2: the simulated POM 2 does not "
                                           r"correspond"):
        PODCost(data_of(data), mode=2, basis="simulated").evaluate(Stub(), traj_of(model))
    cost = PODCost(data_of(data), mode=[2, 3], basis="simulated", match="mac")
    J, G = cost.evaluate(Stub(), traj_of(model))
    assert cost.last.matched == (3, 2)
    assert min(cost.last.alignment) > 0.999
    errs = fd_check(cost, model)
    assert np.all(errs[:, 2] <= 1e-9), errs


def test_repeated_eigenvalue_is_an_error_and_a_close_one_a_warning():
    rng = np.random.default_rng(9)
    basis = np.linalg.qr(rng.standard_normal((ND, ND)))[0]
    # sin and cos of one frequency over whole periods: exactly equal energies
    t = np.arange(K) / (K - 1)
    sig = [np.sin(2 * np.pi * 4 * t), np.cos(2 * np.pi * 4 * t)] + \
        [np.sin(2 * np.pi * f * t) for f in (7, 9, 11, 13)]
    amps = (2, 2, 1, .5, .3, .1)
    Y = np.column_stack([s * a for s, a in zip(sig, amps)]) @ basis.T
    mu = np.concatenate([np.diff(t), [0]])
    lam = np.linalg.eigvalsh(Y.T @ (mu[:, None] * Y))[::-1]
    assert abs(lam[0] - lam[1]) < 1e-12 * lam[0]   # the construction is degenerate
    cost = PODCost(data_of(Y), mode=2, basis="simulated")
    with pytest.raises(PODModeError, match=r"POD mode 2: the simulated POM 2 has a repeated "
                                           r"eigenvalue"):
        cost.evaluate(Stub(), traj_of(Y, t))
    amps = (2, 2 * (1 - 2e-4), 1, .5, .3, .1)
    Y2 = np.column_stack([s * a for s, a in zip(sig, amps)]) @ basis.T
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PODCost(data_of(Y2), mode=3, basis="simulated").evaluate(Stub(), traj_of(Y2, t))
    assert not [w for w in caught if issubclass(w.category, PODWarning)]   # well separated
    with pytest.warns(PODWarning, match=r"POD mode 1: the simulated POM 1 is nearly "
                                        r"degenerate"):
        PODCost(data_of(Y2), mode=1, basis="simulated").evaluate(Stub(), traj_of(Y2, t))


# ---------------------------------------------------------------------------- bad input
def test_bad_arguments_are_named():
    Ybar, _ = sample_sets()
    d = data_of(Ybar)
    with pytest.raises(PODModeError, match="POD mode 7 does not exist: 6 outputs"):
        PODCost(d, mode=[2, 7])
    with pytest.raises(InputError, match="whole numbers from 1"):
        PODCost(d, mode=0)
    with pytest.raises(InputError, match="mode listed twice"):
        PODCost(d, mode=[2, 2])
    with pytest.raises(InputError, match="2 weights for 3 modes"):
        PODCost(d, mode=[1, 2, 3], weights=[1, 2])
    with pytest.raises(InputError, match="weight of mode 2"):
        PODCost(d, mode=[1, 2], weights={2: -1.0})
    with pytest.raises(InputError, match="basis must be"):
        PODCost(d, basis="frozen")
    with pytest.raises(InputError, match="needs basis='simulated'"):
        PODCost(d, match="mac")


def test_data_problems_are_named():
    Ybar, Y = sample_sets()
    d = data_of(Ybar)
    with pytest.raises(UnknownNameError, match="no output 'x'"):
        PODCost({**d, "x": Ybar[:, 0]}).evaluate(Stub(), traj_of(Y))
    short = {n: v[:-1] for n, v in d.items()}
    with pytest.raises(DataError, match=r"the data for 'w0' have shape \(299,\), the simulation grid 300"):
        PODCost(short).evaluate(Stub(), traj_of(Y))
    bad = dict(d)
    bad["w3"] = bad["w3"].copy()
    bad["w3"][10] = np.nan
    with pytest.raises(DataError, match=r"output 'w3' is NaN or infinite at sample 10"):
        PODCost(bad).evaluate(Stub(), traj_of(Y))
    a = Measurement(T, {n: Ybar[:, j] for j, n in enumerate(NAMES[:3])})
    b = Measurement(T[::2], {n: Ybar[::2, j] for j, n in enumerate(NAMES[3:], start=3)})
    with pytest.raises(DataError, match=r"output 'w3'.*other times than 'w0'"):
        PODCost([a, b]).evaluate(Stub(), traj_of(Y))
    low_rank = np.outer(Ybar[:, 0], np.arange(1.0, ND + 1))
    with pytest.raises(PODModeError, match="POD mode 2 of the data lies beyond the rank 1"):
        PODCost(data_of(low_rank), mode=2).evaluate(Stub(), traj_of(Y))
    with pytest.raises(DataError, match="carry no energy"):
        PODCost(data_of(np.zeros((K, ND)))).evaluate(Stub(), traj_of(Y))


def test_fewer_snapshots_than_the_mode_number():
    t = np.array([0.0, 0.5, 1.0])
    Ybar = np.random.default_rng(0).standard_normal((3, ND))
    cost = PODCost(data_of(Ybar), mode=3)
    with pytest.raises(PODModeError, match=r"POD mode 3 of the data: only 2 snapshots"):
        cost.evaluate(Stub(), traj_of(Ybar * 1.1, t))


def test_one_output_with_the_simulated_basis():
    """One output: a single mode with no neighbour to be degenerate with. J is the mode
    coefficient mismatch (here |w| = 1, so a = +-y, the sign fixed against the data), and
    dJ/dS agrees with central differences."""
    rng = np.random.default_rng(3)
    ybar = np.sin(2 * np.pi * 3 * T)
    y = ybar + 0.05 * rng.standard_normal(K)
    cost = PODCost({"w0": ybar}, ["w0"], mode=1, basis="simulated")
    stub = Stub(["w0"])
    J, G = cost.evaluate(stub, traj_of(y[:, None], names=["w0"]))
    mu = np.concatenate([np.diff(T), [0.0]])          # the left rule, as above
    assert J == pytest.approx(0.5 * np.sum(mu * (y - ybar) ** 2), rel=1e-12)
    D = rng.standard_normal((K, 1))
    d = 1e-6
    fd = (cost.evaluate(stub, traj_of(y[:, None] + d * D, names=["w0"]))[0]
          - cost.evaluate(stub, traj_of(y[:, None] - d * D, names=["w0"]))[0]) / (2 * d)
    assert float(np.sum(G * D)) == pytest.approx(fd, rel=1e-6)
