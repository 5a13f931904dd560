"""The compiled reductions (symdae/simulation/core/reductions.pyx) against NumPy: the
least-squares sum is np.sum's bit for bit (its pairwise summation, at the lengths where its
blocks split), dJ/ds is added in place, and the first non-finite output sample is found in
row order; the NumPy fallback (no compiled core) gives the same numbers."""
from __future__ import annotations

import numpy as np
import pytest

from symdae.simulation import reductions
from symdae.simulation.core import reductions as compiled

LENGTHS = [0, 1, 7, 8, 9, 127, 128, 129, 136, 255, 256, 257, 1000, 10001, 65537]


def numpy_sum(s, ref, w):
    r = s - ref
    return float(np.sum((w * r) * r)), w * r


@pytest.fixture(params=["compiled", "numpy"])
def least_squares(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(reductions, "_compiled", None)
    return reductions.least_squares


@pytest.mark.parametrize("n", LENGTHS)
def test_least_squares_is_numpys_sum(n, least_squares):
    rng = np.random.default_rng(n)
    # outputs in the columns of a trajectory's S: a strided view, as a cost reads them
    S = rng.standard_normal((n, 3)) * 10.0 ** rng.uniform(-6, 6, (n, 3))
    ref = S[:, 1] + rng.standard_normal(n) * 1e-3
    w = rng.uniform(0.0, 2.0, n)
    J, wr = numpy_sum(S[:, 1], ref, w)
    dS = np.zeros((n, 3))
    dS[:, 1] = 0.5
    assert least_squares(S[:, 1], ref, w) == J
    assert least_squares(S[:, 1], ref, w, dS[:, 1]) == J
    np.testing.assert_array_equal(dS[:, 1], 0.5 + wr)
    assert not dS[:, [0, 2]].any()


def test_least_squares_of_a_non_finite_sample_is_not_finite(least_squares):
    s = np.ones(300)
    s[200] = np.nan
    assert np.isnan(least_squares(s, np.zeros(300), np.ones(300)))
    s[200] = np.inf
    assert least_squares(s, np.zeros(300), np.ones(300)) == np.inf


def test_least_squares_refuses_different_lengths():
    with pytest.raises(ValueError, match="lengths 5, 4, 5 differ"):
        compiled.least_squares(np.ones(5), np.ones(4), np.ones(5))
    with pytest.raises(ValueError, match="lengths 5, 5, 5, 6 differ"):
        compiled.least_squares(np.ones(5), np.ones(5), np.ones(5), np.zeros(6))


@pytest.mark.parametrize("use", ["compiled", "numpy"])
def test_first_nonfinite(use, monkeypatch):
    if use == "numpy":
        monkeypatch.setattr(reductions, "_compiled", None)
    S = np.arange(40.0).reshape(10, 4)
    assert reductions.first_nonfinite(S) is None
    assert reductions.first_nonfinite(np.zeros((0, 3))) is None
    S[7, 0] = -np.inf
    S[6, 3] = np.nan
    S[6, 1] = np.inf
    assert reductions.first_nonfinite(S) == (6, 1)
    assert reductions.first_nonfinite(S[:, 2:]) == (6, 1)        # a strided view
    assert reductions.first_nonfinite(S[7:]) == (0, 0)


# C-contiguous arrays are read as one flat run, in chunks of 512 entries summed in 8 lanes:
# shapes whose flat length ends inside a lane group, on a chunk's edge and past it
SHAPES = [(1, 1), (3, 5), (128, 4), (129, 4), (171, 3), (10001, 4), (600, 7)]


@pytest.mark.parametrize("shape", SHAPES)
def test_first_nonfinite_finds_the_first_in_row_order(shape):
    rng = np.random.default_rng(sum(shape))
    size = shape[0] * shape[1]
    # every flat position near a lane group's or chunk's edge, and random ones
    edges = {k + d for k in (0, 7, 8, 511, 512, 1023, 1024, size - 1) for d in (-1, 0, 1)}
    places = sorted(k for k in edges | set(rng.integers(0, size, 20)) if 0 <= k < size)
    for k in places:
        for bad in (np.nan, np.inf, -np.inf):
            S = rng.standard_normal(shape) * 1e300      # large finite values: 0 x stays 0
            S.flat[k] = bad
            later = rng.integers(k, size, 3)           # further ones do not matter
            S.flat[later] = np.nan
            want = divmod(k, shape[1])
            assert reductions.first_nonfinite(S) == want
            assert reductions.first_nonfinite(np.asfortranarray(S)) == want    # strided
    assert reductions.first_nonfinite(np.full(shape, -0.0)) is None
