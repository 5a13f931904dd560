"""Cart pendulum of the input-design paper in redundant coordinates (input-design spec section 5).

The same system as ``cart_pendulum`` (cart xc with ground friction dc, hanging pendulum with
joint friction dp, centre of gravity at distance sp from the joint, inertia Jp about it, force F
on the cart), but the pendulum's centre of gravity (xp, yp) and its angle phi are coordinates of
their own, tied to the cart by the two revolute-joint constraints

    xp - xc - sp sin(phi) = 0,    yp + sp cos(phi) = 0.

sp sits inside the constraints (and in the initial state yp0 = -sp), so its derivatives go
through dC/dp and the constraint Jacobian's derivatives. HHT on these coordinates is a
different discrete scheme from the minimal model's, so the two agree to the integration error,
not step by step. Parameters, inputs, START, FREE and SCENARIO as in ``cart_pendulum``.
"""
import numpy as np
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
xc, xp, yp, phi = dynamicsymbols("xc xp yp phi")
mc, mp, Jp, dc, g, sp_, dp = sp.symbols("mc mp Jp dc g sp dp")
F = sp.Symbol("F")                                    # input, values on the time grid

model = symdae.Model(
    "cart_pendulum_redundant",
    coordinates=[xc, xp, yp, phi],
    mass_matrix=sp.diag(mc, mp, mp, Jp),
    forces=[F - dc * xc.diff(t), 0, -mp * g, -dp * phi.diff(t)],
    constraints=[xp - xc - sp_ * sp.sin(phi), yp + sp_ * sp.cos(phi)],
    parameters={mc: 1.0, mp: 0.5, Jp: 0.005, dc: 0.5, g: 9.81, sp_: 0.21, dp: 0.0055},
    inputs=[F],
    outputs={"phi": phi, "vc": xc.diff(t), "phidot": phi.diff(t), "xc": xc},
    initial_state={yp: -sp_},
)

FMAX = 2.0                                            # input bounds [-FMAX, FMAX] in N
T_END = 2.0
START = {"sp": 0.2, "dp": 0.005}
FREE = ["sp", "dp"]
OUTPUTS = ["phi"]
REFERENCE_INPUTS = {
    "F0": 0.5 * FMAX,
    "sine": lambda time: FMAX * np.sin(2 * np.pi * time / T_END),   # the paper's Fcomp
}
SCENARIO = symdae.Scenario(t_end=T_END, h=1e-3, alpha=-0.1,
                           inputs={"F": REFERENCE_INPUTS["sine"]})
DESIGN = {"inputs": {"F": (-FMAX, FMAX)}, "start_input": {"F": REFERENCE_INPUTS["F0"]},
          "end": {"phi": 0.0, "vc": 0.0, "phidot": 0.0}}
