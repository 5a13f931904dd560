"""Small models with massless Maxwell nodes for the consistent-initialisation tests.

``oscillator()``: a mass m on a spring k, and a Maxwell element (spring c to a massless node z,
dashpot d from the node to the ground) beside it, forced by F0 sin(w t):

    m x'' = F0 sin(w t) - k x - c (x - z)          0 = c (x - z) - d z'

``link()``: two masses joined by a rigid link x1 - x2 - Lk = 0 (a constraint with a parameter),
x2 on a spring k, and a nonlinear Maxwell node z: a progressive spring c u + c3 u^3
(u = x2 - z) to the node, and a dashpot whose rate grows with the node's excursion,
d (1 + e z^2), from the node to a base moving as B sin(W t):

    g_z = -(c u + c3 u^3) + d (1 + e z^2) (z' - B W cos(W t)) = 0

so the node's row depends on q, v and t, and G_V of it on q. Both take their initial state
from parameters, with the node's velocity from g_z = 0 (so v0 depends on p).
"""
from __future__ import annotations

import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t


def oscillator(node_mass: bool = False, name: str = "maxwell_oscillator") -> symdae.Model:
    """The linear Maxwell oscillator; ``node_mass``: the node's mass is a parameter mz
    (nominal 0, so the node is massless at run time, not structurally)."""
    x, z = dynamicsymbols("x z")
    m, k, c, d, F0, w, X0, V0, Z0 = sp.symbols("m k c d F0 w X0 V0 Z0")
    params = {m: 1.5, k: 400.0, c: 900.0, d: 12.0, F0: 5.0, w: 9.0, X0: 0.02, V0: -0.3,
              Z0: -0.01}
    mz = 0
    if node_mass:
        mz = sp.Symbol("mz")
        params[mz] = 0.0
    return symdae.Model(
        name, coordinates=[x, z], mass_matrix=sp.diag(m, mz),
        forces=[F0 * sp.sin(w * t) - k * x - c * (x - z), c * (x - z) - d * z.diff(t)],
        parameters=params,
        outputs={"x": x, "z": z, "vz": z.diff(t), "az": z.diff(t, 2), "ax": x.diff(t, 2)},
        initial_state={x: X0, z: Z0, x.diff(t): V0, z.diff(t): c * (X0 - Z0) / d},
    )


def link(name: str = "maxwell_link") -> symdae.Model:
    """The constrained, nonlinear, rheonomic-base Maxwell model."""
    x1, x2, z = dynamicsymbols("x1 x2 z")
    m1, m2, k, c, c3, d, e, Lk, B, W, X0, V0, Z0 = sp.symbols(
        "m1 m2 k c c3 d e Lk B W X0 V0 Z0")
    lam = sp.Symbol("lambda")
    u = x2 - z
    spring = c * u + c3 * u**3
    base_v = B * W * sp.cos(W * t)
    damper = d * (1 + e * z**2) * (z.diff(t) - base_v)
    u0 = X0 - Z0
    return symdae.Model(
        name, coordinates=[x1, x2, z], mass_matrix=sp.diag(m1, m2, 0),
        forces=[-0.5 * x1.diff(t), -k * x2 - spring, spring - damper],
        constraints=[x1 - x2 - Lk], multipliers=[lam],
        parameters={m1: 0.8, m2: 1.2, k: 300.0, c: 700.0, c3: 4.0e5, d: 9.0, e: 30.0,
                    Lk: 0.1, B: 0.01, W: 7.0, X0: 0.03, V0: 0.2, Z0: -0.02},
        outputs={"x2": x2, "z": z, "vz": z.diff(t), "az": z.diff(t, 2), "lambda": lam},
        initial_state={x1: X0 + Lk, x2: X0, z: Z0, x1.diff(t): V0, x2.diff(t): V0,
                       z.diff(t): B * W + (c * u0 + c3 * u0**3) / (d * (1 + e * Z0**2))},
    )
