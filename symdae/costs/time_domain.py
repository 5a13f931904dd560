"""Time-domain costs: least squares on outputs against data (the paper's eq. 4) and integrals
of outputs."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..analysis.quadrature import quadrature_weights
from ..data.measurement import Measurement
from ..errors import DataError, InputError, UnknownNameError
from .base import Cost

__all__ = ["LeastSquares", "OutputIntegral"]


class LeastSquares(Cost):
    """Weighted least squares of eq. (4): J = 1/2 sum_i eta_i sum_k w_k (s_ik - sbar_ik)^2.

    Parameters
    ----------
    data:
        A :class:`Measurement` (own sample times; aligned with the grid, see ``align``) or
        ``{output: array}`` with one value per grid time t0..t_end.
    outputs:
        Which model outputs to fit: a list (signals of the same name) or
        ``{model output: data signal}``; default: every data signal that is a model output.
    weights:
        ``{output: w_k}``; default 1.
    quadrature:
        ``"left"`` (eta_i = h, i = 0..N-1, the paper's choice), ``"trapezoid"``, ``"sum"``.
    align:
        ``"auto"``, ``"match"`` (samples on grid points) or ``"interpolate"``.
    """

    def __init__(self, data, outputs=None, weights: Mapping | None = None,
                 quadrature="left", align: str = "auto"):
        self.data = data
        if outputs is None:
            names = list(data.values) if isinstance(data, Measurement) else list(data)
            self.outputs = {n: n for n in names}
        elif isinstance(outputs, Mapping):
            self.outputs = dict(outputs)
        else:
            self.outputs = {n: n for n in outputs}
        self.weights = dict(weights or {})
        for name, w in self.weights.items():
            if name not in self.outputs:
                raise UnknownNameError(f"weight given for {name!r}, which is not fitted "
                                       f"({list(self.outputs)})")
            if not (np.isfinite(w) and w >= 0):
                raise InputError(f"weight of {name!r} must be finite and >= 0, got {w!r}")
        self.quadrature = quadrature
        self.align = align

    def reference(self, traj, output: str):
        """(grid indices, measured values there) for one fitted output."""
        signal = self.outputs[output]
        if isinstance(self.data, Measurement):
            return self.data.align(traj.t, signal, self.align)
        if signal not in self.data:
            raise DataError(f"no data for {signal!r}; data has {list(self.data)}")
        ref = np.asarray(self.data[signal], dtype=float)
        if ref.shape != traj.t.shape:
            raise DataError(f"data for {signal!r} has shape {ref.shape}, the simulation grid "
                            f"{traj.t.shape}: give one value per time step or a Measurement")
        bad = np.flatnonzero(~np.isfinite(ref))
        if bad.size:
            raise DataError(f"data for {signal!r} is NaN or infinite at sample {bad[0]}")
        return slice(None), ref

    def evaluate(self, system, traj):
        dS = np.zeros((len(traj.t), system.sizes.n_s))
        J = 0.0
        for output in self.outputs:
            col = self._column(system, output)
            idx, ref = self.reference(traj, output)
            eta = quadrature_weights(traj.t[idx], self.quadrature)
            w = float(self.weights.get(output, 1.0))
            r = traj.outputs[output][idx] - ref
            # an elementwise sum, not np.dot: a BLAS dot of >= 10 001 samples wakes OpenBLAS's
            # thread pool, which costs more than the sum (symdae/threads.py)
            J += 0.5 * w * float(np.sum(eta * r * r))
            dS[idx, col] += w * eta * r       # a slice or distinct grid indices
        return J, dS


class OutputIntegral(Cost):
    """J = weight * integral of output dt, by the trapezoidal rule (or another quadrature)."""

    def __init__(self, output: str, weight: float = 1.0, quadrature="trapezoid"):
        self.output, self.weight, self.quadrature = output, float(weight), quadrature

    def evaluate(self, system, traj):
        col = self._column(system, self.output)
        eta = self.weight * quadrature_weights(traj.t, self.quadrature)
        dS = np.zeros((len(traj.t), system.sizes.n_s))
        dS[:, col] = eta
        return float(np.sum(eta * traj.outputs[self.output])), dS
