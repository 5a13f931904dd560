"""The compiled backend: the Cython core (``symdae/simulation/core/hht.pyx``) over a generated kernel module.

Validates every shape and type here, at the Python boundary, so the nogil sweeps can trust
their inputs. Imported only when a compiled model is loaded, so ``import symdae`` works where
the core was never built.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ...errors import InputError
from ...model.kernels import KERNEL_NAMES, Sizes, kernel, layout, size, weight_size
from ...threads import one_blas_thread
from .base import (
    STATUSES,
    AdjointResult,
    Counters,
    ForwardResult,
    Grid,
    Restart,
    SweepReport,
    TangentArrays,
    raise_if_interrupted,
    scheme_code,
    start_w,
    state_fields,
)
from .time_tables import TimeTermTables
from .workspace import ArrayPool

__all__ = ["CompiledBackend", "core_available"]

_INITIAL_STATE = KERNEL_NAMES.index("initial_state")

def core_available() -> bool:
    """Is the compiled core importable (was the package built)?"""
    try:
        from ..core import hht  # type: ignore[attr-defined]  # noqa: F401
    except ImportError:
        return False
    return True


_FLOAT64 = np.dtype(np.float64)


def _vec(x, k: int, label: str, where: str) -> np.ndarray:
    """x as a contiguous float64 vector of length k (one zero when k = 0: no empty buffers)."""
    if (type(x) is np.ndarray and x.dtype is _FLOAT64 and x.shape == (k,) and k > 0
            and x.flags.c_contiguous):
        return x        # the usual case (a run's own vectors), in half the time
    vec = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    if vec.shape[0] != k:
        raise InputError(f"{where}: {label} has {vec.shape[0]} entries, expected {k}")
    return vec if k > 0 else np.zeros(1)


def _taken_as_is(U, rows: int, n_u: int) -> bool:
    """Is U a read-only C-contiguous float64 array of ``rows`` rows of n_u inputs, which a
    forward sweep reads and its result keeps without a copy?"""
    return (isinstance(U, np.ndarray) and U.shape == (rows, n_u) and U.dtype == np.float64
            and U.flags.c_contiguous and not U.flags.writeable)


def _restart(A: np.ndarray, L: np.ndarray, row: int, step: int, noise, order) -> Restart:
    """The Restart that continues a run at ``row`` (step ``step`` of the grid)."""
    k = min(step, 2)
    # noise and order are the sweep's own arrays, which nothing writes after it
    return Restart(np.concatenate((A[row - k:row], L[row - k:row]), axis=1), noise, order)


def _algorithmic(A: np.ndarray, grid: Grid, row: int, x0, pool: ArrayPool) -> np.ndarray:
    """The tangents' array of algorithmic accelerations w beside A (scheme.pxd): A itself
    for hht-paper, whose w is a; else a new one of zeros whose ``row`` holds x0's w (its a
    when x0 has no w: the start of a run)."""
    if grid.scheme == "hht-paper":
        return A
    W = pool.zeros(A.shape)
    w0 = np.asarray(start_w(x0), dtype=float)
    W[row][..., :w0.shape[-1]] = w0
    return W


def _report(rep: dict) -> SweepReport:
    counters = Counters(int(rep["steps"]), int(rep["newton_iterations"]),
                        int(rep["factorizations"]), int(rep["jacobian_refreshes"]),
                        int(rep["restarts"]), int(rep["compiled_steps"]))
    return SweepReport(STATUSES[rep["status"]], counters, float(rep["time"]), int(rep["step"]),
                       int(rep["iterations"]), float(rep["residual_norm"]),
                       float(rep["first_residual_norm"]), float(rep["noise_ratio"]),
                       int(rep["pivot"]))


class CompiledBackend:
    """Kernels of a generated module plus the compiled sweeps (see ``backends.base``)."""

    name = "compiled"

    def __init__(self, module):
        from ..core import hht
        self.hht = hht
        self.module = module
        self.pool = ArrayPool()      # the sweeps' arrays, reused across runs (workspace.py)
        # the forward and adjoint sweeps' steps and the tangent sweep's products in the model
        # module's compiled code where it has them (compiled_steps.h, tangent_products.py;
        # False: the core's generic steps and lists only, the same numbers)
        self.use_compiled_steps = True
        self.kernels = hht.Kernels(module)
        k = self.kernels
        self.sizes = Sizes(k.n, k.m, k.n_p, k.n_u, k.n_s, k.n_tau, k.n_st)
        # the time terms of a grid, kept across runs whose parameters and inputs they read are
        # the same (time_tables.py; False: every run evaluates them, the same numbers)
        self.time_tables = TimeTermTables(k.n_tau, getattr(module, "TIME_TERM_READS",
                                                           {"p": range(k.n_p),
                                                            "u": range(k.n_u)}))
        self.use_time_tables = True
        # the outputs the outputs kernel never writes (identically 0: symdae_kernels.h)
        self.zero_outputs = np.array(module.ZERO_OUTPUTS, dtype=np.intp)
        # where initial_adjoint reads its blocks: the kernel spec's layout
        self._initial_blocks = np.array(
            [layout(name, self.sizes)[b][0]
             for name, blocks in (("jacobians", ("JM", "JG", "GV")),
                                  ("param_jacobians", ("PM", "PG")),
                                  ("acceleration_constraint", ("Rc_q", "gamma_v", "Rc_p")),
                                  ("initial_state_jacobian", ("q0_p", "v0_p")))
             for b in blocks], dtype=np.intc)
        if hht.N_KERNELS != len(KERNEL_NAMES):
            raise ImportError(f"the compiled core knows {hht.N_KERNELS} kernels, the kernel "
                              f"spec {len(KERNEL_NAMES)}: rebuild the package")
        for idx, name in enumerate(KERNEL_NAMES):
            want = (size(name, self.sizes), weight_size(name, self.sizes),
                    kernel(name).accumulate)
            if k.layout(idx) != want:
                raise ImportError(f"kernel {name} of {module.__name__} has layout "
                                  f"{k.layout(idx)}, the spec says {want}: rebuild the model")

    def __reduce__(self):
        raise TypeError("a CompiledBackend does not pickle by itself; pickle the System")

    # ------------------------------------------------------------------ kernels
    def evaluate(self, name: str, t, q, v, a, lam, p, u, w=None) -> np.ndarray:
        kernel(name)
        return self.at(t, q, v, a, lam, p, u, where=f"kernel {name}")(name, w)

    def at(self, t, q, v, a, lam, p, u, where: str = "kernel evaluation"):
        """Kernels at one state, checked once (backends.base)."""
        sz = self.sizes
        state = [_vec(x, k, label, where)
                 for x, k, label in state_fields(sz, q, v, a, lam, p, u)]
        t = float(t)
        evaluate = self.kernels.evaluate

        def at_state(name: str, w=None) -> np.ndarray:
            kernel(name)
            wv = _vec(() if w is None else w, weight_size(name, sz), "w", f"kernel {name}")
            return evaluate(KERNEL_NAMES.index(name), t, *state, wv)
        return at_state

    def model_start(self, t0, p, u):
        """The model's (q0, v0) in p, t0, u (backends.base): the initial_state kernel called
        directly (at() checks seven vectors, a third of an evaluation's initial state)."""
        sz = self.sizes
        pv, uv = _vec(p, sz.n_p, "p", "initial state"), _vec(u, sz.n_u, "u", "initial state")
        # q, v, a, lam and the weights: the kernel reads none of them
        zero = np.zeros(max(sz.n, sz.m, 1))
        out = self.kernels.evaluate(_INITIAL_STATE, float(t0), zero, zero, zero, zero, pv, uv,
                                    zero)
        return out[:sz.n], out[sz.n:2 * sz.n]

    def consistent_start(self, t0, q, v, p, u, tol: float):
        """(a0, lam0) in one compiled call where the usual case holds, else None
        (backends.base)."""
        sz = self.sizes
        state = [_vec(x, k, label, "initial state") for x, k, label in
                 ((q, sz.n, "q0"), (v, sz.n, "v0"), (p, sz.n_p, "p"), (u, sz.n_u, "u"))]
        return self.kernels.consistent_start(float(t0), *state, float(tol))

    def initial_adjoint(self, t0, q, v, a, lam, p, u, xbar, from_model):
        """dJ/dp through an initial state without massless rows in one compiled call, or
        None (backends.base)."""
        sz = self.sizes
        state = [_vec(x, k, label, "initial adjoint") for x, k, label in
                 ((q, sz.n, "q0"), (v, sz.n, "v0"), (a, sz.n, "a0"), (lam, sz.m, "lam0"),
                  (p, sz.n_p, "p"), (u, sz.n_u, "u"), (xbar, sz.nx, "xbar0"),
                  (from_model, 2 * sz.n, "from_model"))]
        return self.kernels.initial_adjoint(float(t0), *state, self._initial_blocks)

    def initial_tangent(self, t0, q, v, a, lam, p, u, D, from_model):
        """(dq0, dv0, da0, dlam0) along the directions D (n_p x nd), each (size, nd), of an
        initial state without massless rows in one compiled call, or None (backends.base)."""
        sz = self.sizes
        state = [_vec(x, k, label, "initial tangent") for x, k, label in
                 ((q, sz.n, "q0"), (v, sz.n, "v0"), (a, sz.n, "a0"), (lam, sz.m, "lam0"),
                  (p, sz.n_p, "p"), (u, sz.n_u, "u"))]
        D = np.asarray(D, dtype=float)
        if D.ndim != 2 or D.shape[0] != sz.n_p:
            raise InputError(f"the directions have shape {D.shape}, expected ({sz.n_p}, nd)")
        DT = np.ascontiguousarray(D.T) if sz.n_p else np.zeros((D.shape[1], 1))
        fm = _vec(from_model, 2 * sz.n, "from_model", "initial tangent")
        out = np.empty((D.shape[1], sz.nx))
        if not self.kernels.initial_tangent(float(t0), *state, DT, fm, self._initial_blocks,
                                            out):
            return None
        n, T = sz.n, out.T
        return T[:n], T[n:2 * n], T[2 * n:3 * n], T[3 * n:]

    # ------------------------------------------------------------------ sweeps
    def forward(self, grid: Grid, p, U, x0, rtol: float, max_iter: int,
                store: bool, restart: Restart | None = None,
                time_terms: bool = False, continues: bool = False) -> ForwardResult:
        sz, N = self.sizes, grid.N
        nm = sz.n + sz.m
        first = 0 if restart is None else restart.history.shape[0]
        rows = first + N + 1
        pool = self.pool
        # q, v, a and the algorithmic w (hht-paper: w is a) as the rows of one pool array:
        # each a C-contiguous (rows, n) block of it, one request instead of four (a short
        # run's Python costs as much as its sweep)
        paper = grid.scheme == "hht-paper"
        QVAW = pool.empty((3 if paper else 4, rows, sz.n))
        Q, V, A = QVAW[0], QVAW[1], QVAW[2]
        W = A if paper else QVAW[3]
        L = pool.empty((rows, sz.m))
        # the outputs kernel writes every row but never its structural zeros (an output that
        # is identically 0, symdae_kernels.h): those columns zeroed
        S = pool.empty((rows, sz.n_s))
        if self.zero_outputs.size:
            S[:, self.zero_outputs] = 0.0
        Q[first], V[first], A[first], L[first] = x0[:4]
        if not paper:
            W[first] = start_w(x0)
        order = np.zeros(2 * nm, dtype=np.intc)
        if restart is None:
            noise = np.zeros(2 * nm + 1)
        else:
            A[:first], L[:first] = restart.history[:, :sz.n], restart.history[:, sz.n:]
            noise = np.array(restart.noise, dtype=float)
            order[:] = restart.order
        keep = store or time_terms
        p_arg = _vec(p, sz.n_p, "p", "forward")
        if first == 0 and _taken_as_is(U, rows, sz.n_u):
            Ufull = U           # read-only (a prepared run's): the result may keep it
        else:
            Ufull = pool.empty((rows, sz.n_u))
            Ufull[first:] = U
        # a run from the grid's start reads the time terms from a table of an earlier run
        # with the same grid and the same values of what they read, where there is one
        tables = self.time_tables
        key = (tables.key(grid.t0, grid.h, p_arg, Ufull)
               if self.use_time_tables and first == 0 and grid.i0 == 0 else None)
        table, repeated = tables.lookup(key)
        if repeated and not keep:
            table = self.time_term_table(grid.t0, grid.h, p_arg, Ufull)
            tables.put(key, table)
        # every entry of what is kept is written by the sweep: the factorisations (store), the
        # time terms (store or time_terms, unless the sweep reads a table) and the state terms
        saved: tuple = (pool.empty((rows, nm, nm)) if store else None,
                 pool.empty((rows, nm + 1), dtype=np.intc) if store else None,
                 pool.empty((rows, sz.n_tau)) if keep and sz.n_tau and table is None else None,
                 pool.empty((rows, sz.n_st)) if keep and sz.n_st else None)
        with self.lapack_threads():
            rep = self.hht.forward(self.kernels, grid.t0, grid.h, N, grid.alpha,
                                    scheme_code(grid.scheme), p_arg, Ufull,
                                    Q, V, A, W, L, S, *saved, float(rtol), int(max_iter), first,
                                    grid.i0, noise, order, restart is not None,
                                    self.use_compiled_steps, table)
        raise_if_interrupted(rep, grid, "forward")
        report = _report(rep)
        if table is not None:
            # the derivative sweeps read the table as the time terms the sweep kept
            saved = saved[:2] + (table,) + saved[3:]
        elif repeated and report.ok:
            tables.put(key, saved[2].copy())       # (keep: the time terms of every row)
        end = (_restart(A, L, first + N, grid.i0 + N, noise, order)
               if continues and report.ok else None)
        kept: tuple | None = None
        if any(x is not None for x in saved):
            kept = saved if first == 0 else tuple(None if x is None else x[first:]
                                                  for x in saved)
        W = None if W is A else W          # hht-paper: w is a
        if first:
            Ufull, Q, V, A, L, S = (x[first:] for x in (Ufull, Q, V, A, L, S))
            Ufull = np.ascontiguousarray(Ufull)
            W = None if W is None else W[first:]
        return ForwardResult(grid, p_arg[:sz.n_p], Ufull, Q, V, A, L, S, report, kept, end,
                             order, W)

    def time_term_table(self, t0: float, h: float, p: np.ndarray, U: np.ndarray) -> np.ndarray:
        """All time terms at t0 + k h, k = 0 .. rows of U - 1 (rows: states, inputs of each),
        as the sweeps evaluate them."""
        sz = self.sizes
        table = np.zeros((U.shape[0], sz.n_tau))
        self.hht.time_term_table(self.kernels, float(t0), float(h),
                                 _vec(p, sz.n_p, "p", "time terms"),
                                 np.ascontiguousarray(U, dtype=np.float64), table)
        return table

    def _saved(self, fwd: ForwardResult):
        return fwd.saved if fwd.saved is not None else (None, None, None, None)

    def tangent(self, fwd: ForwardResult, D: np.ndarray, dx0,
                states: bool = True) -> TangentArrays:
        sz, g = self.sizes, fwd.grid
        nd = D.shape[1]
        rows = g.N + 1 if states else min(g.N + 1, 2)     # 2: the sweep alternates rows
        DT = np.ascontiguousarray(D.T) if sz.n_p else np.zeros((nd, 1))
        pool = self.pool
        dQ, dV, dA = (pool.zeros((rows, nd, max(sz.n, 1))) for _ in range(3))
        dL = pool.zeros((rows, nd, max(sz.m, 1)))
        # every row of dS is written by a sweep that succeeds (a failed one is raised by the
        # callers), and the padding row of a model without outputs is cut off below; the
        # sweep writes each state's (n_s, nd) by output, as its products add them up, and
        # the record holds the (N+1, nd, n_s) view the contract names
        dS = pool.empty((g.N + 1, max(sz.n_s, 1), nd))
        for X, x0 in zip((dQ, dV, dA, dL), dx0):
            X[0, :, :x0.shape[1]] = x0
        dW = _algorithmic(dA, g, 0, dx0, pool)
        with self.lapack_threads():
            rep = self.hht.tangent(self.kernels, g.t0, g.h, g.N, g.alpha,
                                    scheme_code(g.scheme), self._p(fwd), fwd.U,
                                    *self._states(fwd), *self._saved(fwd), DT, dQ, dV, dA, dW,
                                    dL, dS, g.i0, fwd.order, self.use_compiled_steps)
        raise_if_interrupted(rep, g, "tangent")
        report = SweepReport("ok" if rep["status"] == 0 else "singular",
                             Counters(compiled_steps=int(rep["compiled_steps"])),
                             step=rep["step"])
        keep = slice(None) if states else slice(g.N % rows, g.N % rows + 1)
        return TangentArrays(dQ[keep, :, :sz.n], dV[keep, :, :sz.n], dA[keep, :, :sz.n],
                             dL[keep, :, :sz.m], dS[:, :sz.n_s].transpose(0, 2, 1), report,
                             None if dW is dA else dW[keep, :, :sz.n])

    def adjoint(self, fwd: ForwardResult, dPhi: np.ndarray, carry=None, last: bool = True,
                first: bool = True) -> AdjointResult:
        sz, g = self.sizes, fwd.grid
        state = np.zeros(sz.nx + 2 * sz.n + sz.n_p)
        if not last:
            state[:] = carry
        dPhi = np.ascontiguousarray(dPhi, dtype=np.float64)
        if dPhi.shape != (g.N + 1, sz.n_s):       # the nogil sweep reads it unchecked
            raise InputError(f"dPhi has shape {dPhi.shape}, expected {(g.N + 1, sz.n_s)}")
        with self.lapack_threads():
            rep = self.hht.adjoint(self.kernels, g.t0, g.h, g.N, g.alpha,
                                    scheme_code(g.scheme), self._p(fwd), fwd.U,
                                    *self._states(fwd), *self._saved(fwd), dPhi, state, g.i0,
                                    last, first, fwd.order, self.use_compiled_steps)
        raise_if_interrupted(rep, g, "adjoint")
        report = SweepReport("ok" if rep["status"] == 0 else "singular",
                             Counters(compiled_steps=int(rep["compiled_steps"])),
                             step=rep["step"])
        # views: the state array is this call's own
        return AdjointResult(state[sz.nx + 2 * sz.n:], state[:sz.nx], state, report)

    def lapack_threads(self):
        """A context manager for a sweep of this backend: one BLAS thread while a sweep that
        calls LAPACK runs (matrices above the core's own dense LU,
        symdae/simulation/core/dense.pxd); nothing to do for smaller ones."""
        return (one_blas_thread() if self.sizes.nm > self.hht.DENSE_LU_MAX
                else contextlib.nullcontext())

    @staticmethod
    def _states(fwd: ForwardResult):
        # the sweeps take contiguous rows; a segment's views are (they start at a row)
        A = np.ascontiguousarray(fwd.a)
        W = A if fwd.w is None else np.ascontiguousarray(fwd.w)
        return (np.ascontiguousarray(fwd.q), np.ascontiguousarray(fwd.v), A, W,
                np.ascontiguousarray(fwd.lam))

    def _p(self, fwd: ForwardResult) -> np.ndarray:
        return fwd.p if self.sizes.n_p else np.zeros(1)
