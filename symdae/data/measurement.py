"""Measured data: sample times and named signals, from arrays or a CSV file, and their
alignment with a simulation's time grid."""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import write_columns
from ..errors import DataError, InputError

__all__ = ["Measurement", "ALIGN_MODES"]

ALIGN_MODES = ("auto", "interpolate", "match")


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
    def from_arrays(cls, t, **values) -> "Measurement":
        return cls(t, values)

    @classmethod
    def from_trajectory(cls, traj, outputs=None) -> "Measurement":
        """Synthetic data: the outputs of a simulated trajectory."""
        names = list(traj.outputs) if outputs is None else list(outputs)
        return cls(traj.t.copy(), {n: traj.outputs[n].copy() for n in names},
                   source="simulation")

    @classmethod
    def from_csv(cls, path, time_column: str = "t", columns=None) -> "Measurement":
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
        path = Path(path)
        return write_columns(path, [time_column] + list(self.values),
                             [self.t] + list(self.values.values()))

    # ------------------------------------------------------------------ alignment
    def align(self, t_grid: np.ndarray, name: str, mode: str = "auto"):
        """Put signal ``name`` on a simulation grid.

        Returns (indices into the grid, values there); the indices are ``slice(None)`` when
        every grid time has a sample (no fancy indexing on the hot path of a cost).

        * ``match``: every sample time must be a grid time (within 1e-9 h); the cost then
          uses only those grid points, with the sample spacing as quadrature step.
        * ``interpolate``: the signal is interpolated linearly onto every grid time; the grid
          must lie inside the sampled span.
        * ``auto``: ``match`` if the sample times are grid times, else ``interpolate``.
        """
        if mode not in ALIGN_MODES:
            raise InputError(f"align must be one of {ALIGN_MODES}, got {mode!r}")
        if name not in self.values:
            raise DataError(f"{self.source}: no signal {name!r}; signals are "
                            f"{list(self.values)}")
        x = self.values[name]
        h = float(t_grid[1] - t_grid[0])
        pos = (self.t - t_grid[0]) / h
        idx = np.rint(pos).astype(np.int64)
        on_grid = bool(np.all(np.abs(pos - idx) <= 1e-9 * np.maximum(1.0, np.abs(pos))))
        if mode == "match" or (mode == "auto" and on_grid):
            if not on_grid:
                k = int(np.argmax(np.abs(pos - idx)))
                raise DataError(f"{self.source}: sample time {self.t[k]!r} of {name!r} is not "
                                f"on the simulation grid (t0 = {t_grid[0]:g}, h = {h:g})")
            out = (idx < 0) | (idx >= len(t_grid))
            if np.any(out):
                k = int(np.flatnonzero(out)[0])
                raise DataError(f"{self.source}: sample time {self.t[k]:g} of {name!r} lies "
                                f"outside the simulated span [{t_grid[0]:g}, {t_grid[-1]:g}]")
            if len(idx) == len(t_grid) and idx[0] == 0:
                return slice(None), x.copy()      # one sample per grid time, in order
            return idx, x.copy()
        lo, hi = t_grid[0], t_grid[-1]
        tol = 1e-9 * h
        if lo < self.t[0] - tol or hi > self.t[-1] + tol:
            raise DataError(f"{self.source}: the simulated span [{lo:g}, {hi:g}] is not inside "
                            f"the sampled span [{self.t[0]:g}, {self.t[-1]:g}] of {name!r}; "
                            "shorten t_end or supply longer data")
        return slice(None), np.interp(t_grid, self.t, x)
