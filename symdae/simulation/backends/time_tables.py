"""The time terms of a time grid, kept across runs of one system.

A kernel module hoists the costly terms that depend on t, the parameters and the inputs only
(an excitation A sin(w C^t t): symdae/model/emit.py) out of its kernels; a sweep evaluates
them once per step. An identification runs the same scenario hundreds of times with other
values of the parameters it identifies, which the excitation rarely reads: every run would
evaluate the same libm calls at the same times again (on the engine mount, C^t and a sine, 13 %
of the forward sweep's instructions). :class:`TimeTermTables` keeps a table of all time terms
over the grid, keyed by what they depend on (the grid, the parameters and the inputs that the
module's time terms read: its TIME_TERM_READS), so that later runs read them: the forward
sweep's compiled steps instead of evaluating them, the derivative sweeps as the forward
sweep's stored time terms. The rows are what the kernel computes at those times, so a run
that reads them takes the very same steps.

A table is made when a run asks for a key that one of the last few runs without a table asked
for too (a copy of the time terms the run kept for a gradient, or a pass of the time-terms
kernel over the grid before a run that keeps none): experiments that take turns on one system
each get theirs, and a run whose time terms read parameters that change from run to run
(identifying the excitation, an experiment design over it) never pays for a table it will
not read.
"""
from __future__ import annotations

import hashlib
import threading

import numpy as np

__all__ = ["TimeTermTables", "TABLE_BYTES", "TABLES"]

TABLE_BYTES = 16 * 2 ** 20   # at most this much in all; a longer grid is evaluated per run
TABLES = 8                   # at most this many (the least recently used one goes)


class TimeTermTables:
    """Tables of all time terms (rows = states of a grid from its start, n_tau columns).

    ``reads``: {"p": parameter indices, "u": input indices} the time terms read (the kernel
    module's TIME_TERM_READS). Thread-safe; a table, once made, is never written again.
    """

    def __init__(self, n_tau: int, reads: dict, max_bytes: int = TABLE_BYTES,
                 count: int = TABLES):
        self.n_tau = int(n_tau)
        self.p_index = np.asarray(reads.get("p", ()), dtype=np.intp)
        self.u_index = np.asarray(reads.get("u", ()), dtype=np.intp)
        self.max_bytes = int(max_bytes)
        self.count = int(count)
        self._tables: dict = {}     # key -> table, least recently used first
        self._bytes = 0
        self._asked: dict = {}      # the keys of the last runs that found no table, oldest first
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._tables)

    @property
    def nbytes(self) -> int:
        """Bytes of the tables kept."""
        return self._bytes

    def key(self, t0: float, h: float, p: np.ndarray, U: np.ndarray):
        """The key of the table for a run from the grid's start with these (rows of U: states),
        or None where no table fits (no time terms, or more rows than max_bytes allows)."""
        rows = U.shape[0]
        if self.n_tau == 0 or rows * self.n_tau * 8 > self.max_bytes:
            return None
        # the inputs by a digest: a key is kept among the recently asked ones too
        u = hashlib.blake2b(np.ascontiguousarray(U[:, self.u_index]).tobytes(),
                            digest_size=16).digest() if self.u_index.size else b""
        return (float(t0), float(h), rows, p[self.p_index].tobytes(), u)

    def lookup(self, key) -> tuple[np.ndarray | None, bool]:
        """(the table of ``key`` or None, whether one of the last 2 ``count`` lookups that
        found none asked for this key too: then the caller makes its table and puts it here)."""
        if key is None:
            return None, False
        with self._lock:
            table = self._tables.pop(key, None)
            if table is not None:
                self._tables[key] = table       # now the most recently used
                return table, False
            repeated = self._asked.pop(key, None) is not None
            if not repeated:
                self._asked[key] = True
                while len(self._asked) > 2 * self.count:
                    self._asked.pop(next(iter(self._asked)))
            return None, repeated

    def put(self, key, table: np.ndarray) -> None:
        """Keep ``table`` (not written afterwards: the caller hands it over) for ``key``."""
        if key is None:
            return
        with self._lock:
            old = self._tables.pop(key, None)
            self._bytes += table.nbytes - (0 if old is None else old.nbytes)
            self._tables[key] = table
            while len(self._tables) > self.count or self._bytes > self.max_bytes:
                self._bytes -= self._tables.pop(next(iter(self._tables))).nbytes

    def clear(self) -> None:
        """Forget every table (those a trajectory still holds stay valid for it)."""
        with self._lock:
            self._tables.clear()
            self._asked.clear()
            self._bytes = 0
