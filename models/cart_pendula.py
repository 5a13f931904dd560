"""Cart with three pendula coupled by rotational springs and dampers (frequency-domain paper, 5.1).

The first example of Oberpeilsteiner et al., "A frequency domain approach for parameter
identification in multibody dynamics", Multibody Syst Dyn 43 (2018): a cart on a rail carries a
chain of three rigid pendula, a discretised flexible beam. The paper's parameter table is an image
missing from the text; the dimensions here are the reconstruction of
shared/specs/frequency-domain.md section 3.2, chosen to reproduce the paper's two reported
frequencies (rigid mode about 0.17 Hz, first bending mode in [1.25, 1.45] Hz).

    cart (m_c) --x-->  F(t) - d_c x'
      | hinge (free)
      o  rod 1 (m, l), angle phi1 from the downward vertical
      | hinge: spring c_f, damper d_f on phi2 - phi1
      o  rod 2
      | hinge: spring c_f, damper d_f on phi3 - phi2
      o  rod 3

Minimal coordinates q = (x, phi1, phi2, phi3): cart position and the absolute angles of the rods
(uniform rods, inertia m l^2/12 about their centres), gravity in the plane. Excitation: a smooth
doublet on the cart, F = F0 s exp(-s^2), s = (t - t_c)/tau (zero net impulse, so the cart does
not drift away; it excites 0.17-4 Hz).

The paper's identification: c_f and d_f from the amplitude spectrum of phi1 on the band of the
first bending mode, [1.25, 1.45] Hz. The data come from c_f = 10, d_f = 0.02, d_c = 0.01 (the
nominal values below); the identification model uses d_c = 0.1 (MODEL_ERROR, a deliberate model
error that mostly damps the rigid mode) and starts from c_f = 8.5, d_f = 0.15. Paper: c_f = 9.98,
d_f = 0.019 within 10 BFGS iterations.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
x, phi1, phi2, phi3 = dynamicsymbols("x phi1 phi2 phi3")
m_c, m, l, g = sp.symbols("m_c m l g")              # cart mass, rod mass and length, gravity
c_f, d_f, d_c = sp.symbols("c_f d_f d_c")           # beam spring [N m/rad], damper, cart friction
F0, t_c, tau = sp.symbols("F0 t_c tau")             # doublet amplitude [N], centre, width [s]

phis = [phi1, phi2, phi3]
T = m_c * x.diff(t)**2 / 2
V = 0
hinge_x, hinge_y = x, 0                             # the hinge of the current rod
for phi in phis:
    xc = hinge_x + l / 2 * sp.sin(phi)              # centre of the rod
    yc = hinge_y - l / 2 * sp.cos(phi)
    T += m / 2 * (xc.diff(t)**2 + yc.diff(t)**2) + m * l**2 / 24 * phi.diff(t)**2
    V += m * g * yc
    hinge_x, hinge_y = hinge_x + l * sp.sin(phi), hinge_y - l * sp.cos(phi)
V += c_f / 2 * ((phi2 - phi1)**2 + (phi3 - phi2)**2)

s = (t - t_c) / tau
F = F0 * s * sp.exp(-s**2)
damper12 = d_f * (phi2.diff(t) - phi1.diff(t))      # relative dampers, same pattern as springs
damper23 = d_f * (phi3.diff(t) - phi2.diff(t))

model = symdae.Model(
    "cart_pendula",
    coordinates=[x, phi1, phi2, phi3],
    lagrangian=T - V,
    forces=[F - d_c * x.diff(t), damper12, damper23 - damper12, -damper23],
    parameters={
        c_f: 10.0, d_f: 0.02,                        # to identify (true values)
        d_c: 0.01,                                    # cart friction of the data
        m_c: 0.5, m: 0.02, l: 4.7, g: 9.81,
        F0: 1.0, t_c: 0.5, tau: 0.1,
    },
    outputs={"phi1": phi1, "x": x, "phi3": phi3},
    units={"phi1": "rad", "x": "m", "phi3": "rad", phi2: "rad", c_f: "N*m/rad",
           d_f: "N*m*s/rad", d_c: "N*s/m"},
)

# The paper's identification (spec section 3.2): start values, free parameters, the output and
# band of the frequency-domain cost, the identification model's deliberate error, and the run:
# 40 s (band lines k/40 Hz: 1.25, 1.275, ..., 1.45, nine lines), h = 5 ms, alpha = -0.05.
START = {"c_f": 8.5, "d_f": 0.15}
FREE = list(START)
OUTPUTS = ["phi1"]
BAND = (1.25, 1.45)
MODEL_ERROR = {"d_c": 0.1}
SCENARIO = symdae.Scenario(t_end=40.0, h=0.005, alpha=-0.05)
