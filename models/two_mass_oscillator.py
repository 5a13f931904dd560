"""Two-mass oscillator of the input-design paper (Oberpeilsteiner et al. 2017, section 4.1).

wall --(c1, d1)-- m1 --(c2, d2)-- m2, the force F acts on m1; x2 is measured, c2 is
identified. The paper's parameter table is an image; the values are those of the input-design
spec (section 6.2). The nominal c2 = 1100 N/m is the paper's "true" stiffness (the synthetic
data); START holds the prior guess c2 = 1000 N/m, where an input is designed. F0 (constant
0.5 Fmax, the paper's start input) and the comparison sine Fmax sin(2 pi t / tf) are the
reference inputs; SCENARIO runs F0 (t in [0, 1] s, h = 1e-3, alpha = -0.1, from rest).
DESIGN (``symdae design two_mass_oscillator``): F bounded to [-Fmax, Fmax], started from F0,
end conditions v1(tf) = v2(tf) = 0 (the paper's scrap function).
"""
import numpy as np
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
x1, x2 = dynamicsymbols("x1 x2")
m1, m2, c1, c2, d1, d2 = sp.symbols("m1 m2 c1 c2 d1 d2")
F = sp.Symbol("F")                                    # input, values on the time grid

model = symdae.Model(
    "two_mass_oscillator",
    coordinates=[x1, x2],
    mass_matrix=sp.diag(m1, m2),
    forces=[F - c1 * x1 - d1 * x1.diff(t) - c2 * (x1 - x2) - d2 * (x1.diff(t) - x2.diff(t)),
            c2 * (x1 - x2) + d2 * (x1.diff(t) - x2.diff(t))],
    parameters={m1: 1.0, m2: 1.0, c1: 1000.0, c2: 1100.0, d1: 1.0, d2: 1.0},
    inputs=[F],
    outputs={"x2": x2, "v1": x1.diff(t), "v2": x2.diff(t), "x1": x1, "a2": x2.diff(t, 2)},
    units={"x2": "m", "v1": "m/s", "v2": "m/s", "x1": "m", "a2": "m/s^2", "F": "N",
           m1: "kg", m2: "kg", c1: "N/m", c2: "N/m", d1: "N*s/m", d2: "N*s/m"},
)

FMAX = 1.0                                            # input bounds [-FMAX, FMAX] in N
T_END = 1.0
START = {"c2": 1000.0}
FREE = ["c2"]
OUTPUTS = ["x2"]
REFERENCE_INPUTS = {
    "F0": 0.5 * FMAX,                                  # the paper's start input
    "sine": lambda time: FMAX * np.sin(2 * np.pi * time / T_END),   # comparison (spec)
}
SCENARIO = symdae.Scenario(t_end=T_END, h=1e-3, alpha=-0.1, inputs={"F": REFERENCE_INPUTS["F0"]})
DESIGN = {"inputs": {"F": (-FMAX, FMAX)}, "start_input": {"F": REFERENCE_INPUTS["F0"]},
          "end": {"v1": 0.0, "v2": 0.0}}
