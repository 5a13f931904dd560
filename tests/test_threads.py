"""one_blas_thread: every BLAS library runs one thread while any evaluation does, and gets its
own count back when the last one ends (nested evaluations included)."""
from __future__ import annotations

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
