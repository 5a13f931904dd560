"""Pendulum in its angle: theta'' = -p sin(theta), p = g / L.

The textbook nonlinear oscillator in one coordinate (no constraint, no damping): small
swings have the period 2 pi / sqrt(p), about 2 s at the nominal p = 10 1/s^2; larger ones
are slower. Started at rest from theta0 = pi/6 (parameters theta0, omega0, so that the start
can be identified too). Over a long record a start value of p a little off accumulates a
phase error that single shooting cannot undo (``identify(..., shooting=...)``).
"""
import math

import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
theta = dynamicsymbols("theta")
p, theta0, omega0 = sp.symbols("p theta0 omega0")

model = symdae.Model(
    "pendulum_angle",
    coordinates=[theta],
    mass_matrix=[[1]],
    forces=[-p * sp.sin(theta)],
    parameters={p: 10.0, theta0: math.pi / 6, omega0: 0.0},
    outputs={"theta": theta, "omega": theta.diff(t), "alpha": theta.diff(t, 2)},
    units={"theta": "rad", "omega": "rad/s", "alpha": "rad/s^2", p: "1/s^2", theta0: "rad",
           omega0: "rad/s"},
    initial_state={theta: theta0, theta.diff(t): omega0},
)

START = {"p": 5.0}
FREE = list(START)
OUTPUTS = ["theta"]
SCENARIO = symdae.Scenario(t_end=10.0, h=1e-2, alpha=-0.05)
