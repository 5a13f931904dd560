"""THE kernel spec: every kernel a model module exports, its weights, output blocks and layout.

This table is the one place that knows the kernel interface. The emitter builds each kernel's
expressions from it and writes its sizes into the generated module; the compiled core reads
those sizes from the module; the NumPy backend lambdifies the same expressions; and the Python
layer reads kernel outputs through :func:`split` (named blocks) instead of slicing by hand.
``symdae/simulation/core/symdae_kernels.h`` and ``kernel_api.pxd`` list the kernels in this order (one enum
line each; ``tests/model/test_kernel_spec.py`` checks that they agree, ABI number included).

Every kernel reads the state x = (t, q, v, a, lam, p, u, tau, st) and a weight vector w, and
writes (or, if ``accumulate``, adds to) a flat output: its blocks in order, each row-major.
Kernels never write structural zeros; the caller zeroes an output buffer once.

Notation (n coordinates, m constraints, n_p parameters, n_s outputs, n_x = 3n + m):

    Ma  = M(q) a                 g  = C_q^T lam - Q(q, v, t, p, u)
    J_M = d(Ma)/dq               J_G = dg/dq                     G_V = dg/dv
    P_M = d(Ma)/dp               P_G = dg/dp                     P_C = dC/dp
    cdot = C_q v + C_t           gamma = d(cdot)/dq v + d(cdot)/dt    (C'' = C_q a + gamma)
    Rc = C_q a + gamma           x = (q, v, a, lam)
    U_M = d(Ma)/du               U_G = dg/du      U_C = dC/du    S_u = ds/du   (s: outputs)
    gdot = J_G v + G_V a + dg/dt (on the rows no constraint reaches: massless nodes)

Adding a kernel: one :class:`KernelSpec` entry in :data:`KERNELS` (placed before the internal
kernels: the time and state terms), one enum line in the header and the ``.pxd``, and a new
ABI number.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from .._version import ABI_VERSION
from ..errors import InputError, UnknownNameError
from .nonsmooth import almost_everywhere
from .roundoff import magnitude

__all__ = ["Block", "KernelSpec", "KERNELS", "KERNEL_NAMES", "kernel", "Sizes", "size",
           "weight_size", "layout", "split", "pack_weights", "kernel_expressions",
           "flatten_blocks", "weight_symbols",
           "ABI_VERSION"]


@dataclass(frozen=True)
class Sizes:
    """The dimensions a layout is written in."""

    n: int
    m: int
    n_p: int
    n_u: int
    n_s: int
    n_tau: int = 0
    n_st: int = 0

    @property
    def nm(self) -> int:
        return self.n + self.m

    @property
    def nx(self) -> int:
        return 3 * self.n + self.m

    @property
    def row_bytes(self) -> int:
        """Bytes a trajectory keeps per step: t, q, v, a (n each), lam (m), outputs, inputs."""
        return 8 * (1 + self.nx + self.n_s + self.n_u)

    @property
    def kept_term_bytes(self) -> int:
        """Bytes of one step's hoisted time terms and state terms, which a forward sweep keeps
        for the derivative sweeps (``keep_time_terms``)."""
        return 8 * (self.n_tau + self.n_st)

    @property
    def gradient_row_bytes(self) -> int:
        """Bytes a gradient run keeps per step: the trajectory's row and the time and state
        terms the adjoint reads instead of evaluating them again."""
        return self.row_bytes + self.kept_term_bytes

    @property
    def factor_bytes(self) -> int:
        """Bytes of one step's stored factorisation: the (n+m)^2 LU, its nm + 1 int pivots
        and the time and state terms."""
        return 8 * self.nm * self.nm + 4 * (self.nm + 1) + self.kept_term_bytes

    def dim(self, name: str | int) -> int:
        return name if isinstance(name, int) else getattr(self, name)

    @classmethod
    def of(cls, obj) -> Sizes:
        """Sizes of anything with n, m, n_p, n_u, n_s (and optionally n_tau, n_st) attributes
        or keys: a DerivedSystem's ``sizes``, a backend, a model module's ``SIZES``."""
        get: Callable[..., Any] = obj.get if isinstance(obj, Mapping) else (
            lambda k, d=None: getattr(obj, k, d))
        n, m, n_p, n_u, n_s = (int(get(k)) for k in ("n", "m", "n_p", "n_u", "n_s"))
        return cls(n, m, n_p, n_u, n_s, n_tau=int(get("n_tau", 0) or 0),
                   n_st=int(get("n_st", 0) or 0))


@dataclass(frozen=True)
class Block:
    """A named part of a kernel's output or weight vector: a scalar (dims ()), a vector (one
    dimension) or a row-major matrix (two)."""

    name: str
    dims: tuple = ()

    def shape(self, sizes: Sizes) -> tuple:
        return tuple(sizes.dim(d) for d in self.dims)

    def size(self, sizes: Sizes) -> int:
        return int(np.prod(self.shape(sizes), dtype=int))


def _b(name: str, *dims) -> Block:
    return Block(name, tuple(dims))


@dataclass(frozen=True)
class KernelSpec:
    """One kernel of the interface.

    ``build(ds, w)`` returns one SymPy matrix (or list) per output block, in kernel symbols;
    ``w`` maps each weight block to its symbols (a tuple, or one symbol for a scalar).
    ``forward`` kernels are those the forward sweep calls (they may use only the time terms
    the forward sweep evaluates); ``internal`` kernels are filled by the emitter itself (the
    hoisted time terms).
    """

    name: str
    blocks: tuple
    weights: tuple = ()
    accumulate: bool = False
    forward: bool = False
    internal: bool = False
    build: Callable | None = None
    doc: str = ""


# ---------------------------------------------------------------------------- builders
def _newton(ds, w):
    n, m = ds.n, ds.m
    c_m, c_q, c_v = w["c_m"], w["c_q"], w["c_v"]
    K = sp.zeros(n + m, n + m)
    for i in range(n):
        for j in range(n):
            K[i, j] = c_m * ds.M[i, j] + c_q * (c_m * ds.JM[i, j] + ds.JG[i, j]) \
                + c_v * ds.GV[i, j]
        for k in range(m):
            K[i, n + k] = ds.Cq[k, i]
            K[n + k, i] = ds.Cq[k, i]
    return [K]


def _dot(pairs) -> sp.Expr:
    """sum of w * e over the pairs, structural zeros skipped."""
    return sp.Add(*[w * e for w, e in pairs if e != 0])


def _matvec(A, x) -> list:
    return [_dot(zip(x, (A[i, j] for j in range(A.shape[1])))) for i in range(A.shape[0])]


def _matTvec(A, x) -> list:
    return [_dot(zip(x, (A[i, j] for i in range(A.shape[0])))) for j in range(A.shape[1])]


def _state_jvp(ds, w):
    dq, dv, dl = w["dq"], w["dv"], w["dlam"]
    dMa = _matvec(ds.JM, dq)
    dg = [a + b + c for a, b, c in zip(_matvec(ds.JG, dq), _matvec(ds.GV, dv),
                                       _matTvec(ds.Cq, dl) if ds.m else [0] * ds.n)]
    return [dMa, dg, _matvec(ds.Cq, dq)]


def _param_jvp(ds, w):
    dp = w["dp"]
    return [_matvec(ds.PM, dp), _matvec(ds.PG, dp), _matvec(ds.PC, dp)]


def _output_jvp(ds, w):
    return [[a + b for a, b in zip(_matvec(ds.Sx, w["dx"]), _matvec(ds.Sp, w["dp"]))]]


def _state_vjp(ds, w):
    wM, wG, wC, wL = w["wM"], w["wG"], w["wC"], w["wL"]
    qbar = [a + b + c for a, b, c in zip(_matTvec(ds.JM, wM), _matTvec(ds.JG, wG),
                                         _matTvec(ds.Cq, wC) if ds.m else [0] * ds.n)]
    return [qbar, _matTvec(ds.GV, wG), [0] * ds.n, _matvec(ds.Cq, wL)]


def _param_vjp(ds, w):
    wM, wG, wC = w["wM"], w["wG"], w["wC"]
    return [[a + b + c for a, b, c in zip(_matTvec(ds.PM, wM), _matTvec(ds.PG, wG),
                                          _matTvec(ds.PC, wC) if ds.m else [0] * ds.n_p)]]


def _residual_magnitude(ds, w):
    S = ds.symbols
    sizes = dict(zip(S.q, w["qs"])) | dict(zip(S.v, w["vs"]))
    exact = (S.t,) + S.p + S.u
    return [[magnitude(e, sizes, exact, w["switch"]) for e in M] for M in (ds.Ma, ds.g, ds.C)]


def _output_vjp(ds, w):
    return [_matTvec(ds.Sx, w["dphi"]), _matTvec(ds.Sp, w["dphi"])]


def _input_vjp(ds, w):
    parts = (_matTvec(ds.UM, w["wM"]), _matTvec(ds.UG, w["wG"]), _matTvec(ds.UC, w["wC"]),
             _matTvec(ds.Su, w["dphi"]))
    return [[sp.Add(*col) for col in zip(*parts)]]


def _state_hvp(ds, w):
    """grad over (x, u) of the bilinear form l = wM.d(Ma)[dx, dp] + wG.dg[dx, dp] +
    wC.dC[dx, dp] + wS.ds[dx, dp]: the derivative of each entry of the first-order blocks with
    respect to the variables it actually contains (so a linear model costs nothing), summed
    as sum_k w_k (sum_j d_j dA_kj/dy) per variable y."""
    S = ds.symbols
    n = ds.n
    wrt = tuple(S.q) + tuple(S.v) + tuple(S.a) + tuple(S.lam) + tuple(S.u)
    dx, dp = w["dx"], w["dp"]
    dq, dv, da, dl = dx[:n], dx[n:2 * n], dx[2 * n:3 * n], dx[3 * n:]
    acc = {y: {} for y in wrt}        # y -> {row weight: [terms]}, in insertion order

    def add(A, rows, cols):
        for k in range(A.shape[0]):
            for j in range(A.shape[1]):
                e = A[k, j]
                if e == 0:
                    continue
                free = e.free_symbols
                for y in wrt:
                    if y in free:
                        acc[y].setdefault(rows[k], []).append(
                            cols[j] * almost_everywhere(e.diff(y)))

    wM, wG, wC, wS = w["wM"], w["wG"], w["wC"], w["wS"]
    for A, rows, cols in ((ds.JM, wM, dq), (ds.M, wM, da), (ds.PM, wM, dp),
                          (ds.JG, wG, dq), (ds.GV, wG, dv), (ds.Cq.T, wG, dl), (ds.PG, wG, dp),
                          (ds.Cq, wC, dq), (ds.PC, wC, dp), (ds.Sx, wS, dx), (ds.Sp, wS, dp)):
        add(A, rows, cols)
    grad = [sp.Add(*[r * sp.Add(*t) for r, t in acc[y].items()]) for y in wrt]
    nx = 3 * n + ds.m
    return [grad[:nx], grad[nx:]]


# ---------------------------------------------------------------------------- the table
KERNELS = (
    KernelSpec("residual", (_b("Ma", "n"), _b("g", "n"), _b("C", "m")), forward=True,
               build=lambda ds, w: [ds.Ma, ds.g, ds.C],
               doc="the dynamic and constraint residual terms"),
    KernelSpec("newton", (_b("K", "nm", "nm"),), (_b("c_m"), _b("c_q"), _b("c_v")),
               forward=True, build=_newton,
               doc="[[c_m M + c_q (c_m J_M + J_G) + c_v G_V, C_q^T], [C_q, 0]], eq. (16); "
                   "with (1, 0, 0) the consistent-initialisation matrix"),
    KernelSpec("outputs", (_b("s", "n_s"),), forward=True, build=lambda ds, w: [ds.s],
               doc="the model outputs s(t, x, p, u)"),
    KernelSpec("residual_magnitude", (_b("Ma", "n"), _b("g", "n"), _b("C", "m")),
               (_b("qs", "n"), _b("vs", "n"), _b("switch")), forward=True,
               build=_residual_magnitude,
               doc="the size of the terms of each residual entry, q and v counted with the "
                   "sizes qs, vs of the terms they were summed from (symdae.roundoff): eps "
                   "times it is the entry's rounding error, the Newton test's floor; with "
                   "switch = 1 a switch whose argument is at round-off counts its jump"),
    KernelSpec("jacobians", (_b("JM", "n", "n"), _b("JG", "n", "n"), _b("GV", "n", "n"),
                             _b("Cq", "m", "n")),
               build=lambda ds, w: [ds.JM, ds.JG, ds.GV, ds.Cq],
               doc="the state Jacobian blocks, dense (initialisation, the tangent sweep)"),
    KernelSpec("param_jacobians", (_b("PM", "n", "n_p"), _b("PG", "n", "n_p"),
                                   _b("PC", "m", "n_p")),
               build=lambda ds, w: [ds.PM, ds.PG, ds.PC],
               doc="the parameter Jacobian blocks, dense (initialisation, the tangent sweep)"),
    KernelSpec("output_jacobians", (_b("Sx", "n_s", "nx"), _b("Sp", "n_s", "n_p")),
               build=lambda ds, w: [ds.Sx, ds.Sp],
               doc="the output Jacobian blocks ds/dx, ds/dp, dense (the tangent sweep)"),
    KernelSpec("state_jvp", (_b("dMa", "n"), _b("dg", "n"), _b("dC", "m")),
               (_b("dq", "n"), _b("dv", "n"), _b("dlam", "m")), accumulate=True,
               build=_state_jvp,
               doc="+= d(Ma, g, C)/d(q, v, lam) (dq, dv, dlam): J_M dq, J_G dq + G_V dv + "
                   "C_q^T dlam, C_q dq"),
    KernelSpec("param_jvp", (_b("dMa", "n"), _b("dg", "n"), _b("dC", "m")), (_b("dp", "n_p"),),
               accumulate=True, build=_param_jvp,
               doc="+= d(Ma, g, C)/dp dp: P_M dp, P_G dp, P_C dp"),
    KernelSpec("output_jvp", (_b("ds", "n_s"),), (_b("dx", "nx"), _b("dp", "n_p")),
               accumulate=True, build=_output_jvp, doc="+= ds/dx dx + ds/dp dp"),
    KernelSpec("state_vjp", (_b("qbar", "n"), _b("vbar", "n"), _b("abar", "n"),
                             _b("lbar", "m")),
               (_b("wM", "n"), _b("wG", "n"), _b("wC", "m"), _b("wL", "n")), accumulate=True,
               build=_state_vjp,
               doc="+= x-shaped: qbar = J_M^T wM + J_G^T wG + C_q^T wC, vbar = G_V^T wG, "
                   "lbar = C_q wL (abar is never written)"),
    KernelSpec("param_vjp", (_b("pbar", "n_p"),), (_b("wM", "n"), _b("wG", "n"), _b("wC", "m")),
               accumulate=True, build=_param_vjp,
               doc="+= P_M^T wM + P_G^T wG + P_C^T wC"),
    KernelSpec("output_vjp", (_b("xbar", "nx"), _b("pbar", "n_p")), (_b("dphi", "n_s"),),
               accumulate=True, build=_output_vjp,
               doc="+= dphi^T [ds/dx, ds/dp] (xbar and pbar contiguous)"),
    KernelSpec("initial_state", (_b("q0", "n"), _b("v0", "n")),
               build=lambda ds, w: [ds.q0, ds.v0],
               doc="the model's initial positions and velocities in p"),
    KernelSpec("initial_state_jacobian", (_b("q0_p", "n", "n_p"), _b("v0_p", "n", "n_p")),
               build=lambda ds, w: [ds.q0_p, ds.v0_p], doc="d(q0, v0)/dp"),
    KernelSpec("constraint_velocity", (_b("cdot", "m"),), build=lambda ds, w: [ds.cdot],
               doc="C_q v + C_t"),
    KernelSpec("acceleration_constraint", (_b("gamma", "m"), _b("Rc_q", "m", "n"),
                                           _b("gamma_v", "m", "n"), _b("Rc_p", "m", "n_p")),
               build=lambda ds, w: [ds.gamma, ds.Rc_q, ds.gamma_v, ds.Rc_p],
               doc="gamma and the derivatives of Rc = C_q a + gamma"),
    KernelSpec("input_vjp", (_b("ubar", "n_u"),),
               (_b("wM", "n"), _b("wG", "n"), _b("wC", "m"), _b("dphi", "n_s")),
               accumulate=True, build=_input_vjp,
               doc="+= U_M^T wM + U_G^T wG + U_C^T wC + S_u^T dphi (the input adjoint)"),
    KernelSpec("state_hvp", (_b("xbar", "nx"), _b("ubar", "n_u")),
               (_b("wM", "n"), _b("wG", "n"), _b("wC", "m"), _b("wS", "n_s"), _b("dx", "nx"),
                _b("dp", "n_p")),
               accumulate=True, build=_state_hvp,
               doc="+= grad over (x, u) of wM.d(Ma) + wG.dg + wC.dC + wS.ds along (dx, dp): "
                   "the vjp of state_jvp + param_jvp and output_jvp (second order, input design)"),
    KernelSpec("massless_rows", (_b("gdot", "n"), _b("gdot_q", "n", "n"), _b("gdot_v", "n", "n"),
                                 _b("gdot_p", "n", "n_p")),
               build=lambda ds, w: [ds.gdot, ds.gdot_q, ds.gdot_v, ds.gdot_p],
               doc="gdot = J_G v + G_V a + dg/dt and its derivatives on the rows no constraint "
                   "reaches (zero on the others): the initial accelerations of massless nodes"),
    KernelSpec("time_terms", (_b("tau", "n_tau"),), forward=True, internal=True,
               doc="the hoisted (t, p, u)-only terms the forward kernels read"),
    KernelSpec("time_terms_sensitivity", (_b("tau", "n_tau"),), internal=True,
               doc="all the hoisted terms: the forward ones (as time_terms computes them, bit "
                   "for bit) and those only the derivative kernels read"),
    KernelSpec("state_terms", (_b("st", "n_st"),), forward=True, internal=True,
               doc="the costly functions of (t, q, v) the residual evaluates, which the other "
                   "kernels at that state read from x.st instead of evaluating them again"),
)

KERNEL_NAMES = tuple(k.name for k in KERNELS)
_BY_NAME = {k.name: k for k in KERNELS}


def kernel(name: str) -> KernelSpec:
    """The spec of kernel ``name`` (UnknownNameError names the kernels there are)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownNameError(f"unknown kernel {name!r}; kernels: "
                               f"{', '.join(KERNEL_NAMES)}") from None


# ---------------------------------------------------------------------------- layouts
@functools.lru_cache(maxsize=4096)
def _layout(name: str, sizes: Sizes, weights: bool) -> dict:
    spec = kernel(name)
    return _offsets(spec.weights if weights else spec.blocks, sizes)


def size(name: str, sizes: Sizes) -> int:
    """Length of kernel ``name``'s flat output."""
    return max((stop for _, stop, _ in _layout(name, sizes, False).values()), default=0)


def weight_size(name: str, sizes: Sizes) -> int:
    """Length of the weight vector kernel ``name`` reads."""
    return max((stop for _, stop, _ in _layout(name, sizes, True).values()), default=0)


def _offsets(blocks, sizes: Sizes) -> dict:
    out, start = {}, 0
    for b in blocks:
        k = b.size(sizes)
        out[b.name] = (start, start + k, b.shape(sizes))
        start += k
    return out


def layout(name: str, sizes: Sizes, *, weights: bool = False) -> dict:
    """{block: (start, stop, shape)} of kernel ``name``'s output (or weight) vector (a fresh
    dict; the layout itself is computed once per kernel and sizes)."""
    return dict(_layout(name, sizes, weights))


def split(name: str, flat, sizes: Sizes) -> dict:
    """Named views of a flat kernel output: {block: array of the block's shape}."""
    flat = np.asarray(flat)
    if flat.shape != (size(name, sizes),):
        raise InputError(f"kernel {name}: output has shape {flat.shape}, expected "
                         f"({size(name, sizes)},)")
    return {b: flat[start:stop].reshape(shape)
            for b, (start, stop, shape) in _layout(name, sizes, False).items()}


def pack_weights(name: str, sizes: Sizes, **blocks) -> np.ndarray:
    """The flat weight vector of kernel ``name`` from named blocks (missing blocks are 0)."""
    lay = _layout(name, sizes, True)
    unknown = sorted(set(blocks) - set(lay))
    if unknown:
        raise UnknownNameError(f"kernel {name} has no weight block(s) {unknown}; its weights "
                               f"are {list(lay)}")
    w = np.zeros(weight_size(name, sizes))
    for b, x in blocks.items():
        start, stop, shape = lay[b]
        if isinstance(x, (int, float)):      # a number fills its block
            w[start:stop] = x
        else:
            w[start:stop] = np.broadcast_to(np.asarray(x, dtype=float), shape).ravel()
    return w


# ---------------------------------------------------------------------------- expressions
def weight_symbols(spec: KernelSpec, sizes: Sizes) -> dict:
    """{weight block: its symbols} with the flat slots w[0], w[1], ... of the spec's layout."""
    out = {}
    for b, (start, stop, shape) in _offsets(spec.weights, sizes).items():
        syms = tuple(sp.Symbol(f"w[{i}]", real=True) for i in range(start, stop))
        out[b] = syms[0] if shape == () else syms
    return out


def flatten_blocks(spec: KernelSpec, parts, sizes: Sizes) -> list:
    """One flat, row-major list of a kernel's output entries from its blocks (checked against
    the spec's sizes)."""
    flat: list = []
    for b, part in zip(spec.blocks, parts):
        entries = list(part) if not isinstance(part, sp.MatrixBase) else list(part)  # row-major
        if len(entries) != b.size(sizes):
            raise AssertionError(f"kernel {spec.name}, block {b.name}: {len(entries)} entries,"
                                 f" the spec says {b.size(sizes)}")
        flat.extend(sp.sympify(e) for e in entries)
    return flat


def kernel_expressions(ds, names=None) -> dict:
    """{kernel name: (flat list of output expressions, accumulate)} for every non-internal
    kernel (or those in ``names``), built from the matrices of a DerivedSystem."""
    sizes = Sizes.of(ds.sizes)
    out = {}
    for spec in KERNELS:
        if spec.internal or (names is not None and spec.name not in names):
            continue
        assert spec.build is not None, spec.name     # only the internal kernels have none
        parts = spec.build(ds, weight_symbols(spec, sizes))
        out[spec.name] = (flatten_blocks(spec, parts, sizes), spec.accumulate)
    return out
