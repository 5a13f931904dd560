"""Damped harmonic oscillator of the discrete-adjoint paper, section 4: m q'' + d q' + c q = 0.

Output a: the acceleration (the paper's s(x_i) = a_i). Started from q0 = 1 (a parameter, so
that the initial state depends on p).
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
q = dynamicsymbols("q")
m, c, d, q_init = sp.symbols("m c d q_init")

model = symdae.Model(
    "oscillator",
    coordinates=[q],
    mass_matrix=[[m]],
    forces=[-c * q - d * q.diff(t)],
    parameters={m: 1.0, c: 40.0, d: 0.4, q_init: 1.0},
    outputs={"a": q.diff(t, 2), "q": q, "v": q.diff(t)},
    initial_state={q: q_init},
)
