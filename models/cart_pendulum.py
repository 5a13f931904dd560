"""Cart pendulum of the input-design paper (Oberpeilsteiner et al. 2017, section 4.2).

A cart (position xc, ground friction dc) carries a hanging pendulum (absolute angle phi, 0 down)
in a revolute joint with friction dp; sp is the distance from the joint to the pendulum's centre
of gravity, Jp its inertia about the centre of gravity. The force F pushes the cart; phi is
measured, sp and dp are identified. The paper's parameter table is an image; the values are
those of the input-design spec (section 7.2). The nominal sp = 0.21 m, dp = 0.0055 N m s/rad
are the "true" values of the spec's Monte Carlo study; START holds the prior guess (0.2, 0.005).
Reference inputs: F0 = 0.5 Fmax constant and the paper's comparison sine Fcomp = Fmax
sin(2 pi t / tf); SCENARIO runs Fcomp (t in [0, 2] s, h = 1e-3, alpha = -0.1, from rest).
DESIGN (``symdae design cart_pendulum``): F bounded to [-Fmax, Fmax], started from F0, end
conditions phi(tf) = vc(tf) = phidot(tf) = 0 (the paper's scrap function).
"""
import numpy as np
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
xc, phi = dynamicsymbols("xc phi")
mc, mp, Jp, dc, g, sp_, dp = sp.symbols("mc mp Jp dc g sp dp")
F = sp.Symbol("F")                                    # input, values on the time grid

coupling = mp * sp_ * sp.cos(phi)
model = symdae.Model(
    "cart_pendulum",
    coordinates=[xc, phi],
    mass_matrix=sp.Matrix([[mc + mp, coupling], [coupling, Jp + mp * sp_**2]]),
    forces=[F - dc * xc.diff(t) + mp * sp_ * phi.diff(t)**2 * sp.sin(phi),
            -mp * g * sp_ * sp.sin(phi) - dp * phi.diff(t)],
    parameters={mc: 1.0, mp: 0.5, Jp: 0.005, dc: 0.5, g: 9.81, sp_: 0.21, dp: 0.0055},
    inputs=[F],
    outputs={"phi": phi, "vc": xc.diff(t), "phidot": phi.diff(t), "xc": xc},
    units={"phi": "rad", "vc": "m/s", "phidot": "rad/s", "xc": "m", "F": "N", sp_: "m",
           mc: "kg", mp: "kg", Jp: "kg*m^2", dc: "N*s/m", dp: "N*m*s/rad", g: "m/s^2"},
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
