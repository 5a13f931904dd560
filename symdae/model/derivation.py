"""Exact derivation: from a :class:`~symdae.model.Model` to every matrix the HHT sweeps need.

Pure SymPy, no code generation. All expressions are in the internal kernel symbols
(``q[i]``, ``v[i]``, ``a[i]``, ``lam[k]``, ``p[j]``, ``u[l]``, time ``t``). The kernels that
combine these matrices (with run-time weights) are built in :mod:`symdae.model.kernels`.

Notation (n coordinates, m constraints, n_p parameters, n_s outputs):

    Ma  = M(q) a                 g  = C_q^T lam - Q(q, v, t, p, u)
    J_M = d(M a)/dq              J_G = dg/dq = J_C - J_Q        G_V = dg/dv = -J_V
    P_M = d(M a)/dp              P_G = dg/dp                    P_C = dC/dp
    cdot  = C_q v + C_t          gamma = d(cdot)/dq v + d(cdot)/dt   (so C'' = C_q a + gamma)
    U_M = d(M a)/du              U_G = dg/du                    U_C = dC/du     S_u = ds/du
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp

from ..errors import ModelError
from .definition import KernelSymbols, Model
from .nonsmooth import almost_everywhere

__all__ = ["DerivedSystem", "derive"]


def _jacobian(of: str, wrt: str) -> cached_property:
    """A DerivedSystem attribute: the Jacobian of its expressions ``of`` with respect to the
    symbols ``wrt`` (q, v, a, lam, p, u, or x = (q, v, a, lam)), formed when first read."""
    def jacobian(self) -> sp.ImmutableMatrix:
        return _jac(getattr(self, of), self._x if wrt == "x" else getattr(self.symbols, wrt))

    jacobian.__doc__ = f"d{of.lstrip('_')}/d{wrt} (formed when first read)."
    return cached_property(jacobian)


@dataclass(frozen=True)
class DerivedSystem:
    """Exact SymPy expressions of one model, in kernel symbols. Matrices are ImmutableMatrix.

    The derivative matrices are formed when first read: the graph kernels of a large model
    (graph_kernels.py) never need them expanded."""

    name: str
    symbols: KernelSymbols
    M: sp.ImmutableMatrix
    Q: sp.ImmutableMatrix
    C: sp.ImmutableMatrix
    Cq: sp.ImmutableMatrix
    Ma: sp.ImmutableMatrix
    g: sp.ImmutableMatrix
    s: sp.ImmutableMatrix
    cdot: sp.ImmutableMatrix
    gamma: sp.ImmutableMatrix
    q0: sp.ImmutableMatrix
    v0: sp.ImmutableMatrix
    sizes: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        """The number of coordinates."""
        return self.sizes["n"]

    @property
    def m(self) -> int:
        """The number of constraints (and multipliers)."""
        return self.sizes["m"]

    @property
    def n_p(self) -> int:
        """The number of parameters."""
        return self.sizes["n_p"]

    @property
    def _x(self) -> list:
        S = self.symbols
        return list(S.q) + list(S.v) + list(S.a) + list(S.lam)

    # the Jacobians are formed when first read: a large model's graph kernels never need them
    JM = _jacobian("Ma", "q")
    JG = _jacobian("g", "q")
    GV = _jacobian("g", "v")
    PM = _jacobian("Ma", "p")
    PG = _jacobian("g", "p")
    PC = _jacobian("C", "p")
    Sx = _jacobian("s", "x")
    Sp = _jacobian("s", "p")
    Rc_q = _jacobian("_Rc", "q")
    gamma_v = _jacobian("gamma", "v")
    Rc_p = _jacobian("_Rc", "p")
    q0_p = _jacobian("q0", "p")
    v0_p = _jacobian("v0", "p")

    @cached_property
    def gdot(self) -> sp.ImmutableMatrix:
        """The time derivative of the massless rows' forces g along the motion (formed when
        first read)."""
        return _imm(_massless_terms(self.g, self.JG, self.GV, self.Cq, self.symbols, self.n,
                                    self.m))

    gdot_q = _jacobian("gdot", "q")
    gdot_v = _jacobian("gdot", "v")
    gdot_p = _jacobian("gdot", "p")
    # input Jacobians (optimal input design: the exact gradient with respect to input samples)
    UM = _jacobian("Ma", "u")
    UG = _jacobian("g", "u")
    UC = _jacobian("C", "u")
    Su = _jacobian("s", "u")

    @property
    def _Rc(self) -> sp.Matrix:
        return self.Cq * sp.Matrix(self.symbols.a) + self.gamma


def _imm(x) -> sp.ImmutableMatrix:
    # derivatives almost everywhere: a jump's DiracDelta is 0 (non-smooth forces, nonsmooth.py)
    return sp.ImmutableMatrix(x).applyfunc(almost_everywhere)


def _jac(vec: sp.MatrixBase, syms) -> sp.ImmutableMatrix:
    if len(syms) == 0 or vec.shape[0] == 0:
        return sp.ImmutableMatrix.zeros(vec.shape[0], len(syms))
    return _imm(vec.jacobian(list(syms)))


def _massless_terms(g, JG, GV, Cq, S, n: int, m: int) -> sp.Matrix:
    """gdot on the rows no constraint reaches (structurally zero C_q column), zero on the
    others. Only those rows can be massless nodes: whether a row's mass vanishes is decided at
    run time (a mass may be a parameter set to 0), so every such row gets its derivative."""
    free = [i for i in range(n) if all(Cq[k, i] == 0 for k in range(m))]
    gdot = sp.zeros(n, 1)
    v, a = list(S.v), list(S.a)
    for i in free:
        gdot[i] = sum((JG[i, j] * v[j] + GV[i, j] * a[j] for j in range(n)), sp.S.Zero) \
            + g[i].diff(S.t)
    return gdot


def derive(model: Model) -> DerivedSystem:
    """Derive every expression the kernels need, exactly. Deterministic for a given model."""
    S = model.symbols
    n, m, n_p, n_u = model.n, model.m, len(S.p), len(S.u)
    v, a, lam, t = sp.Matrix(S.v), sp.Matrix(S.a), sp.Matrix(S.lam), S.t
    memo: dict = {}

    def kern(e):
        return model.to_kernel(e, memo)

    forces = sp.Matrix([kern(f) for f in model.forces])
    if model.lagrangian is not None:
        L = kern(model.lagrangian)
        dL_dv = sp.Matrix([L.diff(vi) for vi in S.v])
        M = dL_dv.jacobian(list(S.v))
        if M.free_symbols & set(S.v):
            raise ModelError("the lagrangian is not quadratic in the velocities: its Hessian "
                             "with respect to them depends on velocities")
        dL_dq = sp.Matrix([L.diff(qi) for qi in S.q])
        Q = forces + dL_dq - dL_dv.jacobian(list(S.q)) * v - dL_dv.diff(t)
    else:
        M = sp.Matrix(model.mass_matrix).applyfunc(kern)
        Q = forces

    C = sp.Matrix([kern(c) for c in model.constraints]) if m else sp.zeros(0, 1)
    Cq = _jac(C, S.q) if m else sp.zeros(0, n)
    Ma = M * a
    g = (Cq.T * lam if m else sp.zeros(n, 1)) - Q
    s = sp.Matrix([kern(e) for e in model.outputs.values()]) if model.outputs \
        else sp.zeros(0, 1)
    if m:
        cdot = Cq * v + C.diff(t)
        gamma = cdot.jacobian(list(S.q)) * v + cdot.diff(t)
    else:
        cdot = gamma = sp.zeros(0, 1)
    q0 = sp.Matrix([kern(e) for e in model.initial_positions])
    v0 = sp.Matrix([kern(e) for e in model.initial_velocities])

    sizes = dict(n=n, m=m, n_p=n_p, n_u=n_u, n_s=len(model.outputs))
    return DerivedSystem(
        name=model.name, symbols=S, M=_imm(M), Q=_imm(Q), C=_imm(C), Cq=_imm(Cq), Ma=_imm(Ma),
        g=_imm(g), s=_imm(s), cdot=_imm(cdot), gamma=_imm(gamma), q0=_imm(q0), v0=_imm(v0),
        sizes=sizes)
