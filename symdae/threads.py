"""BLAS threads that do not fight the sweeps.

OpenBLAS starts worker threads for LAPACK calls above a size and for long vector operations
(a dot product of 10 001 elements wakes them, 10 000 does not). Inside symdae's sweeps and
costs these threads only compete with the experiments that ``evaluate_many`` already runs in
parallel: at n + m = 240 a step took 11 times longer under load with them. ``one_blas_thread``
limits every loaded BLAS to one thread while any symdae evaluation runs and restores the
user's setting when the last one ends (threadpoolctl does the limiting).

The thread count of a BLAS library is process-wide, so the reference count that lets threads
overlap their evaluations is process-wide too: one guard object, made on first use.
"""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager

__all__ = ["one_blas_thread"]


class _Guard:
    def __init__(self):
        from threadpoolctl import ThreadpoolController
        self._controller = ThreadpoolController()
        self._lock = threading.Lock()
        self._users = 0
        self._limit = None

    def enter(self):
        with self._lock:
            if self._users == 0:
                self._limit = self._controller.limit(limits=1, user_api="blas")
            self._users += 1

    def exit(self):
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._limit is not None:
                self._limit.restore_original_limits()
                self._limit = None


@functools.lru_cache(maxsize=1)
def _guard() -> _Guard:
    # made after scipy.linalg is loaded (the compiled core imports it), so that its OpenBLAS
    # is among the libraries threadpoolctl finds
    return _Guard()


@contextmanager
def one_blas_thread():
    """Run the body with every BLAS library limited to one thread (re-entrant, thread-safe)."""
    guard = _guard()
    guard.enter()
    try:
        yield
    finally:
        guard.exit()
