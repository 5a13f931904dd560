"""Memory estimates, checked before a command allocates anything.

Each estimate counts the arrays the command actually allocates per grid point (the sweep's
states, outputs and inputs, the stored factorisations and tangents where it keeps them) plus
what writing its outputs adds, and is compared with the memory available now (not the
machine's total: other processes hold some). A run that does not fit is refused at once with
one line: the estimate, the available memory and the options that shrink it.
``benchmarks/bench_memory_estimate.py`` prints estimates against measured peaks.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..atomic import CSV_CHUNK
from ..errors import InputError
from .scenario import physical_memory

__all__ = ["MemoryEstimate", "available_memory", "free_memory", "forward_bytes", "tangent_bytes",
           "csv_bytes", "MemoryLimitError", "format_bytes", "largest"]

CSV_CELL = 48              # bytes per cell of a chunk: the float, its list slot, the stacked copy


class MemoryLimitError(InputError, MemoryError):
    """A run would not fit in the available memory (refused before allocating)."""


def available_memory() -> int:
    """Bytes available to a new allocation now (Linux: MemAvailable), else the machine's."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return physical_memory()


def free_memory() -> int:
    """Bytes of memory no one uses now (the kernel's MemFree, one ``sysinfo`` call), or 0
    where the OS does not say. At most a little above :func:`available_memory` (which adds
    the reclaimable caches and subtracts the kernel's reserves), and read in about a
    microsecond where MemAvailable takes a parse of /proc/meminfo (tens of microseconds,
    4 % of an engine-mount evaluation)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 0


def format_bytes(n: float) -> str:
    """A size for a message: 23.8 GiB, 512 MiB, 1015 MiB, 3.5 KiB (three significant digits,
    whole units from 1000 up: ``.3g`` would print 1015 as 1.01e+03)."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{_digits(n / scale)} {unit}"
    return f"{_digits(n / 2**10)} KiB"


def _digits(x: float) -> str:
    text = f"{x:.3g}"
    return f"{x:.0f}" if "e" in text else text


@dataclass(frozen=True)
class MemoryEstimate:
    """``per_step`` bytes for each of ``points`` grid points plus ``fixed`` bytes."""

    what: str
    points: int
    per_step: int
    fixed: int = 0
    shrink: str = "a larger h or a shorter run"

    @property
    def total(self) -> int:
        """The estimated peak in bytes: points times bytes per step plus the fixed part."""
        return self.points * self.per_step + self.fixed

    def check(self, available: int | None = None) -> None:
        """Raise MemoryLimitError when the estimate exceeds the available memory
        (``available`` bytes, default :func:`available_memory`). An estimate below half the
        free memory fits without asking for the available memory: the kernel's reserves,
        which the available memory deducts from the free memory, are a few percent of it."""
        if available is None and 2 * self.total <= free_memory():
            return
        have = available_memory() if available is None else available
        if self.total > have:
            raise MemoryLimitError(
                f"{self.what} needs about {format_bytes(self.total)} ({self.points} grid points x "
                f"{self.per_step} bytes), {format_bytes(have)} of memory is available; shrink it "
                f"with {self.shrink}")


def forward_bytes(sizes, scheme: str, store: bool = False, time_terms: bool = False) -> int:
    """Bytes per grid point of a simulation (compiled backend and Trajectory): t, q, v, a and
    the algorithmic acceleration w (hht-ga only), lam, outputs, inputs (the grid's and the
    sweep's copy); with ``store`` the factorised Newton matrix and the time and state terms
    too, with ``time_terms`` the time and state terms only."""
    n, m = sizes.n, sizes.m
    doubles = 1 + 3 * n + m + sizes.n_s + 2 * sizes.n_u + (n if scheme != "hht-paper" else 0)
    kept = sizes.factor_bytes if store else sizes.kept_term_bytes if time_terms else 0
    return 8 * doubles + kept


def csv_bytes(points: int, columns: int) -> int:
    """The peak that writing a CSV adds: one chunk of rows as Python objects."""
    return min(points, CSV_CHUNK) * columns * CSV_CELL


def tangent_bytes(sizes, scheme: str, directions: int) -> int:
    """Bytes per grid point of a tangent sweep along ``directions`` parameters: dq, dv, da,
    the algorithmic dw (hht-ga only), dlam and ds, each at least one wide (the compiled sweep
    takes no empty rows)."""
    n, m, n_s = max(sizes.n, 1), max(sizes.m, 1), max(sizes.n_s, 1)
    return 8 * directions * (3 * n + (n if scheme != "hht-paper" else 0) + m + n_s)


def largest(*estimates: MemoryEstimate) -> MemoryEstimate:
    """The phase of a command that needs the most (phases run one after the other)."""
    return max(estimates, key=lambda e: e.total)
