"""The second-order kernels of input design (symdae/model/kernels.py: input_vjp, state_hvp)
against an independent SymPy derivation: the scalar
l = wM.D(Ma)[d] + wG.Dg[d] + wC.DC[d] + wS.Ds[d], the directional derivative D taken from the
model's Ma, g, C and s themselves (not from the Jacobian blocks the kernel differentiates),
then its gradient by sympy.diff. Compiled and NumPy kernels, random states and weights; models
with a state-dependent mass matrix, nonlinear constraints with a parameter inside, Q nonlinear
in u and p, a fully hoisted u sin(t) term and outputs in u and a.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.model.derivation import derive
from symdae.model.kernels import Sizes, pack_weights, split


def hoisted_u_model():
    t = dynamicsymbols._t
    x, y = dynamicsymbols("x y")
    k, c, p, L = sp.symbols("k c p L")
    u, v = sp.symbols("u v")
    return symdae.Model(
        "design_hoisted_u", coordinates=[x, y],
        mass_matrix=sp.diag(1 + 0.1 * sp.sin(y), 2),
        forces=[u * sp.sin(t) * p + v**2 * sp.exp(p * t) - k * x - c * x.diff(t),
                p * u * sp.sin(y) - k * y + sp.cos(v * t) * c],
        parameters={k: 50.0, c: 0.3, p: 1.7, L: 1.0}, inputs=[u, v],
        outputs={"s": x * u + y.diff(t, 2) * v, "r": sp.sin(x) * y})


MODELS = ["cart_pendulum", "cart_pendulum_redundant", "pendulum", "design_hoisted_u"]


@pytest.fixture(scope="module", params=MODELS)
def case(request):
    name = request.param
    model = hoisted_u_model() if name == "design_hoisted_u" else symdae.load_model(name)[0]
    return model, symdae.compile_model(model), symdae.compile_model(model, backend="numpy"), derive(model)


def reference(ds):
    """f(x, u, weights...) -> (grad_x l, grad_u l, input-vjp) from SymPy, independently."""
    S = ds.symbols
    n, m = ds.n, ds.m
    xs = list(S.q) + list(S.v) + list(S.a) + list(S.lam)
    wM, wG = sp.symbols(f"wM0:{n}"), sp.symbols(f"wG0:{n}")
    wC, wS = sp.symbols(f"wC0:{m}"), sp.symbols(f"wS0:{ds.s.shape[0]}")
    dx, dp = sp.symbols(f"dx0:{len(xs)}"), sp.symbols(f"dp0:{len(S.p)}")
    eps = sp.Symbol("eps")
    shift = {**{s: s + eps * d for s, d in zip(xs, dx)},
             **{s: s + eps * d for s, d in zip(S.p, dp)}}

    def D(vec):     # directional derivative along (dx, dp), from the expressions themselves
        return [sp.diff(e.xreplace(shift), eps).subs(eps, 0) for e in vec]

    ell = sum(w * e for w, e in zip(wM, D(ds.Ma))) + sum(w * e for w, e in zip(wG, D(ds.g))) \
        + sum(w * e for w, e in zip(wC, D(ds.C))) + sum(w * e for w, e in zip(wS, D(ds.s)))
    first = sum(w * e for w, e in zip(wM, ds.Ma)) + sum(w * e for w, e in zip(wG, ds.g)) \
        + sum(w * e for w, e in zip(wC, ds.C)) + sum(w * e for w, e in zip(wS, ds.s))
    out = [sp.diff(ell, y) for y in xs + list(S.u)] + [sp.diff(first, y) for y in S.u]
    args = [S.t] + xs + list(S.p) + list(S.u) + list(wM + wG + wC + wS + dx + dp)
    return sp.lambdify(args, out, modules="numpy")


def test_second_order_kernels_match_an_independent_derivation(case):
    model, compiled, numpy_system, ds = case
    sz = Sizes.of(ds.sizes)
    ref = reference(ds)
    rng = np.random.default_rng(4)
    for _ in range(3):
        t = rng.uniform(0, 2)
        q, v, a = (rng.uniform(-1, 1, sz.n) for _ in range(3))
        lam, p = rng.uniform(-1, 1, sz.m), rng.uniform(0.5, 2, sz.n_p)
        u = rng.uniform(-1, 1, sz.n_u)
        wM, wG = rng.standard_normal(sz.n), rng.standard_normal(sz.n)
        wC, wS = rng.standard_normal(sz.m), rng.standard_normal(sz.n_s)
        dx, dp = rng.standard_normal(sz.nx), rng.standard_normal(sz.n_p)
        want = np.array(ref(t, *q, *v, *a, *lam, *p, *u, *wM, *wG, *wC, *wS, *dx, *dp),
                        dtype=float)
        hvp_w = pack_weights("state_hvp", sz, wM=wM, wG=wG, wC=wC, wS=wS, dx=dx, dp=dp)
        vjp_w = pack_weights("input_vjp", sz, wM=wM, wG=wG, wC=wC, dphi=wS)
        for system in (compiled, numpy_system):
            be = system.backend
            hvp = split("state_hvp", be.evaluate("state_hvp", t, q, v, a, lam, p, u, hvp_w),
                        sz)
            ub = be.evaluate("input_vjp", t, q, v, a, lam, p, u, vjp_w)
            got = np.concatenate([hvp["xbar"], hvp["ubar"], ub])
            scale = max(np.max(np.abs(want)), 1.0)
            assert np.max(np.abs(got - want)) <= 1e-12 * scale, (model.name, be.name)


def test_state_hvp_of_a_linear_model_is_constant():
    """The two-mass oscillator is linear in (q, v, a, u) with parameters as coefficients: its
    second-order terms are the parameter-state cross terms only (constant in the state, zero
    in u), and the force enters with coefficient 1 (input_vjp constant)."""
    model = symdae.load_model("two_mass_oscillator")[0]
    ds = derive(model)
    from symdae.model.kernels import kernel_expressions
    table = kernel_expressions(ds)
    exprs, acc = table["state_hvp"]
    sz = Sizes.of(ds.sizes)
    S = ds.symbols
    state = set(S.q) | set(S.v) | set(S.a) | set(S.u)
    assert acc and sum(e != 0 for e in exprs[:sz.nx]) > 0
    assert all(not (sp.sympify(e).free_symbols & state) for e in exprs)
    assert all(e == 0 for e in exprs[sz.nx:])                      # no u-block
    vjp, _ = table["input_vjp"]
    assert all(not (sp.sympify(e).free_symbols & (state | set(S.p))) for e in vjp)
