"""The reverse-over-tangent sweep in NumPy: the test oracle of the compiled design sweep.

Written independently of ``symdae/simulation/core/design_sweep.pyx``: dense Jacobian blocks (the ``jacobians``
kernel, the Newton matrices, the output and input Jacobians of the DerivedSystem), all
directions at once, ``numpy.linalg.solve`` with K^T. Only the second-order term comes from the
generated ``state_hvp`` kernel (lambdified); the complex-step tests check that kernel against
the first-order blocks. Contract: :mod:`symdae.simulation.backends.design`.
"""
from __future__ import annotations

import numpy as np

from ...model.kernels import pack_weights, split
from .base import ForwardResult, TangentArrays
from .numpy import NumpyBackend, Scheme, StateArgs, lambdify_flat

__all__ = ["design_adjoint_numpy"]


def _input_jacobians(backend: NumpyBackend):
    """f(t, x, p, u) -> (d(Ma)/du, dg/du, dC/du, ds/du), dense, from the DerivedSystem."""
    ds, sz = backend.derived, backend.sizes
    fn = lambdify_flat(ds, list(ds.UM) + list(ds.UG) + list(ds.UC) + list(ds.Su))
    shapes = [(sz.n, sz.n_u), (sz.n, sz.n_u), (sz.m, sz.n_u), (sz.n_s, sz.n_u)]

    def evaluate(t, q, v, a, lam, p, u):
        flat, out, k = fn(t, q, v, a, lam, p, u), [], 0
        for shape in shapes:
            size = shape[0] * shape[1]
            out.append(flat[k:k + size].reshape(shape))
            k += size
        return out

    return evaluate


def design_adjoint_numpy(backend: NumpyBackend, fwd: ForwardResult, D: np.ndarray,
                         tangents: TangentArrays, dPsi_S: np.ndarray, dPsi_s: np.ndarray,
                         dPsi_x: np.ndarray) -> np.ndarray:
    """ubar (N+1, n_u): dPsi/dU_i for i = 1..N (see symdae.simulation.backends.design)."""
    sz, g = backend.sizes, fwd.grid
    c, n, N, nd = Scheme.of(g), sz.n, g.N, D.shape[1]
    nx = sz.nx
    ujac = _input_jacobians(backend)
    sig = np.concatenate([tangents.dq, tangents.dv, tangents.da, tangents.dlam], axis=2)
    ubar = np.zeros((N + 1, sz.n_u))

    def at(i: int) -> StateArgs:
        return (g.t0 + i * g.h, fwd.q[i], fwd.v[i], fwd.a[i], fwd.lam[i], fwd.p, fwd.U[i])

    def blocks(i):
        J = split("jacobians", backend.unchecked("jacobians", *at(i)), sz)
        if fwd.saved is not None:
            K = fwd.saved[i]
        else:
            K = backend.unchecked("newton", *at(i), c.kw).reshape(sz.nm, sz.nm)
        return J, K

    def sx(i):
        t, q, v, a, lam, p, u = at(i)
        return backend.output_jacobians(t, np.concatenate([q, v, a, lam]), p, u)[0]

    def reverse(Xb, Wb, J1, K1, J0):
        """Xb (k, nx), Wb (k, n): adjoints of x_i and of its algorithmic acceleration ->
        (the same of x_{i-1}, multipliers R (k, nm))."""
        qb, vb, ab, lb = Xb[:, :n], Xb[:, n:2 * n], Xb[:, 2 * n:3 * n], Xb[:, 3 * n:]
        mu = np.concatenate([ab + c.ry * Wb + c.s * qb + c.gh * vb, lb], axis=1)
        R = -np.linalg.solve(K1.T, mu.T).T
        rd, rc = R[:, :n], R[:, n:]
        qhb = qb + rd @ (c.cM * J1["JM"] + J1["JG"]) + rc @ J1["Cq"] / c.s
        vhb = vb + rd @ J1["GV"]
        prev = np.concatenate([qhb - c.ap * rd @ J0["JG"],
                               c.h * qhb + vhb - c.ap * rd @ J0["GV"],
                               c.cq * qhb + c.cvq * vhb + c.rp * Wb,
                               -c.ap * rd @ J0["Cq"].T], axis=1)
        return prev, c.ca * qhb + c.cv1 * vhb, R

    Sx = sx(N)
    Xr = np.einsum("kj,kx->jx", dPsi_S[N], Sx)          # (nd, nx)
    Xp = dPsi_x[N] + Sx.T @ dPsi_s[N]
    rd_r, rd_p = np.zeros((nd, n)), np.zeros(n)
    Wr, Wp = np.zeros((nd, n)), np.zeros((1, n))
    J1, K1 = blocks(N)
    for i in range(N, 0, -1):
        J0, K0 = blocks(i - 1)
        Xr, Wr, Rr = reverse(Xr, Wr, J1, K1, J0)
        hvp = np.zeros(nx + sz.n_u)
        for j in range(nd):
            w = pack_weights("state_hvp", sz, wM=c.cM * Rr[j, :n],
                             wG=Rr[j, :n] - c.ap * rd_r[j], wC=Rr[j, n:] / c.s,
                             wS=dPsi_S[i, :, j], dx=sig[i, j], dp=D[:, j])
            hvp += backend.unchecked("state_hvp", *at(i), w)
        rd_r = Rr[:, :n]
        Xp, Wp, Rp = reverse((Xp + hvp[:nx])[None, :], Wp, J1, K1, J0)
        Xp, rp = Xp[0], Rp[0]
        UM, UG, UC, Su = ujac(*at(i))
        ubar[i] = (hvp[nx:] + UM.T @ (c.cM * rp[:n]) + UG.T @ (rp[:n] - c.ap * rd_p)
                   + UC.T @ rp[n:] / c.s + Su.T @ dPsi_s[i])
        rd_p = rp[:n]
        Sx = sx(i - 1)
        Xr = Xr + np.einsum("kj,kx->jx", dPsi_S[i - 1], Sx)
        Xp = Xp + dPsi_x[i - 1] + Sx.T @ dPsi_s[i - 1]
        J1, K1 = J0, K0
    return ubar
