"""Snapshot proper orthogonal decomposition (POD) of multi-point outputs.

The snapshot matrix Y ((samples) x (outputs), row k = u(t_k)) is decomposed with the quadrature
weights mu_k of the time integral, C = Y^T diag(mu) Y = sum_i lambda_i w_i w_i^T: the proper
orthogonal modes (POMs) w_i are the right singular vectors of diag(sqrt(mu)) Y, lambda_i the
squared singular values, r_i = lambda_i / sum(lambda) the contribution ratios and
a_i(t_k) = u(t_k)^T w_i the modal coordinates. Modes are numbered from 1 as in the POD paper
(POM 1 has the largest lambda); arrays are 0-based.

Sign convention: a singular vector is defined up to its sign; every mode is turned so that its
entry of largest magnitude is positive (the first such entry on an exact tie).
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..data.measurement import Measurement
from ..errors import DataError, InputError
from .quadrature import quadrature_weights

__all__ = ["PODResult", "ModeSpectrum", "pod", "snapshots", "decompose", "fix_signs", "mac",
           "PODModeError", "PODWarning", "check_modes", "DEGENERATE_GAP", "GAP_WARNING"]

DEGENERATE_GAP = 1e-12   # |lambda_i - lambda_l| below this times lambda_1: a repeated eigenvalue
GAP_WARNING = 1e-3       # relative gap below which the basis derivative (~ 1/gap) is warned about


class PODModeError(DataError):
    """A requested POD mode does not exist or cannot be used (beyond the rank, repeated
    eigenvalue, no corresponding mode in the other data set)."""


class PODWarning(UserWarning):
    """A POD mode is usable but ill-conditioned (close eigenvalues)."""


# ---------------------------------------------------------------------------- records
@dataclass(frozen=True)
class ModeSpectrum:
    """One-sided amplitude spectrum of a modal coordinate a_i(t) (window amplitude-corrected,
    so a sinusoid of amplitude A shows a peak of height ~A)."""

    mode: int
    frequency: np.ndarray   # Hz
    amplitude: np.ndarray
    window: str

    def peaks(self, count: int = 3, fmin: float = 0.0) -> np.ndarray:
        """Frequencies of the ``count`` highest local maxima above ``fmin`` Hz, highest first."""
        from scipy.signal import find_peaks  # here: a POD cost or fit does not need it

        keep = self.frequency >= fmin
        f, x = self.frequency[keep], self.amplitude[keep]
        idx, _ = find_peaks(x)
        if idx.size == 0:
            idx = np.array([int(np.argmax(x))])
        idx = idx[np.argsort(x[idx])[::-1][:count]]
        return f[idx]

    def peak_frequency(self, fmin: float = 0.0) -> float:
        """Frequency of the highest peak above ``fmin`` Hz."""
        return float(self.peaks(1, fmin)[0])


@dataclass(frozen=True)
class PODResult:
    """The POD of one snapshot set.

    Attributes
    ----------
    t : (K,) sample times           outputs : names of the Nd outputs (columns of Y)
    weights : (K,) quadrature weights mu_k
    eigenvalues : (Nd,) lambda_i, descending (zeros beyond the rank)
    ratios : (Nd,) contribution ratios lambda_i / sum(lambda)
    modes : (Nd, Nd) w_i in column i - 1, sign-fixed
    coefficients : (K, Nd) a_i(t_k) = (u_k - mean)^T w_i in column i - 1
    mean : (Nd,) the subtracted mu-weighted mean, or None (raw snapshots, the default)
    rank : number of modes with lambda_i above the round-off level
    """

    t: np.ndarray
    outputs: tuple
    weights: np.ndarray
    eigenvalues: np.ndarray
    ratios: np.ndarray
    modes: np.ndarray
    coefficients: np.ndarray
    mean: np.ndarray | None
    rank: int

    @property
    def n_modes(self) -> int:
        """The number of modes (eigenvalues) of the decomposition."""
        return len(self.eigenvalues)

    def mode(self, i: int) -> np.ndarray:
        """w_i (1-based, as in the paper)."""
        return self.modes[:, _index(i, self.n_modes)]

    def coefficient(self, i: int) -> np.ndarray:
        """a_i(t) (1-based)."""
        return self.coefficients[:, _index(i, self.n_modes)]

    def reconstruct(self, k: int) -> np.ndarray:
        """The rank-k reconstruction sum_{i<=k} a_i(t) w_i^T (+ the mean), shape (K, Nd)."""
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or \
                not 0 <= k <= self.n_modes:
            raise InputError(f"reconstruct(k): k must be a whole number in 0..{self.n_modes}, "
                             f"got {k!r}")
        Y = self.coefficients[:, :k] @ self.modes[:, :k].T
        return Y if self.mean is None else Y + self.mean

    def spectrum(self, i: int, window: str = "hann", pad: int = 8) -> ModeSpectrum:
        """Amplitude spectrum of a_i(t): ``scipy.signal.windows`` window (amplitude-corrected:
        divided by its mean), zero-padded to ``pad`` times the length for the peak location."""
        j = _index(i, self.n_modes)
        dt = np.diff(self.t)
        if dt.size == 0 or np.ptp(dt) > 1e-9 * dt.mean():
            raise DataError(f"spectrum of POD mode {i}: the sample times are not uniform")
        if isinstance(pad, bool) or not isinstance(pad, numbers.Integral) or pad < 1:
            raise InputError(f"spectrum: pad must be a whole number >= 1, got {pad!r}")
        from scipy.signal.windows import get_window  # here: a POD cost does not need it

        x = self.coefficients[:, j]
        try:
            w = get_window(window, len(x), fftbins=False)
        except ValueError as exc:
            raise InputError(f"spectrum of POD mode {i}: unknown window {window!r} ({exc})") \
                from None
        nfft = pad * len(x)
        X = np.fft.rfft(x * w, nfft)
        amp = 2.0 * np.abs(X) / np.sum(w)
        amp[0] /= 2.0      # the mean is not doubled
        return ModeSpectrum(i, np.fft.rfftfreq(nfft, float(dt.mean())), amp, str(window))


def _index(i, n: int) -> int:
    if isinstance(i, bool) or not isinstance(i, numbers.Integral):
        raise InputError(f"POD mode numbers are whole numbers from 1, got {i!r}")
    if not 1 <= int(i) <= n:
        raise PODModeError(f"POD mode {i} does not exist: there are {n} modes (one per output), "
                           "numbered from 1")
    return int(i) - 1


# ---------------------------------------------------------------------------- snapshots
def _from_measurements(items: Sequence[Measurement], outputs):
    t = None
    cols, names = [], []
    for m in items:
        for name, x in m.values.items():
            if outputs is not None and name not in outputs:
                continue
            if t is None:
                t, first = m.t, name
            elif m.t.shape != t.shape or not np.allclose(m.t, t, rtol=0.0,
                                                         atol=1e-9 * abs(t[1] - t[0])):
                raise DataError(f"output {name!r} ({m.source}) is sampled at other times than "
                                f"{first!r}: a POD needs every output at the same sample times "
                                "(resample them onto one grid first)")
            cols.append(x)
            names.append(name)
    return t, names, cols


def snapshots(source, outputs: Sequence[str] | None = None, t=None):
    """(t, output names, Y) from a Trajectory, a Measurement, a list of Measurements, a
    mapping {name: samples} or an array Y (samples x outputs, with ``t``).

    Every output must have the same sample times (a DataError names the one that differs).
    """
    if outputs is not None:
        outputs = list(outputs)
        if len(set(outputs)) != len(outputs):
            raise InputError(f"outputs listed twice in {outputs}")
    if hasattr(source, "outputs") and hasattr(source, "t") and not isinstance(source, Mapping):
        t_src, values = source.t, dict(source.outputs)           # a Trajectory
    elif isinstance(source, Measurement):
        t_src, values = source.t, source.values
    elif isinstance(source, (list, tuple)) and source and \
            all(isinstance(m, Measurement) for m in source):
        t_src, names, cols = _from_measurements(source, outputs)
        values = dict(zip(names, cols))
    elif isinstance(source, Mapping):
        t_src, values = t, {k: np.asarray(v, dtype=float) for k, v in source.items()}
        lengths = {k: v.shape for k, v in values.items()}
        if len(set(lengths.values())) > 1:
            raise DataError(f"the outputs have different numbers of samples {lengths}: a POD "
                            "needs every output at the same sample times")
    else:
        Y = np.asarray(source, dtype=float)
        if Y.ndim != 2:
            raise InputError(f"a snapshot matrix must be 2-D (samples x outputs), got shape "
                             f"{Y.shape}")
        names = outputs or [f"s{j}" for j in range(Y.shape[1])]
        if len(names) != Y.shape[1]:
            raise InputError(f"{len(names)} output names for {Y.shape[1]} columns")
        t_src, values = t, {n: Y[:, j] for j, n in enumerate(names)}
    if outputs is None:
        outputs = list(values)
    missing = [n for n in outputs if n not in values]
    if missing:
        raise DataError(f"no samples of output(s) {missing}; available: {list(values)}")
    if not outputs:
        raise DataError("no outputs to decompose")
    Y = np.column_stack([np.asarray(values[n], dtype=float) for n in outputs])
    if t_src is None:
        t_src = np.arange(Y.shape[0], dtype=float)
    t_src = np.asarray(t_src, dtype=float)
    if t_src.shape != (Y.shape[0],):
        raise DataError(f"{Y.shape[0]} samples per output but {t_src.size} sample times")
    bad = np.argwhere(~np.isfinite(Y))
    if bad.size:
        k, j = bad[0]
        raise DataError(f"output {outputs[j]!r} is NaN or infinite at sample {k}")
    return t_src, list(outputs), Y


# ---------------------------------------------------------------------------- decomposition
def fix_signs(W: np.ndarray) -> np.ndarray:
    """Each column turned so that its entry of largest magnitude is positive."""
    W = np.array(W, dtype=float)
    k = np.argmax(np.abs(W), axis=0)
    s = np.sign(W[k, np.arange(W.shape[1])])
    s[s == 0] = 1.0
    return W * s


def _triangular_factor(A: np.ndarray) -> np.ndarray | None:
    """R of A = Q R by CholeskyQR2 (Fukaya et al. 2014), or None when A is too ill-conditioned
    for it (then the caller takes LAPACK's SVD of A itself).

    The singular values and right singular vectors of A are those of R (Nd x Nd). LAPACK's
    thin SVD of a tall A also forms the (K x Nd) left factor, which POD never needs: on the
    beam's 10 001 x 11 snapshots it costs 2x as much single-threaded and 15-100x with threaded
    OpenBLAS on a busy machine. CholeskyQR2 is as accurate as Householder QR for
    cond(A) < ~1e7 (checked below on the factor's diagonal, with a margin).
    """
    K, Nd = A.shape
    if K < 2 * Nd:
        return None
    try:
        R = scipy.linalg.cholesky(A.T @ A, check_finite=False)
        d = np.abs(np.diag(R))
        if not d.min() > 1e-7 * d.max():
            return None
        Q = scipy.linalg.solve_triangular(R, A.T, trans="T", check_finite=False).T
        R2 = scipy.linalg.cholesky(Q.T @ Q, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    return R2 @ R


def decompose(Y: np.ndarray, mu: np.ndarray, method: str = "svd"):
    """(lambda (Nd,), W (Nd, Nd), rank) of C = Y^T diag(mu) Y: all Nd modes, descending,
    unsigned. ``svd`` works on diag(sqrt(mu)) Y (the default: eigh on C squares the condition
    number); ``eigh`` on C."""
    K, Nd = Y.shape
    Yw = np.sqrt(mu)[:, None] * Y
    if method == "svd":
        R = _triangular_factor(Yw)
        _, s, Vt = scipy.linalg.svd(Yw if R is None else R, full_matrices=False,
                                    check_finite=False)
        lam = s * s
        W = Vt.T
        if W.shape[1] < Nd:
            # fewer snapshots than outputs: complete the basis with the null space (lambda = 0)
            W = np.column_stack([W, scipy.linalg.null_space(Vt)])
            lam = np.concatenate([lam, np.zeros(Nd - len(lam))])
    elif method == "eigh":
        lam, W = scipy.linalg.eigh(Yw.T @ Yw, check_finite=False)
        lam, W = lam[::-1].copy(), W[:, ::-1].copy()
        lam = np.maximum(lam, 0.0)
    else:
        raise InputError(f"POD method must be 'svd' or 'eigh', got {method!r}")
    s = np.sqrt(lam)
    tol = s[0] * max(K, Nd) * np.finfo(float).eps if s[0] > 0 else 0.0
    rank = int(np.sum(s > tol))
    return lam, W, rank


def pod(source, outputs: Sequence[str] | None = None, *, t=None, quadrature="left",
        center: bool = False, method: str = "svd") -> PODResult:
    """Snapshot POD of ``outputs`` of a Trajectory, Measurement(s), mapping or array.

    ``quadrature``: the weights mu_k of the time integral (``"left"``, the default of every
    symdae cost, ``"trapezoid"``, ``"sum"`` or an array); ``center``: subtract the
    mu-weighted mean of each output first (off by default: the raw-snapshot POD of the
    paper, whose POM 1 then carries the dominant motion); ``method``: ``"svd"`` or ``"eigh"``.
    """
    t_s, names, Y = snapshots(source, outputs, t)
    mu = quadrature_weights(t_s, quadrature)
    return pod_of_snapshots(t_s, names, Y, mu, center, method)


def pod_of_snapshots(t, names, Y, mu, center, method) -> PODResult:
    mean = None
    if center:
        mean = mu @ Y / np.sum(mu)
        Y = Y - mean
    lam, W, rank = decompose(Y, mu, method)
    total = float(np.sum(lam))
    if not total > 0.0:
        raise DataError(f"the outputs {names} carry no energy (every weighted sample is zero): "
                        "no POD modes")
    W = fix_signs(W)
    return PODResult(t=t, outputs=tuple(names), weights=mu, eigenvalues=lam,
                     ratios=lam / total, modes=W, coefficients=Y @ W, mean=mean, rank=rank)


def check_modes(result: PODResult, modes: Sequence[int], what: str = "the data") -> None:
    """Raise PODModeError naming the first requested mode that ``result`` cannot provide."""
    n_snap = int(np.count_nonzero(result.weights))
    for i in modes:
        _index(i, result.n_modes)
        if i > n_snap:
            raise PODModeError(f"POD mode {i} of {what}: only {n_snap} snapshots carry weight, "
                               f"so at most {n_snap} modes exist")
        if i > result.rank:
            raise PODModeError(f"POD mode {i} of {what} lies beyond the rank {result.rank} of "
                               f"the snapshots (lambda_{i} = {result.eigenvalues[i - 1]:.3e} is "
                               f"round-off next to lambda_1 = {result.eigenvalues[0]:.3e})")


def mac(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Modal assurance criterion ``|a_i^T b_j|^2 / (|a_i|^2 |b_j|^2)`` of the columns of a and b."""
    a = np.atleast_2d(np.asarray(a, dtype=float).T).T
    b = np.atleast_2d(np.asarray(b, dtype=float).T).T
    num = (a.T @ b) ** 2
    return num / np.outer(np.sum(a * a, axis=0), np.sum(b * b, axis=0))
