"""The linearised model about a state of rest, and its natural frequencies and mode shapes.

M dq'' + C dq' + K dq = 0 with M the mass matrix, K = d(C_q^T lam - Q)/dq and
C = -dQ/dq' at (q, v = 0, a = 0, lam), taken from the model's generated kernels; constraints
are eliminated with a basis of the null space of C_q. Used to compare the frequency content of
POD modal coordinates with the structure's natural frequencies.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import ModelError
from ..model.kernels import pack_weights, split

__all__ = ["LinearModel", "NaturalModes", "linearise", "natural_modes"]


@dataclass(frozen=True)
class LinearModel:
    """M, C, K (n x n) about a state of rest, the constraint Jacobian C_q (m x n), and the
    output Jacobian ds/dq (n_s x n) for mode shapes at the outputs."""

    M: np.ndarray
    C: np.ndarray
    K: np.ndarray
    Cq: np.ndarray
    output_jacobian: np.ndarray
    output_names: tuple


@dataclass(frozen=True)
class NaturalModes:
    """Natural frequencies (ascending) of a linearised model.

    ``frequencies``: undamped, from det(K - omega^2 M) = 0 [Hz]; ``shapes``: their
    M-normalised coordinate vectors (n, n_modes); ``damped_frequencies`` [Hz] and
    ``damping_ratios`` of the underdamped eigenvalues of the first-order state matrix,
    ascending; ``output_shapes``: shapes at the outputs, ds/dq @ shapes.
    """

    frequencies: np.ndarray
    shapes: np.ndarray
    damped_frequencies: np.ndarray
    damping_ratios: np.ndarray
    output_shapes: np.ndarray
    output_names: tuple

    def at_outputs(self, names) -> np.ndarray:
        """Mode shapes restricted to the outputs ``names`` (len(names), n_modes)."""
        rows = []
        for name in names:
            if name not in self.output_names:
                raise ModelError(f"no output {name!r}; outputs: {list(self.output_names)}")
            rows.append(self.output_names.index(name))
        return self.output_shapes[rows]


def linearise(system, params: Mapping | None = None, q=None, lam=None, t: float = 0.0,
              u=None) -> LinearModel:
    """M, C, K of ``system`` about (q, v = 0, a = 0, lam) (default all zero) at time t."""
    sz = system.sizes
    n, m = sz.n, sz.m
    q = np.zeros(n) if q is None else np.asarray(q, dtype=float)
    lam = np.zeros(m) if lam is None else np.asarray(lam, dtype=float)
    zero = np.zeros(n)
    args = (t, q, zero, zero, lam)

    def kernel(name, **weights):
        w = pack_weights(name, sz, **weights) if weights else None
        return split(name, system.evaluate(name, *args, params=params, u=u, w=w), sz)

    # the Newton matrix with (c_m, c_q, c_v) = (1, 0, 0) is [[M, C_q^T], [C_q, 0]]
    M = kernel("newton", c_m=1.0)["K"][:n, :n]
    jac = kernel("jacobians")
    # ds/dq: output_jvp along each coordinate direction
    Sq = np.column_stack([kernel("output_jvp", dx=np.eye(sz.nx)[j])["ds"] for j in range(n)]) \
        if n else np.zeros((sz.n_s, 0))
    return LinearModel(M=M, C=jac["GV"].copy(), K=jac["JG"].copy(), Cq=jac["Cq"].copy(),
                       output_jacobian=Sq, output_names=tuple(system.model.output_names))


def natural_modes(system, params: Mapping | None = None, q=None, lam=None,
                  t: float = 0.0) -> NaturalModes:
    """Natural frequencies and mode shapes of ``system`` linearised about rest."""
    lin = linearise(system, params, q, lam, t)
    T = scipy.linalg.null_space(lin.Cq) if lin.Cq.shape[0] else np.eye(lin.M.shape[0])
    M, K, C = (T.T @ X @ T for X in (lin.M, lin.K, lin.C))
    try:
        w2, V = scipy.linalg.eigh(K, M)
    except (np.linalg.LinAlgError, ValueError) as exc:
        raise ModelError(f"the linearised mass matrix is not positive definite on the "
                         f"constraint manifold, so there are no natural modes: {exc}") from None
    shapes = T @ V
    freqs = np.sqrt(np.maximum(w2, 0.0)) / (2 * np.pi)
    r = M.shape[0]
    A = np.block([[np.zeros((r, r)), np.eye(r)],
                  [-np.linalg.solve(M, K), -np.linalg.solve(M, C)]])
    s = scipy.linalg.eigvals(A)
    s = s[s.imag > 0]
    s = s[np.argsort(s.imag)]
    return NaturalModes(frequencies=freqs, shapes=shapes,
                        damped_frequencies=s.imag / (2 * np.pi),
                        damping_ratios=-s.real / np.abs(s),
                        output_shapes=lin.output_jacobian @ shapes,
                        output_names=lin.output_names)
