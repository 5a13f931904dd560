"""The derivative kernels of a large model, formed on its common-subexpression graph.

The same kernels as the spec (:mod:`symdae.model.kernels`) builds from the expanded Jacobian
matrices, but each one a straight-line program (:mod:`symdae.model.graph`): the residual
(Ma, g, C) and the outputs s are split once into shared assignments, and

* the jvp kernels are one tangent along the weights, the vjp kernels one adjoint with them;
* state_hvp is the adjoint of phi = w . (tangent of (Ma, g, C, s) along (dx, dp))
  (reverse over forward mode);
* the Jacobians (COLUMN_KERNELS) are filled by calls of a helper program that takes a
  direction as its weights: ``dir_residual`` is the tangent of (Ma, g, C) along
  (dq, dv, da, dlam, dp) (newton's column j: q_j -> c_q, v_j -> c_v, a_j -> 1, then
  c_m dMa + dg), in vector mode (graph.linearize): ``residual_partials`` evaluates the
  residual's program and its local partial derivatives once per kernel call, and
  dir_residual only combines them along each direction; ``gdot`` is the tangent of g along
  (q' = v, v' = a, t' = 1) and
  ``dir_gdot`` its tangent along (dq, dv, dp). The emitter (emit.column_passes) writes the
  calls: columns whose rows do not overlap share one call along the sum of their
  directions (the structure comes from graph.dependence of the helper's outputs on its
  direction), and only structurally nonzero entries are written, as a tree kernel writes
  them. The code holds one tangent program per helper instead of one per column; a banded
  Jacobian takes a few calls whatever its size.

The kernels that involve only the constraints or the initial state are built as trees
(constraints are small next to the dynamics); the round-off model's is a program too. Every
entry is what the tree kernel computes, exactly: only the shape of the expressions differs.
"""
from __future__ import annotations

import sympy as sp

from .derivation import DerivedSystem
from .graph import FreeSymbols, adjoint, linearize, straight_line, tangent
from .kernels import KERNELS, Sizes, flatten_blocks, kernel_expressions, weight_symbols
from .roundoff import magnitude

__all__ = ["graph_kernel_table", "helper_sizes", "TREE_KERNELS", "COLUMN_KERNELS", "HELPERS"]

# built from the tree expressions in either form
TREE_KERNELS = ("initial_state", "initial_state_jacobian", "constraint_velocity",
                "acceleration_constraint")
# Jacobians, filled by calls of a helper along sums of unit directions (the emitter writes
# the calls): one tangent program each instead of one per column
COLUMN_KERNELS = ("newton", "jacobians", "param_jacobians", "massless_rows")
# the helpers, and whether a forward kernel calls them (their time terms are forward ones)
HELPERS = {"residual_partials": True, "dir_residual": True, "gdot": False, "dir_gdot": False}


class _Graph:
    """The residual and outputs of one model as a program, and the kernel builders on it."""

    def __init__(self, ds: DerivedSystem, free: FreeSymbols):
        S = ds.symbols
        self.ds, self.S = ds, S
        self.n, self.m, self.n_s = ds.n, ds.m, len(ds.s)
        n, m = self.n, self.m
        self.prog, red = straight_line(list(ds.Ma) + list(ds.g) + list(ds.C) + list(ds.s), "z")
        self.prog.free = free
        self.Ma, self.g = red[:n], red[n:2 * n]
        self.C, self.s = red[2 * n:2 * n + m], red[2 * n + m:]
        self.x = tuple(S.q) + tuple(S.v) + tuple(S.a) + tuple(S.lam)
        self._gdot_cache = None
        self._linear_cache = None

    # -- builders: (assignments, blocks)
    def residual(self, w):
        return self.prog.assignments, [self.Ma, self.g, self.C]

    def outputs(self, w):
        return self.prog.assignments, [self.s]

    def _residual_tangent(self, seed):
        n, m = self.n, self.m
        new, d = tangent(self.prog, self.Ma + self.g + self.C, seed, "t")
        return self.prog.assignments + new, [d[:n], d[n:2 * n], d[2 * n:2 * n + m]]

    def state_jvp(self, w):
        S = self.S
        return self._residual_tangent({**dict(zip(S.q, w["dq"])), **dict(zip(S.v, w["dv"])),
                                       **dict(zip(S.lam, w["dlam"]))})

    def param_jvp(self, w):
        return self._residual_tangent(dict(zip(self.S.p, w["dp"])))

    def output_jvp(self, w):
        seed = {**dict(zip(self.x, w["dx"])), **dict(zip(self.S.p, w["dp"]))}
        new, d = tangent(self.prog, self.s, seed, "t")
        return self.prog.assignments + new, [d]

    def _residual_adjoint(self, w, wrt, outputs=False):
        exprs = self.Ma + self.g + self.C
        weights = list(w["wM"]) + list(w["wG"]) + list(w["wC"])
        if outputs:
            exprs, weights = exprs + self.s, weights + list(w["dphi"])
        new, grad = adjoint(self.prog, exprs, weights, list(wrt), "b")
        return self.prog.assignments + new, grad

    def state_vjp(self, w):
        n, S = self.n, self.S
        assigns, grad = self._residual_adjoint(w, tuple(S.q) + tuple(S.v))
        return assigns, [grad[:n], grad[n:], [sp.S.Zero] * n, self._cq(w["wL"])]

    def _cq(self, wL) -> list:
        Cq = self.ds.Cq
        return [sp.Add(*[Cq[k, i] * wL[i] for i in range(self.n)]) for k in range(self.m)]

    def param_vjp(self, w):
        assigns, grad = self._residual_adjoint(w, self.S.p)
        return assigns, [grad]

    def input_vjp(self, w):
        assigns, grad = self._residual_adjoint(w, self.S.u, outputs=True)
        return assigns, [grad]

    def output_vjp(self, w):
        new, grad = adjoint(self.prog, self.s, list(w["dphi"]), list(self.x) + list(self.S.p),
                            "b")
        nx = len(self.x)
        return self.prog.assignments + new, [grad[:nx], grad[nx:]]

    def state_hvp(self, w):
        S = self.S
        seed = {**dict(zip(self.x, w["dx"])), **dict(zip(S.p, w["dp"]))}
        exprs = self.Ma + self.g + self.C + self.s
        weights = list(w["wM"]) + list(w["wG"]) + list(w["wC"]) + list(w["wS"])
        fwd, d = tangent(self.prog, exprs, seed, "t")
        phi = sp.Add(*[wk * dk for wk, dk in zip(weights, d) if dk != 0])
        ext = self.prog.extend(fwd)
        wrt = list(self.x) + list(S.u)
        rev, grad = adjoint(ext, [phi], [sp.S.One], wrt, "b")
        nx = len(self.x)
        return ext.assignments + rev, [grad[:nx], grad[nx:]]

    def residual_magnitude(self, w):
        """roundoff.magnitude of (Ma, g, C) along the program: each assignment's magnitude
        from those of its inputs (an assignment in t, p and u only is exact, its magnitude
        its size). The magnitude is compositional (of a sum, the sum of its terms'; of
        f(x), |f| + |f'| mag(x); ...), so this is the tree kernel's expression, each shared
        subexpression's magnitude formed once."""
        S = self.S
        sizes = dict(zip(S.q, w["qs"])) | dict(zip(S.v, w["vs"]))
        exact = set((S.t,) + S.p + S.u)
        names = sp.numbered_symbols("m", cls=sp.Dummy, real=True)
        new = []
        for z, f in self.prog.assignments:
            if self.prog.free(f) <= exact:
                exact.add(z)
                continue
            mz = magnitude(f, sizes, exact, w["switch"])
            if not mz.is_Atom:
                sym = next(names)
                new.append((sym, mz))
                mz = sym
            sizes[z] = mz
        n, m = self.n, self.m
        rows = [magnitude(e, sizes, exact, w["switch"]) for e in self.Ma + self.g + self.C]
        return self.prog.assignments + new, [rows[:n], rows[n:2 * n], rows[2 * n:2 * n + m]]

    # -- helpers of the column-by-column kernels (COLUMN_KERNELS): (assignments, entries)
    def _linearized(self):
        """(partials, linear assignments, tangents) of (Ma, g, C) along (q, v, a, lam, p)
        (graph.linearize): the direction is w[0 : 3n + m + n_p], partial k is w[3n + m + n_p
        + k]."""
        if self._linear_cache is None:
            S = self.S
            k = helper_sizes(Sizes.of(self.ds.sizes))["dir_residual"][0]
            direction = [sp.Symbol(f"w[{i}]", real=True) for i in range(k)]
            seed = dict(zip(self.x + tuple(S.p), direction))
            self._linear_cache = linearize(
                self.prog, self.Ma + self.g + self.C, seed,
                lambda j: sp.Symbol(f"w[{k + j}]", real=True), "t")
        return self._linear_cache

    def residual_partials(self, d):
        """The local partial derivatives of (Ma, g, C)'s program at the state: what every
        direction of dir_residual shares (the caller passes them after the direction)."""
        partials, _, _ = self._linearized()
        return self.prog.assignments, partials

    def dir_residual(self, d):
        """The tangent of (Ma, g, C) along the direction d = (dq, dv, da, dlam, dp): the
        linear combination of residual_partials' values (weights after d) along d."""
        _, new, t = self._linearized()
        return new, t

    def _gdot(self):
        """(program extended by gdot, gdot on every row: 0 on the rows constraints reach)."""
        if self._gdot_cache is None:
            n, m, S = self.n, self.m, self.S
            Cq = self.ds.Cq
            free = [i for i in range(n) if all(Cq[k, i] == 0 for k in range(m))]
            seed = {**dict(zip(S.q, S.v)), **dict(zip(S.v, S.a)), S.t: sp.S.One}
            fwd, d = tangent(self.prog, [self.g[i] for i in free], seed, "m")
            gdot = [sp.S.Zero] * n
            for r, i in enumerate(free):
                gdot[i] = d[r]
            self._gdot_cache = (self.prog.extend(fwd), gdot)
        return self._gdot_cache

    def gdot(self, d):
        """gdot = J_G v + G_V a + dg/dt on the rows no constraint reaches."""
        ext, gdot = self._gdot()
        return ext.assignments, gdot

    def dir_gdot(self, d):
        """The tangent of gdot along the direction d = (dq, dv, dp)."""
        S = self.S
        ext, gdot = self._gdot()
        seed = dict(zip(tuple(S.q) + tuple(S.v) + tuple(S.p), d))
        new, t = tangent(ext, gdot, seed, "t")
        return ext.assignments + new, t


def helper_sizes(sizes: Sizes) -> dict:
    """{helper: (direction length, output length)} of the column helpers; residual_partials'
    output length (and what dir_residual reads after its direction) is the model's number of
    distinct partials, known once its program is built (None here)."""
    n, m, n_p = sizes.n, sizes.m, sizes.n_p
    return {"residual_partials": (0, None), "dir_residual": (3 * n + m + n_p, 2 * n + m),
            "gdot": (0, n), "dir_gdot": (2 * n + n_p, n)}


def graph_kernel_table(ds: DerivedSystem, free: FreeSymbols | None = None) -> dict:
    """{name: (flat output expressions, accumulate, assignments)}: graph programs for the
    dynamics kernels, trees (no assignments) for the kernels in TREE_KERNELS, and for the
    kernels in COLUMN_KERNELS none but the helpers in HELPERS they are filled from (each a
    function of a direction in its weights w[0], w[1], ...). ``free``: a FreeSymbols cache to
    share."""
    sizes = Sizes.of(ds.sizes)
    graph = _Graph(ds, free or FreeSymbols())
    # a kernel with no builder here is built as a tree too (correct at any size)
    trees = kernel_expressions(ds, names=[s.name for s in KERNELS if s.name in TREE_KERNELS or (
        s.name not in COLUMN_KERNELS and not hasattr(graph, s.name))])
    out = {}
    for name, (k, _) in helper_sizes(sizes).items():
        direction = tuple(sp.Symbol(f"w[{i}]", real=True) for i in range(k))
        assigns, exprs = getattr(graph, name)(direction)
        out[name] = (list(exprs), False, list(assigns))
    for spec in KERNELS:
        if spec.internal or spec.name in COLUMN_KERNELS:
            continue
        if spec.name in trees:
            exprs, accumulate = trees[spec.name]
            out[spec.name] = (exprs, accumulate, [])
            continue
        assigns, parts = getattr(graph, spec.name)(weight_symbols(spec, sizes))
        out[spec.name] = (flatten_blocks(spec, parts, sizes), spec.accumulate, list(assigns))
    return out
