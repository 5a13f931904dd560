"""Hydraulic engine mount of the discrete-adjoint paper (Lauss et al. 2018, section 5), SI units.

x1: engine (load) mass, x2: massless node between the hydro spring and the lever,
x3: membrane mass, x4: fluid (hydro) mass; the lever C = x2 (a + b) - x3 b - x4 a links them.
The four parameters to identify are cE1, cE2, dE, dH2 (true values here; the paper starts from
cE1 = 7.38e4, cE2 = 4e9, dE = 0.5, dH2 = 1.2). Output a1: acceleration of the engine mass (the
paper's measured signal); x1, v4 and the lever force lambda are there to fit other signals.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
x1, x2, x3, x4 = dynamicsymbols("x1 x2 x3 x4")
cE1, cE2, dE, dH2 = sp.symbols("cE1 cE2 dE dH2")
mL, mH, mM, cH, dH1, cM, dM, a, b, g = sp.symbols("mL mH mM cH dH1 cM dM a b g")
A, omega0, C = sp.symbols("A omega0 C")
lam = sp.Symbol("lambda")

F = A * sp.sin(omega0 * C**t * t)                       # exponential frequency sweep
FE = cE1 * x1 + cE2 * x1**3 + dE * x1.diff(t)           # elastomer: cubic spring + damper
FM = cM * x3 + dM * x3.diff(t)                          # membrane
FH = dH1 * x4.diff(t) + dH2 * x4.diff(t)**3             # hydro damper

model = symdae.Model(
    "engine_mount",
    coordinates=[x1, x2, x3, x4],
    mass_matrix=sp.diag(mL, 0, mM, mH),
    forces=[F + mL * g - FE - cH * (x1 - x2), cH * (x1 - x2), -FM, -FH],
    constraints=[x2 * (a + b) - x3 * b - x4 * a],
    multipliers=[lam],
    parameters={
        cE1: 1.23e5, cE2: 2.5e9, dE: 5.0, dH2: 2.0,       # to identify (true values)
        mL: 20.0, mH: 0.0019, mM: 0.002, cH: 3.75e5, dH1: 0.08, cM: 9e3, dM: 10.0,
        a: 0.095, b: 0.0036, g: 9.81, A: 100.0, omega0: 4 * sp.pi.evalf(), C: 25.0,
    },
    outputs={"a1": x1.diff(t, 2), "x1": x1, "v4": x4.diff(t), "lambda": lam},
    units={"a1": "m/s^2", "x1": "m", "v4": "m/s", "lambda": "N/m", x2: "m", x3: "m", x4: "m",
           cE1: "N/m", cE2: "N/m^3", dE: "N*s/m", dH2: "N*s^3/m^3"},
)

# The paper's identification: its start values, the free parameters, the measured output and
# the reference scenario (q0 = 0, v0 = 0, 10 000 steps).
START = {"cE1": 7.38e4, "cE2": 4.0e9, "dE": 0.5, "dH2": 1.2}
FREE = list(START)
OUTPUTS = ["a1"]
SCENARIO = symdae.Scenario(t_end=1.0, h=1e-4, alpha=-0.1)
