"""The NumPy backend: lambdified kernels and the three HHT sweeps written in NumPy.

It is the test oracle for the compiled sweeps and the fallback where no C compiler exists; it
is never the fast path (a Python loop over the steps, one lambdified call per kernel). It runs
the same discrete scheme as the compiled core (``symdae/simulation/core/scheme.pxd``) with full Newton
and the same stopping tests, and its derivative sweeps are written independently of the
compiled ones: dense Jacobian blocks (the ``jacobians`` and ``param_jacobians`` kernels and the
output Jacobians of the DerivedSystem) instead of the generated sparse products, so a mistake
in a JVP/VJP kernel or a step function shows up as a disagreement.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import sympy as sp

from ...errors import InputError
from ...model.derivation import DerivedSystem
from ...model.kernels import Sizes, kernel, kernel_expressions, split, weight_size
from ...model.nonsmooth import has_jumps
from .base import (
    AdjointResult,
    Counters,
    ForwardResult,
    Grid,
    Restart,
    SweepReport,
    TangentArrays,
    start_w,
    state_fields,
)

__all__ = ["NumpyBackend", "lambdify_flat"]

# the arguments of a kernel at one state: t, q, v, a, lam, p, u
StateArgs = tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]

_ARRAYS = ("q", "v", "a", "lam", "p", "u")
_EPS = np.finfo(float).eps
_ROUNDOFF_FLOOR = np.finfo(float).tiny   # newton.pxd: the round-off level's floor, DBL_MIN
FLOOR_FACTOR, NOISE_FACTOR, STALL_FACTOR = 10.0, 4.0, 64.0   # the compiled core's (newton.pxd)
SWITCH_HALVINGS = 64


def lambdify_flat(ds: DerivedSystem, exprs, n_w: int = 0) -> Callable[..., np.ndarray]:
    """f(t, q, v, a, lam, p, u, w) -> float array of ``exprs`` (expressions in ds's symbols and
    weights w[0..n_w)). Each symbol becomes an entry of one argument vector, so symbol names
    (which are not Python identifiers: ``q[0]``) never reach the generated function."""
    S = ds.symbols
    wsyms = [sp.Symbol(f"w[{i}]", real=True) for i in range(n_w)]
    slots = [S.t] + [s for arr in _ARRAYS for s in getattr(S, arr)] + wsyms
    X = sp.IndexedBase("X")
    rep = {s: X[i] for i, s in enumerate(slots)}
    exprs = [sp.sympify(e) for e in exprs]
    nonzero = [i for i, e in enumerate(exprs) if e != 0]
    f = sp.lambdify([X], [exprs[i].xreplace(rep) for i in nonzero], modules="numpy", cse=True)
    size = len(exprs)

    def evaluate(t, q, v, a, lam, p, u, w=None) -> np.ndarray:
        wv = np.zeros(n_w) if w is None else np.asarray(w, dtype=float).reshape(-1)
        x = np.concatenate([[float(t)], q, v, a, lam, p, u, wv])
        out = np.zeros(size)
        if nonzero:
            out[nonzero] = np.asarray(f(x), dtype=float)
        return out

    return evaluate


def _vector(x, k: int, label: str, where: str) -> np.ndarray:
    """x as a float vector of length k."""
    x = np.asarray(x, dtype=float).reshape(-1)
    if x.shape[0] != k:
        raise InputError(f"{where}: {label} has {x.shape[0]} entries, expected {k}")
    return x


def _noise_ratio(R: np.ndarray, nu: np.ndarray) -> float:
    """max_r |R_r| / nu_r (tests (b) and (c) of newton.pxd)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.max(np.where(nu > 0, np.abs(R) / nu, np.where(R == 0, 0.0, np.inf)),
                            initial=0.0))


def _extrapolate(Y: np.ndarray, i: int, order: int) -> np.ndarray:
    """Row i+1 of Y extrapolated by the polynomial of the given order through rows i, i-1,
    i-2 (newton.pxd)."""
    if order >= 2:
        return 3.0 * Y[i] - 3.0 * Y[i - 1] + Y[i - 2]
    return 2.0 * Y[i] - Y[i - 1] if order == 1 else Y[i].copy()


class Scheme:
    """The coefficients of a scheme of the HHT family (the table of
    symdae/simulation/core/scheme.pxd): qhat = q + h v + ca w + cq a, vhat = v + cv1 w + cvq a,
    q_{i+1} = qhat + s a_{i+1}, v_{i+1} = vhat + gh a_{i+1}, w_{i+1} = ry a_{i+1} + rp a_i,
    R_dyn = cM Ma + g - ap g_i, R_con = C / s."""

    def __init__(self, h: float, alpha: float, name: str):
        beta, gam, f = 0.25 * (1.0 - alpha) ** 2, 0.5 - alpha, 1.0 + alpha
        self.h, self.name = h, name
        self.ca, self.cv1 = h * h * (0.5 - beta), h * (1.0 - gam)
        if name == "hht-ga":
            self.cM, self.ap, self.s, self.gh = 1.0, 0.0, f * beta * h * h, f * gam * h
            self.cq, self.cvq, self.ry, self.rp = -alpha * beta * h * h, -alpha * gam * h, f, -alpha
        else:
            self.cM, self.ap, self.s, self.gh = 1.0 / f, alpha / f, beta * h * h, gam * h
            self.cq, self.cvq, self.ry, self.rp = 0.0, 0.0, 1.0, 0.0
        self.kw = np.array([self.cM, self.s, self.gh])

    @classmethod
    def of(cls, grid: Grid) -> Scheme:
        return cls(grid.h, grid.alpha, grid.scheme)


class NumpyBackend:
    """Lambdified kernels of a DerivedSystem plus the sweeps in NumPy (see ``backends.base``)."""

    name = "numpy"

    def __init__(self, derived: DerivedSystem):
        self.derived = derived
        self.sizes = Sizes.of(derived.sizes)
        # each kernel's expressions are built when a sweep first asks for it: the design
        # sweep's second derivatives (state_hvp) cost most of a large model's set up and
        # most runs never need them
        # terms that jump: only then a switch search (newton.pxd, symdae_model.jumps)
        self._jumps = has_jumps(list(derived.Ma) + list(derived.g) + list(derived.C))
        self._fns: dict = {}

    # ------------------------------------------------------------------ kernels
    def _fn(self, name: str):
        fn = self._fns.get(name)
        if fn is None:
            exprs = kernel_expressions(self.derived, names=[name])[name][0]
            fn = self._fns[name] = lambdify_flat(self.derived, exprs,
                                                 weight_size(name, self.sizes))
        return fn

    def evaluate(self, name: str, t, q, v, a, lam, p, u, w=None) -> np.ndarray:
        kernel(name)
        return self.at(t, q, v, a, lam, p, u, where=f"kernel {name}")(name, w)

    def at(self, t, q, v, a, lam, p, u, where: str = "kernel evaluation"):
        """Kernels at one state, checked once (backends.base)."""
        sz = self.sizes
        state = [_vector(x, k, label, where)
                 for x, k, label in state_fields(sz, q, v, a, lam, p, u)]
        t = float(t)

        def at_state(name: str, w=None) -> np.ndarray:
            if kernel(name).internal:
                return np.zeros(0)     # no hoisted time terms here
            wv = _vector(() if w is None else w, weight_size(name, sz), "w", f"kernel {name}")
            return self._fn(name)(t, *state, wv)
        return at_state

    def model_start(self, t0, p, u):
        """The model's (q0, v0) in p, t0, u (backends.base)."""
        sz = self.sizes
        q0v0 = split("initial_state", self.evaluate("initial_state", t0, np.zeros(sz.n),
                                                    np.zeros(sz.n), np.zeros(sz.n),
                                                    np.zeros(sz.m), p, u), sz)
        return q0v0["q0"], q0v0["v0"]

    def consistent_start(self, t0, q, v, p, u, tol: float) -> None:
        """None: the general path of symdae/simulation/initial.py computes the start."""
        return None

    def initial_adjoint(self, t0, q, v, a, lam, p, u, xbar, from_model) -> None:
        """None: symdae/simulation/initial.py computes the initial-state term."""
        return None

    def initial_tangent(self, t0, q, v, a, lam, p, u, D, from_model) -> None:
        """None: symdae/simulation/initial.py computes the initial sensitivities."""
        return None

    def unchecked(self, name, t, q, v, a, lam, p, u, w=None):
        """Kernel ``name`` at one state, without :meth:`evaluate`'s checks of the arguments:
        for the sweeps (this module's and the design sweep's), whose arrays are checked once
        where they enter."""
        return self._fn(name)(t, q, v, a, lam, p, u, w)

    def output_jacobians(self, t, x, p, u):
        """(ds/dx (n_s x n_x), ds/dp (n_s x n_p)) at one state."""
        S = split("output_jacobians", self.unchecked("output_jacobians", t, *self._split_x(x), p, u),
                  self.sizes)
        return S["Sx"], S["Sp"]

    def _split_x(self, x):
        n = self.sizes.n
        return x[:n], x[n:2 * n], x[2 * n:3 * n], x[3 * n:]

    # ------------------------------------------------------------------ forward
    def forward(self, grid: Grid, p, U, x0, rtol: float, max_iter: int,
                store: bool, restart: Restart | None = None,
                time_terms: bool = False, continues: bool = False) -> ForwardResult:
        # time_terms: nothing to keep (this backend evaluates the expressions whole)
        sz, c, N = self.sizes, Scheme.of(grid), grid.N
        n, m, nm = sz.n, sz.m, sz.nm
        p = np.asarray(p, dtype=float)
        first = 0 if restart is None else restart.history.shape[0]
        rows = first + N + 1
        Q, V, A, W = (np.empty((rows, n)) for _ in range(4))
        L = np.empty((rows, m))
        S = np.zeros((rows, sz.n_s))
        Q[first], V[first], A[first], L[first] = x0[:4]
        W[first] = start_w(x0)
        noise = None
        if restart is not None:
            A[:first], L[:first] = restart.history[:, :n], restart.history[:, n:]
            if restart.noise[2 * nm]:
                noise = (restart.noise[:nm].copy(), restart.noise[nm:2 * nm].copy())
        Uf = np.empty((rows, sz.n_u))
        Uf[first:] = U
        t = grid.t0 + grid.h * (grid.i0 - first + np.arange(rows))
        # full Newton from the extrapolated start: no restarts (newton_restarts stays 0)
        counts = dict(steps=0, newton_iterations=0, factorizations=0, jacobian_refreshes=0)
        Ks = np.empty((rows, nm, nm)) if store else None

        def settle(i, res):
            K = self.unchecked("newton", t[i], Q[i], V[i], A[i], L[i], p, Uf[i], c.kw)
            counts["factorizations"] += 1
            S[i] = self.unchecked("outputs", t[i], Q[i], V[i], A[i], L[i], p, Uf[i])
            if store:
                Ks[i] = K.reshape(nm, nm)
            return res[n:2 * n].copy()

        def result(rep, saved=None, end=None):
            part = slice(first, None)
            return ForwardResult(grid, p, Uf[part], Q[part], V[part], A[part], L[part],
                                 S[part], rep, None if saved is None else saved[part], end,
                                 w=W[part])

        res = self.unchecked("residual", t[first], Q[first], V[first], A[first], L[first], p,
                      Uf[first])
        gprev = settle(first, res)
        for i in range(first, first + N):
            qh = Q[i] + c.h * V[i] + c.ca * W[i] + c.cq * A[i]
            vh = V[i] + c.cv1 * W[i] + c.cvq * A[i]
            base = (np.abs(Q[i]) + c.h * np.abs(V[i]) + np.abs(c.ca * W[i]) + np.abs(c.cq * A[i]),
                    np.abs(V[i]) + np.abs(c.cv1 * W[i]) + np.abs(c.cvq * A[i]))  # their terms
            order = min(grid.i0 - first + i, 2)
            y = np.concatenate([_extrapolate(A, i, order), _extrapolate(L, i, order)])
            out = self._newton(t[i + 1], qh, vh, base, y, gprev, noise, p, Uf[i + 1], c,
                               rtol, max_iter, counts)
            if isinstance(out, SweepReport):
                step = grid.i0 - first + i + 1
                return result(SweepReport(out.status, Counters(**counts), float(t[i + 1]),
                                          step, out.iterations, out.residual_norm,
                                          out.first_residual_norm, out.noise_ratio))
            y, res, noise = out
            Q[i + 1], V[i + 1] = qh + c.s * y[:n], vh + c.gh * y[:n]
            A[i + 1], L[i + 1] = y[:n], y[n:]
            W[i + 1] = c.ry * A[i + 1] + c.rp * A[i]
            counts["steps"] += 1
            gprev = settle(i + 1, res)
        carry = np.zeros(2 * nm + 1)
        if noise is not None:
            carry[:nm], carry[nm:2 * nm], carry[2 * nm] = noise[0], noise[1], 1.0
        k = min(grid.i0 + N, 2)
        r = first + N
        end = Restart(np.hstack([A[r - k:r], L[r - k:r]]), carry) if continues else None
        return result(SweepReport("ok", Counters(**counts)), Ks, end)

    def _noise(self, t, q, v, a, lam, p, u, c, base, switch: float = 0.0):
        """(round-off level of each residual row, rounding of (a, lam) from q's rounding) at
        an iterate: newton.pxd, residual_noise."""
        n = q.shape[0]
        qs, vs = base[0] + c.s * np.abs(a), base[1] + c.gh * np.abs(a)
        mag = self.unchecked("residual_magnitude", t, q, v, a, lam, p, u,
                      np.concatenate([qs, vs, [switch]]))
        nu = np.concatenate([_EPS * (c.cM * mag[:n] + (1.0 + abs(c.ap)) * mag[n:2 * n]),
                             _EPS * mag[2 * n:] / c.s])
        fq = qs * _EPS / c.s
        if lam.size:     # the a-jitter constraint rows leave, seen by the dynamic rows
            K = self.unchecked("newton", t, q, v, a, lam, p, u, c.kw).reshape(n + lam.size, -1)
            touched = np.any(K[n:, :n] != 0, axis=0)
            nu[:n] += np.abs(K[:n, :n][:, touched]) @ fq[touched]
        nu = np.where(nu >= _ROUNDOFF_FLOOR, nu, _ROUNDOFF_FLOOR)
        return nu, np.concatenate([fq, np.abs(lam) * _EPS])

    def _residual(self, t1, qh, vh, y, gprev, p, u, c, counts):
        """(q, v, residual terms, R) at the iterate y of a step."""
        n = qh.shape[0]
        qc, vc = qh + c.s * y[:n], vh + c.gh * y[:n]
        res = self.unchecked("residual", t1, qc, vc, y[:n], y[n:], p, u)
        counts["newton_iterations"] += 1
        R = np.concatenate([c.cM * res[:n] + res[n:2 * n] - c.ap * gprev, res[2 * n:] / c.s])
        return qc, vc, res, R

    def _newton(self, t1, qh, vh, base, y, gprev, noise, p, u, c, rtol, max_iter, counts):
        """Full Newton for one step: (y, residual terms, round-off levels) or a failure
        report. The stopping tests (a), (b), (c) of newton.pxd, the round-off level taken where
        that takes it; every iteration has a fresh matrix."""
        n = qh.shape[0]
        first, ratio_prev, norm_prev, dy_prev, searched = None, np.inf, np.inf, None, False
        for j in range(max_iter):
            qc, vc, res, R = self._residual(t1, qh, vh, y, gprev, p, u, c, counts)
            if j == 1 or noise is None:
                noise = self._noise(t1, qc, vc, y[:n], y[n:], p, u, c, base)
            nu, fq = noise
            rnorm = float(np.max(np.abs(R), initial=0.0))
            first = rnorm if first is None else first
            ratio = _noise_ratio(R, nu)
            if not np.all(np.isfinite(R)):
                return SweepReport("not_finite", iterations=j + 1, residual_norm=rnorm,
                                   first_residual_norm=first, noise_ratio=ratio)
            if ratio <= NOISE_FACTOR or (j > 0 and ratio > 0.5 * ratio_prev
                                         and ratio <= STALL_FACTOR):
                return y, res, noise
            ratio_prev = ratio
            K = self.unchecked("newton", t1, qc, vc, y[:n], y[n:], p, u, c.kw).reshape(R.size, -1)
            counts["factorizations"] += 1
            counts["jacobian_refreshes"] += 1
            try:
                dy = -np.linalg.solve(K, R)
            except np.linalg.LinAlgError:
                return SweepReport("newton_failed", iterations=j + 1, residual_norm=rnorm,
                                   first_residual_norm=first, noise_ratio=ratio)
            ymax = np.abs(y)
            floor = np.concatenate([FLOOR_FACTOR * (fq[:n] + _EPS * ymax[:n].max(initial=0.0)),
                                    np.full(y.size - n,
                                            FLOOR_FACTOR * _EPS * ymax[n:].max(initial=0.0))])
            wk = rtol * ymax + floor
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.where(wk > 0, np.abs(dy) / wk, np.where(dy == 0, 0.0, np.inf))
            norm = rel.max(initial=0.0)
            if norm <= 1.0:
                return y, res, noise
            if self._jumps and not searched and j > 1 and norm >= 0.5 * norm_prev \
                    and ratio > STALL_FACTOR and float(dy @ dy_prev) < 0.0:
                # reversed, not shrinking: the step's root is on a switch (newton.pxd)
                out = self._switch_search(t1, qh, vh, base, y - dy_prev, y, p, u, c, counts,
                                          first, gprev)
                if not (isinstance(out, SweepReport) and out.status == "newton_failed"):
                    return out
                searched, noise = True, None     # no switching point: Newton goes on
                continue
            y, dy_prev, norm_prev = y + dy, dy, norm
        return SweepReport("newton_failed", iterations=max_iter, residual_norm=rnorm,
                           first_residual_norm=first, noise_ratio=ratio)

    def _switch_search(self, t1, qh, vh, base, lo, hi, p, u, c, counts, first, gprev):
        """newton.pxd, switch_search: bisect [lo, hi] for the switching point, accept it by
        test (b); a midpoint is on lo's side when its Newton correction points towards hi."""
        n = qh.shape[0]
        for _ in range(SWITCH_HALVINGS):
            y = 0.5 * (lo + hi)
            qc, vc, res, R = self._residual(t1, qh, vh, y, gprev, p, u, c, counts)
            noise = self._noise(t1, qc, vc, y[:n], y[n:], p, u, c, base, 1.0)
            rnorm = float(np.max(np.abs(R), initial=0.0))
            ratio = _noise_ratio(R, noise[0])
            if not np.all(np.isfinite(R)):
                return SweepReport("not_finite", iterations=SWITCH_HALVINGS,
                                   residual_norm=rnorm, first_residual_norm=first,
                                   noise_ratio=ratio)
            if ratio <= NOISE_FACTOR:
                return y, res, None     # a switch's round-off level holds only on it
            K = self.unchecked("newton", t1, qc, vc, y[:n], y[n:], p, u, c.kw).reshape(R.size, -1)
            if float(-np.linalg.solve(K, R) @ (hi - lo)) > 0.0:
                lo = y
            else:
                hi = y
        return SweepReport("newton_failed", iterations=SWITCH_HALVINGS, residual_norm=rnorm,
                           first_residual_norm=first, noise_ratio=ratio)

    # ------------------------------------------------------------------ derivative sweeps
    def _at(self, fwd: ForwardResult, i: int) -> StateArgs:
        g = fwd.grid
        return (g.t0 + (g.i0 + i) * g.h, fwd.q[i], fwd.v[i], fwd.a[i], fwd.lam[i], fwd.p,
                fwd.U[i])

    def _blocks(self, fwd: ForwardResult, i: int, c: Scheme):
        """Dense blocks at state i: jacobians, param_jacobians, the Newton matrix."""
        sz, st = self.sizes, self._at(fwd, i)
        J = split("jacobians", self.unchecked("jacobians", *st), sz)
        P = split("param_jacobians", self.unchecked("param_jacobians", *st), sz)
        if fwd.saved is not None:
            K = fwd.saved[i]
        else:
            K = self.unchecked("newton", *st, c.kw).reshape(sz.nm, sz.nm)
        return J, P, K

    def tangent(self, fwd: ForwardResult, D: np.ndarray, dx0,
                states: bool = True) -> TangentArrays:
        sz, g = self.sizes, fwd.grid
        c, n, N, nd = Scheme.of(g), sz.n, g.N, D.shape[1]
        dQ, dV, dA, dW = (np.zeros((N + 1, nd, n)) for _ in range(4))
        dL = np.zeros((N + 1, nd, sz.m))
        dS = np.zeros((N + 1, nd, sz.n_s))
        for X, x0 in zip((dQ, dV, dA, dL), dx0):
            X[0] = x0
        dW[0] = start_w(dx0)

        def outputs(i):
            t, q, v, a, lam, p, u = self._at(fwd, i)
            Sx, Sp = self.output_jacobians(t, np.concatenate([q, v, a, lam]), p, u)
            dx = np.concatenate([dQ[i], dV[i], dA[i], dL[i]], axis=1)     # (nd, nx)
            dS[i] = dx @ Sx.T + (Sp @ D).T

        outputs(0)
        J0, P0, _ = self._blocks(fwd, 0, c)
        for i in range(N):
            J1, P1, K1 = self._blocks(fwd, i + 1, c)
            qh = dQ[i] + c.h * dV[i] + c.ca * dW[i] + c.cq * dA[i]          # (nd, n)
            vh = dV[i] + c.cv1 * dW[i] + c.cvq * dA[i]
            dyn = (qh @ (c.cM * J1["JM"] + J1["JG"]).T + vh @ J1["GV"].T
                   - c.ap * (dQ[i] @ J0["JG"].T + dV[i] @ J0["GV"].T + dL[i] @ J0["Cq"])
                   + ((c.cM * P1["PM"] + P1["PG"] - c.ap * P0["PG"]) @ D).T)
            con = (qh @ J1["Cq"].T + (P1["PC"] @ D).T) / c.s
            r = np.linalg.solve(K1, np.concatenate([dyn, con], axis=1).T).T
            dA[i + 1], dL[i + 1] = -r[:, :n], -r[:, n:]
            dQ[i + 1], dV[i + 1] = qh - c.s * r[:, :n], vh - c.gh * r[:, :n]
            dW[i + 1] = c.ry * dA[i + 1] + c.rp * dA[i]
            outputs(i + 1)
            J0, P0 = J1, P1
        keep = slice(None) if states else slice(N, N + 1)
        return TangentArrays(dQ[keep], dV[keep], dA[keep], dL[keep], dS, SweepReport("ok"),
                             dW[keep])

    def adjoint(self, fwd: ForwardResult, dPhi: np.ndarray, carry=None, last: bool = True,
                first: bool = True) -> AdjointResult:
        sz, g = self.sizes, fwd.grid
        c, n, N = Scheme.of(g), sz.n, g.N
        grad = np.zeros(sz.n_p) if last else np.array(carry[sz.nx + 2 * n:])

        def source(i):
            t, q, v, a, lam, p, u = self._at(fwd, i)
            Sx, Sp = self.output_jacobians(t, np.concatenate([q, v, a, lam]), p, u)
            grad[:] += Sp.T @ dPhi[i]
            return Sx.T @ dPhi[i]

        if last:
            xb, wb, rd_next = source(N), np.zeros(n), np.zeros(n)
        else:
            xb, wb = np.array(carry[:sz.nx]), np.array(carry[sz.nx:sz.nx + n])
            rd_next = np.array(carry[sz.nx + n:sz.nx + 2 * n])
        J1, P1, K1 = self._blocks(fwd, N, c)
        for i in range(N - 1, -1, -1):
            qb, vb, ab, lb = self._split_x(xb)
            mu = np.concatenate([ab + c.ry * wb + c.s * qb + c.gh * vb, lb])
            r = -np.linalg.solve(K1.T, mu)
            rd, rc = r[:n], r[n:]
            qhb = qb + (c.cM * J1["JM"] + J1["JG"]).T @ rd + J1["Cq"].T @ rc / c.s
            vhb = vb + J1["GV"].T @ rd
            grad += (c.cM * P1["PM"].T @ rd + P1["PG"].T @ (rd - c.ap * rd_next)
                     + P1["PC"].T @ rc / c.s)
            rd_next = rd
            J0, P0, K0 = self._blocks(fwd, i, c)
            xb = np.concatenate([qhb - c.ap * J0["JG"].T @ rd,
                                 c.h * qhb + vhb - c.ap * J0["GV"].T @ rd,
                                 c.cq * qhb + c.cvq * vhb + c.rp * wb,
                                 -c.ap * J0["Cq"] @ rd]) + source(i)
            wb = c.ca * qhb + c.cv1 * vhb
            J1, P1, K1 = J0, P0, K0
        if first and g.i0 + N > 0:
            grad += -c.ap * P1["PG"].T @ rd_next
        if first:      # w_0 = a_0: one adjoint for both
            xb[2 * n:3 * n] += wb
            wb = np.zeros(n)
        return AdjointResult(grad, xb, np.concatenate([xb, wb, rd_next, grad]),
                             SweepReport("ok"))
