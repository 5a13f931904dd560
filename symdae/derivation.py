"""Exact derivation: from a :class:`~symdae.model.Model` to every matrix the HHT sweeps need.

Pure SymPy, no code generation. All expressions are in the internal kernel symbols
(``q[i]``, ``v[i]``, ``a[i]``, ``lam[k]``, ``p[j]``, ``u[l]``, time ``t``) and weight
symbols ``w[i]`` for kernels that take run-time coefficients.

Notation (n coordinates, m constraints, n_p parameters, n_s outputs):

    Ma  = M(q) a                 g  = C_q^T lam - Q(q, v, t, p, u)
    J_M = d(M a)/dq              J_G = dg/dq = J_C - J_Q        G_V = dg/dv = -J_V
    P_M = d(M a)/dp              P_G = dg/dp                    P_C = dC/dp
    cdot  = C_q v + C_t          gamma = d(cdot)/dq v + d(cdot)/dt   (so C'' = C_q a + gamma)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from .errors import ModelError
from .model import KernelSymbols, Model

__all__ = ["DerivedSystem", "derive", "kernel_table", "KERNEL_NAMES"]


def _weights(k: int) -> tuple:
    return tuple(sp.Symbol(f"w[{i}]", real=True) for i in range(k))


@dataclass(frozen=True)
class DerivedSystem:
    """Exact SymPy expressions of one model, in kernel symbols. Matrices are ImmutableMatrix."""

    name: str
    symbols: KernelSymbols
    w: tuple
    M: sp.ImmutableMatrix
    Q: sp.ImmutableMatrix
    C: sp.ImmutableMatrix
    Cq: sp.ImmutableMatrix
    Ma: sp.ImmutableMatrix
    g: sp.ImmutableMatrix
    JM: sp.ImmutableMatrix
    JG: sp.ImmutableMatrix
    GV: sp.ImmutableMatrix
    PM: sp.ImmutableMatrix
    PG: sp.ImmutableMatrix
    PC: sp.ImmutableMatrix
    s: sp.ImmutableMatrix
    Sx: sp.ImmutableMatrix
    Sp: sp.ImmutableMatrix
    cdot: sp.ImmutableMatrix
    gamma: sp.ImmutableMatrix
    Rc_q: sp.ImmutableMatrix
    gamma_v: sp.ImmutableMatrix
    Rc_p: sp.ImmutableMatrix
    q0: sp.ImmutableMatrix
    v0: sp.ImmutableMatrix
    q0_p: sp.ImmutableMatrix
    v0_p: sp.ImmutableMatrix
    sizes: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.sizes["n"]

    @property
    def m(self) -> int:
        return self.sizes["m"]

    def newton_matrix(self) -> sp.ImmutableMatrix:
        """The (n+m) x (n+m) Newton matrix of eq. (16) with run-time coefficients.

        w[0] = 1/(1+alpha), w[1] = beta h^2, w[2] = gamma h:
            [[w0 M + w1 (w0 J_M + J_G) + w2 G_V,  C_q^T],
             [C_q,                                 0   ]]
        With w = (1, 0, 0) it is the matrix of the consistent-initialisation system.
        """
        n, m = self.n, self.m
        c_m, c_q, c_v = self.w[:3]
        K = sp.zeros(n + m, n + m)
        for i in range(n):
            for j in range(n):
                K[i, j] = c_m * self.M[i, j] + c_q * (c_m * self.JM[i, j] + self.JG[i, j]) \
                    + c_v * self.GV[i, j]
            for k in range(m):
                K[i, n + k] = self.Cq[k, i]
                K[n + k, i] = self.Cq[k, i]
        return sp.ImmutableMatrix(K)

    def state_vjp(self) -> list:
        """w = (wM (n), wG (n), wC (m), wL (n)); out (+=) shaped like x = (q, v, a, lam):

        qbar += J_M^T wM + J_G^T wG + C_q^T wC,  vbar += G_V^T wG,  lbar += C_q wL (the a-part
        is never written). The adjoint sweep's products with the Jacobian blocks, structural
        zeros skipped.
        """
        n, m = self.n, self.m
        wM, wG = self.w[:n], self.w[n:2 * n]
        wC, wL = self.w[2 * n:2 * n + m], self.w[2 * n + m:3 * n + m]

        def dot(pairs):
            return sp.Add(*[w * e for w, e in pairs if e != 0])

        qbar = [dot([(wM[i], self.JM[i, j]) for i in range(n)]
                    + [(wG[i], self.JG[i, j]) for i in range(n)]
                    + [(wC[k], self.Cq[k, j]) for k in range(m)]) for j in range(n)]
        vbar = [dot([(wG[i], self.GV[i, j]) for i in range(n)]) for j in range(n)]
        lbar = [dot([(wL[j], self.Cq[k, j]) for j in range(n)]) for k in range(m)]
        return qbar + vbar + [sp.S.Zero] * n + lbar

    def output_vjp(self) -> list:
        """w = dPhi_i (n_s); out (+=) = [xbar (3n + m), pbar (n_p)] = w^T [ds/dx, ds/dp]."""
        ns = self.sizes["n_s"]
        w = self.w[:ns]
        out = []
        for M in (self.Sx, self.Sp):
            for c in range(M.shape[1]):
                out.append(sp.Add(*[w[r] * M[r, c] for r in range(ns) if M[r, c] != 0]))
        return out

    def param_vjp(self) -> list:
        """out[j] += wM . P_M[:, j] + wG . P_G[:, j] + wC . P_C[:, j], w = (wM, wG, wC)."""
        n, m = self.n, self.m
        wM, wG, wC = self.w[:n], self.w[n:2 * n], self.w[2 * n:2 * n + m]
        out = []
        for j in range(self.sizes["n_p"]):
            terms = [wM[i] * self.PM[i, j] for i in range(n) if self.PM[i, j] != 0]
            terms += [wG[i] * self.PG[i, j] for i in range(n) if self.PG[i, j] != 0]
            terms += [wC[k] * self.PC[k, j] for k in range(m) if self.PC[k, j] != 0]
            out.append(sp.Add(*terms))
        return out


def _imm(x) -> sp.ImmutableMatrix:
    return sp.ImmutableMatrix(x)


def _jac(vec: sp.MatrixBase, syms) -> sp.ImmutableMatrix:
    if len(syms) == 0 or vec.shape[0] == 0:
        return sp.ImmutableMatrix.zeros(vec.shape[0], len(syms))
    return _imm(vec.jacobian(list(syms)))


def derive(model: Model) -> DerivedSystem:
    """Derive every expression the kernels need, exactly. Deterministic for a given model."""
    S = model.symbols
    n, m, n_p, n_u = model.n, model.m, len(S.p), len(S.u)
    v, a, lam, p, t = sp.Matrix(S.v), sp.Matrix(S.a), sp.Matrix(S.lam), S.p, S.t

    forces = sp.Matrix([model.to_kernel(f) for f in model.forces])
    if model.lagrangian is not None:
        L = model.to_kernel(model.lagrangian)
        dL_dv = sp.Matrix([L.diff(vi) for vi in S.v])
        M = dL_dv.jacobian(list(S.v))
        if M.free_symbols & set(S.v):
            raise ModelError("the lagrangian is not quadratic in the velocities: its Hessian "
                             "with respect to them depends on velocities")
        dL_dq = sp.Matrix([L.diff(qi) for qi in S.q])
        Q = forces + dL_dq - dL_dv.jacobian(list(S.q)) * v - dL_dv.diff(t)
    else:
        M = sp.Matrix(model.to_kernel(model.mass_matrix))
        Q = forces

    C = sp.Matrix([model.to_kernel(c) for c in model.constraints]) if m else sp.zeros(0, 1)
    Cq = _jac(C, S.q) if m else sp.zeros(0, n)
    Ma = M * a
    g = (Cq.T * lam if m else sp.zeros(n, 1)) - Q
    JM, JG, GV = _jac(Ma, S.q), _jac(g, S.q), _jac(g, S.v)
    PM, PG, PC = _jac(Ma, p), _jac(g, p), _jac(C, p) if m else sp.zeros(0, n_p)

    s = sp.Matrix([model.to_kernel(e) for e in model.outputs.values()]) if model.outputs \
        else sp.zeros(0, 1)
    x_all = list(S.q) + list(S.v) + list(S.a) + list(S.lam)
    Sx = _jac(s, x_all) if model.outputs else sp.zeros(0, len(x_all))
    Sp = _jac(s, p) if model.outputs else sp.zeros(0, n_p)

    if m:
        cdot = Cq * v + C.diff(t)
        gamma = cdot.jacobian(list(S.q)) * v + cdot.diff(t)
        Rc = Cq * a + gamma
        Rc_q, gamma_v, Rc_p = _jac(Rc, S.q), _jac(gamma, S.v), _jac(Rc, p)
    else:
        cdot = gamma = sp.zeros(0, 1)
        Rc_q, gamma_v, Rc_p = sp.zeros(0, n), sp.zeros(0, n), sp.zeros(0, n_p)

    q0 = sp.Matrix([model.to_kernel(e) for e in model.initial_positions])
    v0 = sp.Matrix([model.to_kernel(e) for e in model.initial_velocities])

    sizes = dict(n=n, m=m, n_p=n_p, n_u=n_u, n_s=len(model.outputs))
    n_w = max(3, 3 * n + m, len(model.outputs))
    return DerivedSystem(
        name=model.name, symbols=S, w=_weights(n_w), M=_imm(M), Q=_imm(Q), C=_imm(C),
        Cq=_imm(Cq), Ma=_imm(Ma), g=_imm(g), JM=JM, JG=JG, GV=GV, PM=PM, PG=PG, PC=_imm(PC),
        s=_imm(s), Sx=_imm(Sx), Sp=_imm(Sp), cdot=_imm(cdot), gamma=_imm(gamma),
        Rc_q=_imm(Rc_q), gamma_v=_imm(gamma_v), Rc_p=_imm(Rc_p), q0=_imm(q0), v0=_imm(v0),
        q0_p=_jac(q0, p), v0_p=_jac(v0, p), sizes=sizes,
    )


# The order and layout of these kernels is the ABI shared with symdae/core/symdae_kernels.h.
KERNEL_NAMES = (
    "residual", "newton", "jacobians", "param_jacobians", "param_vjp", "state_vjp", "outputs",
    "output_jacobians", "output_vjp", "initial_state", "initial_state_jacobian",
    "constraint_velocity", "acceleration_constraint",
)


def _flat(*mats) -> list:
    out = []
    for M in mats:
        out.extend(list(M))  # row-major
    return out


def kernel_table(ds: DerivedSystem) -> dict:
    """Kernel name -> (flat list of output expressions, accumulate?) in the ABI layout."""
    table = {
        "residual": (_flat(ds.Ma, ds.g, ds.C), False),
        "newton": (_flat(ds.newton_matrix()), False),
        "jacobians": (_flat(ds.JM, ds.JG, ds.GV, ds.Cq), False),
        "param_jacobians": (_flat(ds.PM, ds.PG, ds.PC), False),
        "param_vjp": (ds.param_vjp(), True),
        "state_vjp": (ds.state_vjp(), True),
        "outputs": (_flat(ds.s), False),
        "output_jacobians": (_flat(ds.Sx, ds.Sp), False),
        "output_vjp": (ds.output_vjp(), True),
        "initial_state": (_flat(ds.q0, ds.v0), False),
        "initial_state_jacobian": (_flat(ds.q0_p, ds.v0_p), False),
        "constraint_velocity": (_flat(ds.cdot), False),
        "acceleration_constraint": (_flat(ds.gamma, ds.Rc_q, ds.gamma_v, ds.Rc_p), False),
    }
    assert tuple(table) == KERNEL_NAMES
    return table
