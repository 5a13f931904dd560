"""Costs on proper orthogonal modes (POD paper, eq. 3): fit the coefficient of single POMs.

J = sum_{i in modes} rho_i J_i,   J_i = 1/2 sum_k mu_k (a_i(t_k) - abar_i(t_k))^2,

with abar_i = ubar^T wbar_i from the POD of the measured outputs ubar (:mod:`symdae.analysis.pod`)
and a_i = u^T w_i from the simulated outputs u. Two bases (spec pod.md, section 3):

* ``basis="measured"`` (default): w_i = wbar_i, fixed. J is a least-squares fit of one
  projected signal; dJ/du_k = mu_k e_k wbar_i with e = a_i - abar_i.
* ``basis="simulated"`` (eq. 2 of the paper, literally): w_i is the i-th POM of the current
  simulation (sign-aligned with wbar_i), so it depends on p. The exact gradient goes through
  the symmetric eigenproblem C w_i = lambda_i w_i, C = Y^T diag(mu) Y:
      g = Y^T (mu e),  z = sum_{l != i} w_l (w_l^T g) / (lambda_i - lambda_l),
      dJ/du_k = mu_k [(e_k + z^T u_k) w_i + a_i(t_k) z].
  It needs lambda_i simple: a repeated eigenvalue raises, a close one warns (the derivative
  grows like 1 / gap).

With ``center=True`` each side subtracts its own mu-weighted mean first; the gradient with
respect to the centred samples G_k becomes G_k - mu_k / sum(mu) sum_l G_l.
"""
from __future__ import annotations

import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..analysis.pod import (
    DEGENERATE_GAP,
    GAP_WARNING,
    PODModeError,
    PODResult,
    PODWarning,
    check_modes,
    decompose,
    fix_signs,
    pod_of_snapshots,
    snapshots,
)
from ..analysis.quadrature import quadrature_weights
from ..data.measurement import GridSamples, Measurement
from ..errors import DataError, InputError
from .base import Cost

__all__ = ["PODCost", "PODCostRecord", "BASES", "MATCHES"]

BASES = ("measured", "simulated")
MATCHES = ("index", "mac")
MIN_ALIGNMENT = 0.5     # |w_i^T wbar_i| below this: the simulated mode is not the data's


@dataclass(frozen=True)
class PODCostRecord:
    """What the last evaluation of a :class:`PODCost` saw (for reports and plots).

    ``modes``: the data's POMs fitted; ``matched``: the simulated POMs used for them (the same
    numbers for the measured basis); ``costs``: unweighted J_i; ``coefficients`` and
    ``data_coefficients``: (K, len(modes)) a_i and abar_i; ``alignment``: |w_i^T wbar_i|;
    ``model_pod``: the POD of the simulation (simulated basis only); ``data_pod``.
    """

    modes: tuple
    matched: tuple
    costs: tuple
    coefficients: np.ndarray
    data_coefficients: np.ndarray
    alignment: tuple
    model_pod: PODResult | None
    data_pod: PODResult


def _modes(mode) -> list[int]:
    modes = [mode] if isinstance(mode, numbers.Integral) and not isinstance(mode, bool) \
        else list(mode)
    if not modes:
        raise InputError("PODCost: no modes given")
    for i in modes:
        if isinstance(i, bool) or not isinstance(i, numbers.Integral) or i < 1:
            raise InputError(f"PODCost: mode numbers are whole numbers from 1 (POM 1 has the "
                             f"largest energy), got {i!r}")
    if len(set(modes)) != len(modes):
        raise InputError(f"PODCost: mode listed twice in {modes}")
    return [int(i) for i in modes]


def _weights(weights, modes) -> np.ndarray:
    if weights is None:
        rho = np.ones(len(modes))
    elif isinstance(weights, Mapping):
        unknown = [k for k in weights if k not in modes]
        if unknown:
            raise InputError(f"PODCost: weights given for mode(s) {unknown}, which are not "
                             f"fitted ({modes})")
        rho = np.array([float(weights.get(i, 1.0)) for i in modes])
    else:
        rho = np.asarray(weights, dtype=float).ravel()
        if rho.shape != (len(modes),):
            raise InputError(f"PODCost: {rho.size} weights for {len(modes)} modes")
    bad = [i for i, r in zip(modes, rho) if not (np.isfinite(r) and r >= 0)]
    if bad:
        raise InputError(f"PODCost: the weight of mode {bad[0]} must be finite and >= 0")
    return rho


class PODCost(Cost):
    """J = sum_i rho_i 1/2 sum_k mu_k (a_i(t_k) - abar_i(t_k))^2 on POD mode coefficients.

    Parameters
    ----------
    data:
        A :class:`Measurement` (own sample times, aligned with the grid as
        :class:`LeastSquares` does), a list of Measurements with the same sample times, or
        ``{output: array}`` with one value per grid time.
    outputs:
        The model outputs that form the snapshots, a list (data signals of the same names) or
        ``{model output: data signal}``; default every data signal. Their order is the order
        of the entries of the modes.
    mode:
        A POM number or a list of them, from 1 (POM 1 has the largest energy), as in the
        paper.
    weights:
        rho_i per mode: ``{mode: rho}`` or a sequence; default 1.
    basis:
        ``"measured"`` (modes of the data, fixed; the default) or ``"simulated"`` (modes of
        each simulation, the paper's eq. 2, with the exact derivative of the basis).
    match:
        Simulated basis: ``"index"`` pairs data POM i with simulated POM i; ``"mac"`` with the
        simulated POM most parallel to it.
    quadrature:
        Weights mu_k (``"left"``, ``"trapezoid"``, ``"sum"``), also those of the POD.
    center:
        Subtract each side's mu-weighted mean before the POD (default: raw snapshots).
    normalise:
        Divide J_i by the data's modal energy lambdabar_i = sum_k mu_k abar_i^2, so that
        J_i is the relative misfit of mode i (weak modes then weigh as much as strong ones,
        and an optimiser sees J ~ 1 instead of ~1e-18). Default off: the paper's J_i.
    align, method:
        Alignment of a Measurement with the grid; POD by ``"svd"`` or ``"eigh"``.

    After each evaluation ``last`` holds a :class:`PODCostRecord`.
    """

    def __init__(self, data, outputs=None, mode=1, weights=None, basis: str = "measured",
                 match: str = "index", quadrature="left", center: bool = False,
                 align: str = "auto", method: str = "svd", normalise: bool = False):
        if basis not in BASES:
            raise InputError(f"PODCost: basis must be one of {BASES}, got {basis!r}")
        if match not in MATCHES:
            raise InputError(f"PODCost: match must be one of {MATCHES}, got {match!r}")
        if match == "mac" and basis == "measured":
            raise InputError("PODCost: match='mac' pairs simulated modes with the data's; it "
                             "needs basis='simulated'")
        self.data = data
        if outputs is None:
            names = list(data.values) if isinstance(data, Measurement) else \
                [n for m in data for n in m.values] if isinstance(data, (list, tuple)) \
                else list(data)
            self.outputs = {n: n for n in names}
        elif isinstance(outputs, Mapping):
            self.outputs = dict(outputs)
        else:
            self.outputs = {n: n for n in outputs}
        if len(self.outputs) < 1:
            raise InputError("PODCost: no outputs")
        self.modes = _modes(mode)
        too_high = [i for i in self.modes if i > len(self.outputs)]
        if too_high:
            raise PODModeError(f"PODCost: POD mode {too_high[0]} does not exist: "
                               f"{len(self.outputs)} outputs give {len(self.outputs)} modes")
        self.rho = _weights(weights, self.modes)
        self.basis, self.match, self.quadrature = basis, match, quadrature
        self.center, self.align, self.method = bool(center), align, method
        self.normalise = bool(normalise)
        self._cache: tuple | None = None
        self.last: PODCostRecord | None = None

    # ------------------------------------------------------------------ data side
    def _signal_source(self):
        if isinstance(self.data, (Measurement, list, tuple)):
            items = [self.data] if isinstance(self.data, Measurement) else list(self.data)
            t, names, Y = snapshots(items, list(self.outputs.values()))
            return Measurement(t, dict(zip(names, Y.T)), source=items[0].source)
        return self.data

    def data_pod(self, t_grid: np.ndarray):
        """(where the data samples lie on the grid, POD of the data) for a grid (cached)."""
        key = (float(t_grid[0]), float(t_grid[-1]), len(t_grid))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        source = self._signal_source()
        signals = list(self.outputs.values())
        if isinstance(source, Measurement):
            # one sample-time set for all signals: a Measurement's signals share their times
            aligned = [source.align(t_grid, s, self.align) for s in signals]
            where, cols = aligned[0], [a.values for a in aligned]
        else:
            for s in signals:
                if s not in source:
                    raise DataError(f"no data for {s!r}; data has {list(source)}")
                shape = np.shape(source[s])
                if shape != t_grid.shape:
                    raise DataError(f"the data for {s!r} have shape {shape}, the simulation "
                                    f"grid {len(t_grid)} samples: give one value per time "
                                    "step or a Measurement")
            _, _, Yd = snapshots({s: source[s] for s in signals}, signals, t_grid)
            cols = list(Yd.T)
            where = GridSamples(np.asarray(t_grid, dtype=float), cols[0], slice(None))
        Ybar = np.column_stack(cols)
        t = where.t
        mu = quadrature_weights(t, self.quadrature)
        result = pod_of_snapshots(t, signals, Ybar, mu, self.center, self.method)
        check_modes(result, self.modes, "the data")
        self._cache = (key, (where, result))
        return where, result

    # ------------------------------------------------------------------ cost
    def memory(self, sizes, scenario) -> tuple[int, int]:
        """Per grid point, the larger of the first evaluation's POD of the data (its signals,
        their aligned copies, the snapshot matrix, its weighted copy and the solve's output)
        and an evaluation: the data's coefficients kept, the snapshots, the gradient and one
        outer product (the simulated basis: the decomposition's coefficients and two outer
        products), dJ/dS and each mode's coefficients and error; centring adds a copy."""
        p, k = len(self.outputs), len(self.modes)
        data = 6 * p + 2
        evaluation = p + 2 + sizes.n_s + (3 * p + 3 * k if self.basis == "measured"
                                          else 5 * p + 4 * k)
        return 8 * (max(data, evaluation) + (p if self.center else 0)), 0

    def evaluate(self, system, traj):
        """J of the chosen modes' coefficients and dJ/dS (through the eigenproblem with the
        simulated basis)."""
        cols = [self._column(system, o) for o in self.outputs]
        where, ref = self.data_pod(traj.t)
        Y = np.column_stack([where.at(traj.outputs[o]) for o in self.outputs])
        mu = ref.weights
        mean = mu @ Y / np.sum(mu) if self.center else None
        if mean is not None:
            Y = Y - mean
        rho = self.rho
        if self.normalise:
            rho = rho / ref.eigenvalues[[i - 1 for i in self.modes]]
        if self.basis == "measured":
            G, J, rec = self._measured(Y, mu, ref, rho)
        else:
            G, J, rec = self._simulated(Y, mu, ref, where.t, mean, rho)
        if self.center:
            G -= np.outer(mu / np.sum(mu), G.sum(axis=0))
        dS = np.zeros((len(traj.t), system.sizes.n_s))
        for j, col in enumerate(cols):
            where.scatter(G[:, j], dS[:, col])
        self.last = rec
        return J, dS

    def _measured(self, Y, mu, ref, rho_all):
        G = np.zeros_like(Y)
        J, costs, A = 0.0, [], []
        for i, rho in zip(self.modes, rho_all):
            w = ref.mode(i)
            a = Y @ w
            e = a - ref.coefficient(i)
            Ji = 0.5 * float(mu @ (e * e))
            J += rho * Ji
            G += rho * np.outer(mu * e, w)
            costs.append(Ji)
            A.append(a)
        rec = PODCostRecord(tuple(self.modes), tuple(self.modes), tuple(costs),
                            np.column_stack(A), ref.coefficients[:, [i - 1 for i in self.modes]],
                            (1.0,) * len(self.modes), None, ref)
        return G, J, rec

    def _simulated(self, Y, mu, ref, t, mean, rho_all):
        lam, W, rank = decompose(Y, mu, self.method)
        if not np.sum(lam) > 0:
            raise DataError(f"the simulated outputs {list(self.outputs)} carry no energy: no "
                            "POD modes to fit")
        G = np.zeros_like(Y)
        J, costs, A, matched, dots = 0.0, [], [], [], []
        for i, rho in zip(self.modes, rho_all):
            wbar = ref.mode(i)
            k = self._partner(i, W, wbar, rank)
            if k in matched:
                raise PODModeError(f"POD modes {self.modes[matched.index(k)]} and {i} of the "
                                   f"data both match simulated POM {k + 1} (match='mac'): fit "
                                   "them in separate costs")
            dot = float(W[:, k] @ wbar)
            if abs(dot) < MIN_ALIGNMENT:
                raise PODModeError(
                    f"POD mode {i}: the simulated POM {k + 1} does not correspond to the "
                    f"data's (|w^T wbar| = {abs(dot):.3f} < {MIN_ALIGNMENT}); the modes have "
                    "changed order or shape (try match='mac', or a parameter closer to the "
                    "data)")
            self._check_gap(i, k, lam)
            w = W[:, k] * np.sign(dot)
            a = Y @ w
            e = a - ref.coefficient(i)
            g = Y.T @ (mu * e)
            others = np.arange(len(lam)) != k
            z = W[:, others] @ ((W[:, others].T @ g) / (lam[k] - lam[others]))
            Ji = 0.5 * float(mu @ (e * e))
            J += rho * Ji
            G += rho * (np.outer(mu * (e + Y @ z), w) + np.outer(mu * a, z))
            costs.append(Ji)
            A.append(a)
            matched.append(k)
            dots.append(abs(dot))
        Wf = fix_signs(W)
        model = PODResult(t=t, outputs=ref.outputs, weights=mu, eigenvalues=lam,
                          ratios=lam / np.sum(lam), modes=Wf, coefficients=Y @ Wf,
                          mean=mean, rank=rank)
        rec = PODCostRecord(tuple(self.modes), tuple(k + 1 for k in matched), tuple(costs),
                            np.column_stack(A), ref.coefficients[:, [i - 1 for i in self.modes]],
                            tuple(dots), model, ref)
        return G, J, rec

    def _partner(self, i: int, W, wbar, rank: int) -> int:
        """0-based simulated mode paired with data POM i."""
        if self.match == "index":
            k = i - 1
        else:
            k = int(np.argmax(np.abs(W[:, :rank].T @ wbar)))
        if k >= rank:
            raise PODModeError(f"POD mode {i}: the simulated outputs have rank {rank}, so "
                               f"their POM {k + 1} is round-off, not a mode")
        return k

    @staticmethod
    def _check_gap(i: int, k: int, lam: np.ndarray) -> None:
        others = np.delete(lam, k)
        if others.size and np.min(np.abs(lam[k] - others)) < DEGENERATE_GAP * lam[0]:
            raise PODModeError(
                f"POD mode {i}: the simulated POM {k + 1} has a repeated eigenvalue "
                f"(lambda = {lam[k]:.6e}); its direction is not defined and has no derivative. "
                "Use basis='measured' or other outputs")
        near = [lam[j] for j in (k - 1, k + 1) if 0 <= j < len(lam)]
        gap = min(abs(lam[k] - x) / max(lam[k], x) for x in near) if near else 1.0
        if gap < GAP_WARNING:
            warnings.warn(f"POD mode {i}: the simulated POM {k + 1} is nearly degenerate "
                          f"(relative eigenvalue gap {gap:.1e} < {GAP_WARNING:g}); its basis "
                          "derivative grows like 1 / gap", PODWarning, stacklevel=3)

