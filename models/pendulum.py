"""Planar pendulum in Cartesian coordinates (x, y), one constraint x^2 + y^2 - L^2 = 0.

The length L is a parameter inside the constraint; the initial state is given by the angle
theta0 and angular velocity omega0 (parameters too), so the consistent initial state moves
with L, theta0 and omega0. A viscous damper d acts on the bob's velocity.
Minimal-coordinate equivalent: theta'' = -(g/L) sin(theta) - (d/m) theta'.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
x, y = dynamicsymbols("x y")
m, g, L, d, theta0, omega0 = sp.symbols("m g L d theta0 omega0")
lam = sp.Symbol("lambda")

model = symdae.Model(
    "pendulum",
    coordinates=[x, y],
    mass_matrix=sp.diag(m, m),
    forces=[-d * x.diff(t), -m * g - d * y.diff(t)],
    constraints=[x**2 + y**2 - L**2],
    multipliers=[lam],
    parameters={m: 1.0, g: 9.81, L: 0.8, d: 0.1, theta0: 0.9, omega0: 0.5},
    outputs={"x": x, "vy": y.diff(t), "ax": x.diff(t, 2), "lambda": lam},
    units={"x": "m", "vy": "m/s", "ax": "m/s^2", "lambda": "N/m", y: "m", m: "kg", L: "m",
           d: "N*s/m"},
    initial_state={
        x: L * sp.sin(theta0), y: -L * sp.cos(theta0),
        x.diff(t): L * omega0 * sp.cos(theta0), y.diff(t): L * omega0 * sp.sin(theta0),
    },
)
