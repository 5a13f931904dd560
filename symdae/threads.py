"""Threads: BLAS threads that do not fight the sweeps, and pools that stop on Ctrl-C.

OpenBLAS starts worker threads for LAPACK calls above a size and for long vector operations
(a dot product of 10 001 elements wakes them, 10 000 does not). Inside symdae's sweeps and
costs these threads only compete with the experiments that ``evaluate_many`` already runs in
parallel: at n + m = 240 a step took 11 times longer under load with them. ``one_blas_thread``
limits every loaded BLAS to one thread while any symdae evaluation runs and restores the
user's setting when the last one ends (threadpoolctl does the limiting).

The thread count of a BLAS library is process-wide, so the reference count that lets threads
overlap their evaluations is process-wide too: one guard object, made on first use. The
evaluation that starts the count and the one that ends it may run on different threads (a
thread pool's): threadpoolctl (3.8) lets only the thread that last set a pthreads OpenBLAS's
count set it again while that thread lives, and ignores the others without a word, which
left the user's count at 1 after overlapping evaluations on a pool and a pool's evaluations
unlimited after one in the main thread. The guard therefore calls such an OpenBLAS's own
openblas_set_num_threads, which threadpoolctl's bookkeeping does not see (and which takes a
microsecond, not threadpoolctl's seven), and for any other library hands threadpoolctl's
control to the thread that sets the counts, under its own lock, and gives it up after
(``clear_controlling_thread``, threadpoolctl's own means for this).

Ctrl-C reaches only the main thread. When it arrives while the main thread waits for a pool
(``pool``, ``gather``), the queued work is cancelled and ``stop_requested()`` turns true until
the running work has returned: the compiled sweeps ask for it every few thousand steps
(simulation/core/interrupt.pxd) and stop, so a pool winds down within milliseconds instead of
finishing its queue.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait as wait_for
from contextlib import contextmanager

__all__ = ["one_blas_thread", "stop_requested", "pool", "gather"]

_STOP = threading.Event()


def stop_requested() -> bool:
    """Has Ctrl-C asked the work running in pool threads to stop?"""
    return _STOP.is_set()


@contextmanager
def _stopping() -> Iterator[None]:
    # set while the running work winds down; cleared after, so the next run is not stopped
    _STOP.set()
    try:
        yield
    finally:
        _STOP.clear()


@contextmanager
def pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A ThreadPoolExecutor that, when its body raises, cancels its queued work (and on Ctrl-C
    stops the running sweeps) before it re-raises; ``with ThreadPoolExecutor()`` would run
    the whole queue first."""
    executor = ThreadPoolExecutor(max(1, int(workers)))
    try:
        yield executor
    except KeyboardInterrupt:
        with _stopping():
            executor.shutdown(wait=True, cancel_futures=True)
        raise
    except BaseException:
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown(wait=True)


def gather(futures: Iterable[Future], stop_timeout: float = 5.0) -> list:
    """The futures' results in order. On the first failure the pending ones are cancelled; on
    Ctrl-C the running ones are also stopped (see the top of this module), waiting at most
    ``stop_timeout`` s for them (work in other processes does not see the stop request)."""
    futures = list(futures)
    try:
        return [f.result() for f in futures]
    except BaseException as exc:
        for f in futures:
            f.cancel()
        if isinstance(exc, KeyboardInterrupt):
            with _stopping():
                wait_for([f for f in futures if not f.done()], timeout=stop_timeout)
        raise


class _Guard:
    # sets the thread counts of the BLAS libraries itself: threadpoolctl's limit() builds a
    # description of every library on each call (12 us a call, here 6)
    def __init__(self):
        from threadpoolctl import ThreadpoolController
        self._blas = [_Counts(lc) for lc in ThreadpoolController().lib_controllers
                      if lc.user_api == "blas"]
        self._lock = threading.Lock()
        self._users = 0
        self._restore = []      # (library, its thread count) to restore when the last ends

    def enter(self):
        with self._lock:
            if self._users == 0:
                counts = [(lib, lib.get()) for lib in self._blas]
                self._restore = [(lib, n) for lib, n in counts if isinstance(n, int) and n > 1]
                for lib, _ in self._restore:
                    lib.set(1)
            self._users += 1

    def exit(self):
        with self._lock:
            self._users -= 1
            if self._users == 0:
                for lib, n in self._restore:
                    lib.set(n)
                self._restore = []


class _Counts:
    """Get and set one BLAS library's thread count. A pthreads OpenBLAS (NumPy's and SciPy's
    wheels) is called directly, through its own openblas_get/set_num_threads: threadpoolctl's
    calls cost 7 us each in Python, and the guard brackets every evaluation (an engine-mount J
    took 19-46 us in it, 1-2 % of its time). Any other library, or an OpenBLAS whose symbols
    are not found, goes through threadpoolctl."""

    # the symbols' affixes of the OpenBLAS builds in circulation (plain, scipy-openblas32/64)
    _AFFIXES = tuple((prefix, suffix) for prefix in ("", "scipy_")
                     for suffix in ("", "64_", "_64"))

    def __init__(self, controller):
        self.controller = controller
        self._get = self._set = None
        lib = getattr(controller, "dynlib", None)
        if (lib is not None and controller.internal_api == "openblas"
                and getattr(controller, "threading_layer", None) == "pthreads"):
            for prefix, suffix in self._AFFIXES:
                get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    # the CDLL's own function objects, which threadpoolctl calls too, with
                    # the same int argument and result
                    get.restype, get.argtypes = ctypes.c_int, []
                    put.restype, put.argtypes = None, [ctypes.c_int]
                    self._get, self._set = get, put
                    break

    def get(self):
        return self._get() if self._get is not None else self.controller.num_threads

    def set(self, n: int) -> None:
        if self._set is not None:
            self._set(n)
        else:
            _set_threads(self.controller, n)


def _set_threads(lc, n: int) -> None:
    # from whichever thread holds the guard's lock: threadpoolctl's control of a pthreads
    # OpenBLAS is cleared before (else another live thread's control ignores this call) and
    # after (else this thread's ignores every other thread's, the user's included)
    clear = getattr(type(lc), "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)
    lc.set_num_threads(n)
    if clear is not None:
        clear(force=True)


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
