"""Time-domain costs: least squares on outputs against data (the paper's eq. 4) and integrals
of outputs."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..analysis.quadrature import quadrature_weights
from ..data.measurement import GridSamples, Measurement
from ..errors import DataError, InputError, UnknownNameError
from ..simulation.backends.workspace import ArrayPool
from ..simulation.reductions import least_squares
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
        How a :class:`Measurement`'s samples meet the grid (see :meth:`Measurement.align`):
        ``"auto"`` (``"match"`` for samples on grid points, else ``"samples"``: the model's
        outputs interpolated to the sample times, so the cost and its statistics count the
        measured samples), ``"match"``, ``"samples"`` or ``"interpolate"`` (the data onto
        every grid time).

    The quadrature weights eta_i are those of the sample times (for samples off the grid:
    their own spacing). The data's samples on a grid and their weights are worked out once
    per grid and kept (:meth:`compared`): an identification compares on one grid hundreds of
    times. Array data are therefore copied when the cost is made (read-only); a later
    change to the caller's arrays is not seen.
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
        if not isinstance(data, Measurement):
            # the fitted signals as read-only copies (a Measurement is one already)
            self.data = dict(data)
            for signal in set(self.outputs.values()) & set(self.data):
                ref = np.array(self.data[signal], dtype=float)
                ref.setflags(write=False)
                self.data[signal] = ref
        self._compared: dict = {}     # output -> (grid, its key, samples, weights): compared()

    def reference(self, t_grid: np.ndarray, output: str) -> GridSamples:
        """The data samples of one fitted output and where they lie on the grid ``t_grid``."""
        signal = self.outputs[output]
        if isinstance(self.data, Measurement):
            return self.data.align(t_grid, signal, self.align)
        if signal not in self.data:
            raise DataError(f"no data for {signal!r}; data has {list(self.data)}")
        ref = np.asarray(self.data[signal], dtype=float)
        if ref.shape != np.shape(t_grid):
            raise DataError(f"data for {signal!r} has shape {ref.shape}, the simulation grid "
                            f"{np.shape(t_grid)}: give one value per time step or a Measurement")
        bad = np.flatnonzero(~np.isfinite(ref))
        if bad.size:
            raise DataError(f"data for {signal!r} is NaN or infinite at sample {bad[0]}")
        return GridSamples(np.asarray(t_grid, dtype=float), ref, slice(None))

    def coverage(self, t_grid: np.ndarray) -> dict:
        """Per fitted output on the grid ``t_grid``: the samples compared (with weight > 0),
        the interval [first, last] they cover and how they meet the grid, for reports."""
        out = {}
        for output in self.outputs:
            where = self.reference(t_grid, output)
            used = self.sample_weights(where, output) > 0
            how = "grid values" if where.theta is None else "model interpolated to the samples"
            out[output] = {"samples": int(np.count_nonzero(used)),
                           "span": list(where.span), "comparison": how}
        return out

    def sample_weights(self, samples: GridSamples, output: str) -> np.ndarray:
        """w_k eta_i of each sample of one fitted output."""
        return float(self.weights.get(output, 1.0)) * \
            quadrature_weights(samples.t, self.quadrature)

    def compared(self, t_grid: np.ndarray, output: str) -> tuple[GridSamples, np.ndarray]:
        """(:meth:`reference`, :meth:`sample_weights`) of one fitted output on the grid
        ``t_grid``, kept from the last call on the same grid (the same array, or equal values)
        with the same data, weight, quadrature and alignment."""
        key = (id(self.data), self.weights.get(output, 1.0), self.quadrature, self.align)
        kept = self._compared.get(output)
        if kept is not None and kept[1] == key and (
                kept[0] is t_grid or (kept[0].shape == np.shape(t_grid)
                                      and np.array_equal(kept[0], t_grid))):
            return kept[2], kept[3]
        samples = self.reference(t_grid, output)
        weights = self.sample_weights(samples, output)
        for x in (weights, samples.values):     # shared by every call that reuses them
            x.setflags(write=False)
        grid = t_grid if isinstance(t_grid, np.ndarray) and not t_grid.flags.writeable \
            else np.array(t_grid, dtype=float)
        self._compared[output] = (grid, key, samples, weights)
        return samples, weights

    def __getstate__(self):
        # the kept comparisons and arrays stay behind (a process pool pickles the cost with
        # every call)
        state = {**self.__dict__, "_compared": {}}
        state.pop("_pool", None)
        return state

    def memory(self, sizes, scenario) -> tuple[int, int]:
        """dJ/dS, and for the output being compared its weights, model samples and residual."""
        return 8 * (sizes.n_s + 3), 0

    def _sum(self, system, traj, dS: np.ndarray | None = None) -> float:
        """J of eq. (4); with ``dS`` (N+1, n_s) also dJ/dS added into it."""
        J = 0.0
        for output in self.outputs:
            col = self._column(system, output)
            samples, weight = self.compared(traj.t, output)
            x = samples.at(traj.outputs[output])
            # samples on grid points, a slice of them: dJ/ds added in the same call (a view
            # of dS's column); otherwise scattered to the grid points around them
            on_grid = samples.theta is None and isinstance(samples.index, slice)
            g = dS[samples.index, col] if dS is not None and on_grid else None
            J += 0.5 * least_squares(x, samples.values, weight, g)
            if dS is not None and not on_grid:
                samples.scatter(weight * (x - samples.values), dS[:, col])
        return J

    def evaluate(self, system, traj):
        """J of eq. (4) over the data's samples and its derivative dJ/dS ``(N+1, n_s)``."""
        # from the cost's own pool: an identification asks for one of the same size at
        # every evaluation, and a fresh one page-faults (backends/workspace.py)
        dS = self._arrays().zeros((len(traj.t), system.sizes.n_s))
        return self._sum(system, traj, dS), dS

    def _arrays(self) -> ArrayPool:
        pool = self.__dict__.get("_pool")
        if pool is None:
            pool = self._pool = ArrayPool()
        return pool

    def value(self, system, traj) -> float:
        """J of eq. (4), the same number as :meth:`evaluate`'s, without dJ/dS."""
        return self._sum(system, traj)


class OutputIntegral(Cost):
    """J = weight * integral of output dt, by the trapezoidal rule (or another quadrature)."""

    def __init__(self, output: str, weight: float = 1.0, quadrature="trapezoid"):
        self.output, self.weight, self.quadrature = output, float(weight), quadrature

    def evaluate(self, system, traj):
        """J, the weighted quadrature of the output, and dJ/dS (the quadrature weights)."""
        col = self._column(system, self.output)
        eta = self.weight * quadrature_weights(traj.t, self.quadrature)
        dS = np.zeros((len(traj.t), system.sizes.n_s))
        dS[:, col] = eta
        return float(np.sum(eta * traj.outputs[self.output])), dS
