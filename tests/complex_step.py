"""Complex-step reference for design gradients: an independent HHT forward and tangent sweep in
complex arithmetic, so that Im Psi(U + i eps dU) / eps is the directional derivative of the
discrete Psi to round-off (no subtraction, any eps).

Independent of what it checks: it uses only the first-order expressions of the DerivedSystem
(residual, Newton matrix, dense Jacobian blocks, output Jacobians), lambdified here for complex
arguments, full Newton iterated to convergence (the imaginary part converges with the real one),
and the tangent recursion written from the scheme's equations. Neither the second-order kernels
nor the reverse sweeps are used.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from symdae.model.derivation import derive
from symdae.model.kernels import Sizes, kernel_expressions, split, weight_size

_ARRAYS = ("q", "v", "a", "lam", "p", "u")


def _lambdify(ds, exprs, n_w=0):
    S = ds.symbols
    wsyms = [sp.Symbol(f"w[{i}]", real=True) for i in range(n_w)]
    slots = [S.t] + [s for arr in _ARRAYS for s in getattr(S, arr)] + wsyms
    X = sp.IndexedBase("X")
    rep = {s: X[i] for i, s in enumerate(slots)}
    exprs = [sp.sympify(e) for e in exprs]
    nonzero = [i for i, e in enumerate(exprs) if e != 0]
    f = sp.lambdify([X], [exprs[i].xreplace(rep) for i in nonzero], modules="numpy")
    size = len(exprs)

    def evaluate(t, q, v, a, lam, p, u, w=()):
        x = np.concatenate([[t], q, v, a, lam, p, u, w]).astype(complex)
        out = np.zeros(size, dtype=complex)
        if nonzero:
            out[nonzero] = np.asarray(f(x), dtype=complex)
        return out

    return evaluate


class ComplexSweeps:
    """Forward + tangent HHT sweeps of ``model`` in complex arithmetic."""

    def __init__(self, model):
        ds = derive(model)
        self.sizes = Sizes.of(ds.sizes)
        ex = kernel_expressions(ds)
        self.f = {name: _lambdify(ds, ex[name][0], weight_size(name, self.sizes))
                  for name in ("residual", "newton", "jacobians", "param_jacobians",
                               "outputs")}
        self.out_jac = _lambdify(ds, list(ds.Sx) + list(ds.Sp))

    def run(self, t, alpha, p, U, x0, dx0, D, scheme="hht-paper"):
        """(outputs s (N+1, n_s), states x (N+1, nx), S (N+1, n_s, nd)) for complex U.

        x0 = (q0, v0, a0, lam0) and dx0 = (dq0, dv0, da0, dlam0) (each (size, nd)) are the
        real initial state and sensitivities (U_0 is not perturbed). ``scheme``: hht-paper
        (eq. 15: a is the Newmark acceleration) or hht-ga (the equations of motion at t_{i+1}
        for a, the Newmark formulas on w_{i+1} = (1 + alpha) a_{i+1} - alpha a_i, w_0 = a_0)."""
        sz = self.sizes
        n, m, N, h = sz.n, sz.m, t.size - 1, t[1] - t[0]
        beta, gam = 0.25 * (1 - alpha) ** 2, 0.5 - alpha
        ga = scheme == "hht-ga"
        # q_{i+1} = q_i + h v_i + h^2 ((1/2 - beta) w_i + beta w_{i+1}), v likewise; with
        # w_{i+1} = f a_{i+1} + e a_i (hht-paper: f = 1, e = 0, w = a)
        f, e = (1 + alpha, -alpha) if ga else (1.0, 0.0)
        cM, ap = (1.0, 0.0) if ga else (1 / (1 + alpha), alpha / (1 + alpha))
        s, gh = f * beta * h * h, f * gam * h
        ca, cv1 = h * h * (0.5 - beta), h * (1 - gam)
        cq, cvq = e * beta * h * h, e * gam * h
        kw = np.array([cM, s, gh])
        X = np.zeros((N + 1, sz.nx), dtype=complex)
        X[0] = np.concatenate(x0)
        W = np.zeros((N + 1, n), dtype=complex)
        W[0] = x0[2]

        def parts(x):
            return x[:n], x[n:2 * n], x[2 * n:3 * n], x[3 * n:]

        for i in range(N):
            q, v, a, lam = parts(X[i])
            g0 = self.f["residual"](t[i], q, v, a, lam, p, U[i])[n:2 * n]
            qh, vh = q + h * v + ca * W[i] + cq * a, v + cv1 * W[i] + cvq * a
            y = np.concatenate([a, lam])
            done = 0
            for _ in range(60):
                qc, vc = qh + s * y[:n], vh + gh * y[:n]
                args = (t[i + 1], qc, vc, y[:n], y[n:], p, U[i + 1])
                res = self.f["residual"](*args)
                R = np.concatenate([cM * res[:n] + res[n:2 * n] - ap * g0, res[2 * n:] / s])
                K = self.f["newton"](*args, kw).reshape(n + m, n + m)
                dy = -np.linalg.solve(K, R)
                y = y + dy
                small = (np.max(np.abs(dy.real)) <= 1e-15 * max(np.max(np.abs(y.real)), 1e-300)
                         and np.max(np.abs(dy.imag)) <= 1e-15 * max(np.max(np.abs(y.imag)),
                                                                    1e-300))
                done = done + 1 if small else 0
                if done >= 2:
                    break
            X[i + 1] = np.concatenate([qh + s * y[:n], vh + gh * y[:n], y])
            W[i + 1] = f * y[:n] + e * a
        # tangent
        nd = D.shape[1]
        Sig = np.zeros((N + 1, nd, sz.nx), dtype=complex)
        Sig[0] = np.concatenate([np.asarray(d).T for d in dx0], axis=1)
        dW = np.zeros((N + 1, nd, n), dtype=complex)
        dW[0] = Sig[0][:, 2 * n:3 * n]

        def blocks(i):
            st = (t[i], *parts(X[i]), p, U[i])
            J = split("jacobians", self.f["jacobians"](*st), sz)
            P = split("param_jacobians", self.f["param_jacobians"](*st), sz)
            K = self.f["newton"](*st, kw).reshape(n + m, n + m)
            return J, P, K

        J0, P0, _ = blocks(0)
        for i in range(N):
            J1, P1, K1 = blocks(i + 1)
            dq, dv, da, dl = Sig[i][:, :n], Sig[i][:, n:2 * n], Sig[i][:, 2 * n:3 * n], \
                Sig[i][:, 3 * n:]
            qh, vh = dq + h * dv + ca * dW[i] + cq * da, dv + cv1 * dW[i] + cvq * da
            dyn = (qh @ (cM * J1["JM"] + J1["JG"]).T + vh @ J1["GV"].T
                   - ap * (dq @ J0["JG"].T + dv @ J0["GV"].T + dl @ J0["Cq"])
                   + ((cM * P1["PM"] + P1["PG"] - ap * P0["PG"]) @ D).T)
            con = (qh @ J1["Cq"].T + (P1["PC"] @ D).T) / s
            r = np.linalg.solve(K1, np.concatenate([dyn, con], axis=1).T).T
            Sig[i + 1] = np.concatenate([qh - s * r[:, :n], vh - gh * r[:, :n], -r], axis=1)
            dW[i + 1] = -f * r[:, :n] + e * da
            J0, P0 = J1, P1
        s_out = np.zeros((N + 1, sz.n_s), dtype=complex)
        S = np.zeros((N + 1, sz.n_s, nd), dtype=complex)
        for i in range(N + 1):
            st = (t[i], *parts(X[i]), p, U[i])
            s_out[i] = self.f["outputs"](*st)
            flat = self.out_jac(*st)
            Sx = flat[:sz.n_s * sz.nx].reshape(sz.n_s, sz.nx)
            Sp = flat[sz.n_s * sz.nx:].reshape(sz.n_s, sz.n_p)
            S[i] = Sx @ Sig[i].T + Sp @ D
        return s_out, X, S


def criterion_value(name: str, F):
    """Phi(F) written so that it is complex-analytic (for the complex step)."""
    if name == "trace":
        return -np.trace(F)
    if name == "A":
        return np.trace(np.linalg.inv(F))
    if name == "D":
        return -np.log(np.linalg.det(F))
    lam = np.linalg.eigvals(F)
    lam = lam[np.argsort(lam.real)]
    if name == "E":
        return -lam[0]
    return np.log(lam[-1] / lam[0])
