"""Measured data: sample times and named signals, from arrays or a CSV file, and their
alignment with a simulation's time grid."""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np

from ..atomic import write_columns
from ..errors import DataError, InputError

__all__ = ["Measurement", "GridSamples", "ALIGN_MODES"]

ALIGN_MODES = ("auto", "samples", "interpolate", "match")
_ON_GRID = 1e-9      # a sample within this fraction of a step of a grid time lies on it


@dataclass(frozen=True)
class GridSamples:
    """The data samples of one signal and where they lie on a simulation grid.

    The model's value at sample j is ``(1 - theta_j) s[index_j] + theta_j s[index_j + 1]``
    (linear interpolation between the grid values around t_j); ``theta`` is None when every
    sample lies on a grid time (``index`` then picks them: a slice when every grid time has
    one). :meth:`at` applies this map to a grid array, :meth:`scatter` its transpose (the
    derivative of a cost with respect to the grid values), so costs, gradients, Jacobians and
    statistics all count the measured samples, however they lie on the grid.
    """

    t: np.ndarray
    values: np.ndarray
    index: np.ndarray | slice
    theta: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.t)

    def at(self, grid_values: np.ndarray) -> np.ndarray:
        """The model's values at the sample times from its values on the grid (first axis)."""
        x = np.asarray(grid_values)
        if self.theta is None:
            return x[self.index]
        th = self.theta.reshape((-1,) + (1,) * (x.ndim - 1))
        i = cast(np.ndarray, self.index)     # between grid points: an index array
        return (1.0 - th) * x[i] + th * x[i + 1]

    def scatter(self, g: np.ndarray, out: np.ndarray) -> None:
        """out += the transpose of :meth:`at` applied to ``g`` (one value per sample)."""
        if self.theta is None:
            out[self.index] += g            # a slice or distinct grid indices
            return
        i = cast(np.ndarray, self.index)     # between grid points: an index array
        np.add.at(out, i, (1.0 - self.theta) * g)
        np.add.at(out, i + 1, self.theta * g)

    @property
    def span(self) -> tuple[float, float]:
        """(first, last) sample time."""
        return float(self.t[0]), float(self.t[-1])


def _as_times(t, source: str) -> np.ndarray:
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size < 2:
        raise DataError(f"{source}: sample times must be a 1-D array of at least 2 values, "
                        f"got shape {t.shape}")
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        raise DataError(f"{source}: sample time {bad[0]} is not finite ({t[bad[0]]})")
    step = np.diff(t)
    bad = np.flatnonzero(step <= 0)
    if bad.size:
        k = bad[0]
        raise DataError(f"{source}: sample times are not strictly increasing at index {k + 1}"
                        f" (t = {t[k]!r} then {t[k + 1]!r})")
    return t


@dataclass
class Measurement:
    """Measured signals ``values[name]`` sampled at times ``t`` (strictly increasing).

    Build with :meth:`from_arrays` or :meth:`from_csv`; both check lengths, NaNs and ordering
    and name the offending column, row or time.
    """

    t: np.ndarray
    values: dict
    source: str = "arrays"
    _checked: bool = field(default=False, repr=False)

    def __post_init__(self):
        self.t = _as_times(self.t, self.source)
        vals = {}
        for name, x in dict(self.values).items():
            x = np.asarray(x, dtype=float)
            if x.shape != self.t.shape:
                raise DataError(f"{self.source}: signal {name!r} has {x.size} samples "
                                f"(shape {x.shape}), the times have {self.t.size}")
            bad = np.flatnonzero(~np.isfinite(x))
            if bad.size:
                raise DataError(f"{self.source}: signal {name!r} is NaN or infinite at sample "
                                f"{bad[0]} (t = {self.t[bad[0]]:g}); remove or fill it")
            vals[name] = x
        if not vals:
            raise DataError(f"{self.source}: no signals")
        self.values = vals

    @classmethod
    def from_arrays(cls, t, **values) -> Measurement:
        """A measurement from the sample times ``t`` and one array per signal (``name=values``)."""
        return cls(t, values)

    @classmethod
    def from_trajectory(cls, traj, outputs=None) -> Measurement:
        """Synthetic data: the outputs of a simulated trajectory."""
        names = list(traj.outputs) if outputs is None else list(outputs)
        return cls(traj.t.copy(), {n: traj.outputs[n].copy() for n in names},
                   source="simulation")

    @classmethod
    def from_csv(cls, path, time_column: str = "t", columns=None) -> Measurement:
        """Read a CSV file with a header row; ``time_column`` holds the sample times."""
        path = Path(path)
        if not path.is_file():
            raise DataError(f"data file {str(path)!r} does not exist")
        # utf-8-sig: spreadsheets write a byte order mark (symdae.data.readers reads other dialects)
        with open(path, newline="", encoding="utf-8-sig") as fh:
            # keep each row's line number in the file for the error messages
            rows = [(k, r) for k, r in enumerate(csv.reader(fh), start=1)
                    if r and not (len(r) == 1 and not r[0].strip())]
        if len(rows) < 3:
            raise DataError(f"{path}: needs a header row and at least two data rows")
        header = [h.strip() for h in rows[0][1]]
        dup = sorted({h for h in header if header.count(h) > 1})
        if dup:
            raise DataError(f"{path}: column name(s) {dup} appear more than once in the header")
        if time_column not in header:
            raise DataError(f"{path}: no time column {time_column!r}; columns are {header}")
        wanted = [h for h in header if h != time_column] if columns is None else list(columns)
        for name in wanted:
            if name not in header:
                raise DataError(f"{path}: no column {name!r}; columns are {header}")
        data = {}
        for name in [time_column] + wanted:
            j = header.index(name)
            col = []
            for i, r in rows[1:]:
                if len(r) != len(header):
                    raise DataError(f"{path}, line {i}: {len(r)} fields, the header has "
                                    f"{len(header)}")
                try:
                    col.append(float(r[j]))
                except ValueError:
                    raise DataError(f"{path}, line {i}, column {name!r}: {r[j]!r} is not a "
                                    "number") from None
            data[name] = np.array(col)
        t = data.pop(time_column)
        return cls(t, data, source=str(path))

    def to_csv(self, path, time_column: str = "t") -> Path:
        """Write the samples as CSV, one column per signal after the time column; returns the
        path."""
        path = Path(path)
        return write_columns(path, [time_column] + list(self.values),
                             [self.t] + list(self.values.values()))

    # ------------------------------------------------------------------ alignment
    def align(self, t_grid: np.ndarray, name: str, mode: str = "auto") -> GridSamples:
        """Where the samples of signal ``name`` lie on a simulation grid (a uniform ``t_grid``).

        * ``samples``: the cost compares at every sample time inside the grid's span; the
          model's outputs are interpolated linearly to those times (error O(h^2), the
          integrator's order). Samples outside the span are left out: data may start after
          t0 and end before t_end (the cost covers the overlap), or extend beyond them.
        * ``match``: every sample time must be a grid time (within 1e-9 h); the cost uses
          those grid points (samples outside the span are left out, as above).
        * ``interpolate``: the data are interpolated linearly onto every grid time; the grid
          must lie inside the sampled span. The interpolated values are correlated: a noise
          model that counts them as independent samples overstates the information (use
          ``samples`` for statistics).
        * ``auto``: ``match`` if the sample times are grid times, else ``samples``.

        The quadrature step of each sample is its own spacing, so the cost approximates the
        same time integral however the data are sampled.
        """
        if mode not in ALIGN_MODES:
            raise InputError(f"align must be one of {ALIGN_MODES}, got {mode!r}")
        if name not in self.values:
            raise DataError(f"{self.source}: no signal {name!r}; signals are "
                            f"{list(self.values)}")
        t_grid = np.asarray(t_grid, dtype=float)
        x = self.values[name]
        n = len(t_grid)
        h = float(t_grid[1] - t_grid[0])
        pos = (self.t - t_grid[0]) / h
        idx = np.rint(pos).astype(np.int64)
        on_grid = np.abs(pos - idx) <= _ON_GRID * np.maximum(1.0, np.abs(pos))
        if mode == "interpolate":
            lo, hi = t_grid[0], t_grid[-1]
            tol = _ON_GRID * h
            if lo < self.t[0] - tol or hi > self.t[-1] + tol:
                raise DataError(f"{self.source}: the simulated span [{lo:g}, {hi:g}] is not "
                                f"inside the sampled span [{self.t[0]:g}, {self.t[-1]:g}] of "
                                f"{name!r}; shorten t_end, supply longer data or align "
                                "'samples'")
            return GridSamples(t_grid.copy(), np.interp(t_grid, self.t, x), slice(None))
        if mode == "match" and not np.all(on_grid):
            k = int(np.flatnonzero(~on_grid)[0])
            raise DataError(f"{self.source}: sample time {self.t[k]!r} of {name!r} is not on "
                            f"the simulation grid (t0 = {t_grid[0]:g}, h = {h:g})")
        inside = (pos >= -_ON_GRID) & (pos <= n - 1 + _ON_GRID * max(1.0, n - 1))
        if not np.any(inside):
            raise DataError(f"{self.source}: no sample of {name!r} lies in the simulated span "
                            f"[{t_grid[0]:g}, {t_grid[-1]:g}] (samples cover "
                            f"[{self.t[0]:g}, {self.t[-1]:g}]); correct t0 / t_end or the "
                            "time offset")
        t, values = self.t[inside], x[inside]
        if np.all(on_grid[inside]):
            i = idx[inside]
            if len(i) == n and i[0] == 0:
                return GridSamples(t.copy(), values.copy(), slice(None))   # every grid time
            return GridSamples(t.copy(), values.copy(), i)
        # the left grid node and the fraction of the step; a sample on the last grid time
        # takes the last interval with theta = 1
        p = np.clip(pos[inside], 0.0, n - 1)
        left = np.minimum(np.floor(p).astype(np.int64), n - 2)
        return GridSamples(t.copy(), values.copy(), left, p - left)
