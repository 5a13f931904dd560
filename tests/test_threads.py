"""one_blas_thread: every BLAS library runs one thread while any evaluation does, and gets its
own count back when the last one ends (nested evaluations included, and evaluations on other
threads, which threadpoolctl lets set a count only while no other live thread controls it)."""
from __future__ import annotations

import threading

import scipy.linalg  # noqa: F401  (its OpenBLAS is among the libraries limited)
from threadpoolctl import threadpool_info, threadpool_limits

from symdae.threads import one_blas_thread


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_blas_runs_one_thread_inside_and_its_own_count_after():
    with threadpool_limits(limits=3, user_api="blas"):
        assert _blas_threads() and set(_blas_threads()) == {3}
        with one_blas_thread():
            assert set(_blas_threads()) == {1}
            with one_blas_thread():                 # re-entrant
                assert set(_blas_threads()) == {1}
            assert set(_blas_threads()) == {1}      # the outer one still runs
        assert set(_blas_threads()) == {3}
        try:
            with one_blas_thread():
                raise ValueError("a failed evaluation")
        except ValueError:
            pass
        assert set(_blas_threads()) == {3}


def _run(*targets) -> None:
    threads = [threading.Thread(target=f) for f in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a thread of the test hangs"


def test_an_evaluation_on_a_pool_thread_after_one_in_the_main_thread_runs_one_thread():
    seen = []

    def evaluate():
        with one_blas_thread():
            seen.append(set(_blas_threads()))

    with threadpool_limits(limits=3, user_api="blas"):
        with one_blas_thread():          # a serial evaluation first
            pass
        _run(evaluate)
        assert seen == [{1}]
        assert set(_blas_threads()) == {3}


def test_overlapping_evaluations_on_live_threads_give_the_count_back():
    # the first evaluation to start ends first, and its thread lives on (a pool's), so the
    # count is given back from the other thread
    entered, first_done, second_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with one_blas_thread():
            seen["first"] = set(_blas_threads())
            assert entered.wait(30)
        first_done.set()
        assert second_done.wait(30)
        seen["after both"] = set(_blas_threads())

    def second():
        with one_blas_thread():
            entered.set()
            assert first_done.wait(30)
            seen["second, alone"] = set(_blas_threads())
        second_done.set()

    with threadpool_limits(limits=3, user_api="blas"):
        _run(first, second)
        assert seen == {"first": {1}, "second, alone": {1}, "after both": {3}}
        assert set(_blas_threads()) == {3}


def test_counts_call_openblas_directly_and_any_other_library_through_threadpoolctl():
    from symdae import threads

    libs = threads._guard()._blas
    pthreads = [c for c in libs if c.controller.internal_api == "openblas"
                and c.controller.threading_layer == "pthreads"]
    assert pthreads, "NumPy's and SciPy's wheels bring a pthreads OpenBLAS"
    for c in pthreads:          # found its own symbols: the count a microsecond away
        assert c._set is not None
        before = c.get()
        c.set(2 if before != 2 else 3)
        assert c.get() == c.controller.num_threads == (2 if before != 2 else 3)
        c.set(before)
        assert c.controller.num_threads == before

    class OtherBlas:            # an MKL, a BLIS: threadpoolctl's calls
        internal_api, threading_layer, num_threads = "mkl", "intel", 4
        calls: list = []

        def set_num_threads(self, n):
            self.calls.append(n)
            self.num_threads = n

    other = OtherBlas()
    counts = threads._Counts(other)
    assert counts.get() == 4
    counts.set(1)
    assert other.num_threads == 1 and other.calls == [1]
