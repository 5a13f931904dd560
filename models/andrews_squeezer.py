"""Andrews' squeezing mechanism: seven rigid bodies in a plane, joined by joints without
friction, in relative joint angles; the classic index-3 test problem (E. Hairer, G. Wanner,
Solving Ordinary Differential Equations II, section VII.7, eq. (7.11); the IVP test set of
Mazzia and Magherini). SI units.

Coordinates q = (beta, Theta, gamma, Phi, delta, Omega, epsilon): 7 angles, 6 loop-closure
constraints, 1 degree of freedom. The mass matrix depends on q (cos Theta, sin Phi,
sin Omega); the forces hold the velocity terms of the bodies' kinetic energy, a driving torque
``mom`` on the crank and a spring (stiffness ``c0``, free length ``lo``) between the point D of
body 3 and the fixed point C. Started at rest from the test set's consistent positions.
Outputs: the crank angle beta and the spring's length.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
q = dynamicsymbols("beta Theta gamma Phi delta Omega epsilon")
be, th, ga, ph, de, om, ep = q
bep, thp, gap, php, dep, omp, epp = (x.diff(t) for x in q)
mom, c0, lo = sp.symbols("mom c0 lo")

# inertia data: masses [kg] and moments of inertia [kg m^2] of the seven bodies
m1, m2, m3, m4, m5, m6, m7 = .04325, .00365, .02373, .00706, .07050, .00706, .05498
i1, i2, i3, i4, i5, i6, i7 = 2.194e-6, 4.410e-7, 5.255e-6, 5.667e-7, 1.169e-5, 5.667e-7, 1.912e-5
# geometry [m]
xa, ya, xb, yb, xc, yc = -.06934, -.00227, -.03635, .03273, .014, .072
d, da, e, ea, rr, ra = 28e-3, 115e-4, 2e-2, 1421e-5, 7e-3, 92e-5
ss, sa, sb, sc, sd = 35e-3, 1874e-5, 1043e-5, 18e-3, 2e-2
ta, tb, u, ua, ub, zf, zt, fa = 2308e-5, 916e-5, 4e-2, 1228e-5, 449e-5, 2e-2, 4e-2, 1421e-5

M = sp.zeros(7, 7)
M[0, 0] = m1 * ra**2 + m2 * (rr**2 - 2 * da * rr * sp.cos(th) + da**2) + i1 + i2
M[1, 0] = M[0, 1] = m2 * (da**2 - da * rr * sp.cos(th)) + i2
M[1, 1] = m2 * da**2 + i2
M[2, 2] = m3 * (sa**2 + sb**2) + i3
M[3, 3] = m4 * (e - ea)**2 + i4
M[4, 3] = M[3, 4] = m4 * ((e - ea)**2 + zt * (e - ea) * sp.sin(ph)) + i4
M[4, 4] = (m4 * (zt**2 + 2 * zt * (e - ea) * sp.sin(ph) + (e - ea)**2)
           + m5 * (ta**2 + tb**2) + i4 + i5)
M[5, 5] = m6 * (zf - fa)**2 + i6
M[6, 5] = M[5, 6] = m6 * ((zf - fa)**2 - u * (zf - fa) * sp.sin(om)) + i6
M[6, 6] = (m6 * ((zf - fa)**2 - 2 * u * (zf - fa) * sp.sin(om) + u**2)
           + m7 * (ua**2 + ub**2) + i6 + i7)

# the spring between D (on body 3) and C
xd = sd * sp.cos(ga) + sc * sp.sin(ga) + xb
yd = sd * sp.sin(ga) - sc * sp.cos(ga) + yb
length = sp.sqrt((xd - xc)**2 + (yd - yc)**2)
force = -c0 * (length - lo) / length
fx, fy = force * (xd - xc), force * (yd - yc)
forces = [
    mom - m2 * da * rr * thp * (thp + 2 * bep) * sp.sin(th),
    m2 * da * rr * bep**2 * sp.sin(th),
    fx * (sc * sp.cos(ga) - sd * sp.sin(ga)) + fy * (sd * sp.cos(ga) + sc * sp.sin(ga)),
    m4 * zt * (e - ea) * dep**2 * sp.cos(ph),
    -m4 * zt * (e - ea) * php * (php + 2 * dep) * sp.cos(ph),
    -m6 * u * (zf - fa) * epp**2 * sp.cos(om),
    m6 * u * (zf - fa) * omp * (omp + 2 * epp) * sp.cos(om),
]
constraints = [
    rr * sp.cos(be) - d * sp.cos(be + th) - ss * sp.sin(ga) - xb,
    rr * sp.sin(be) - d * sp.sin(be + th) + ss * sp.cos(ga) - yb,
    rr * sp.cos(be) - d * sp.cos(be + th) - e * sp.sin(ph + de) - zt * sp.cos(de) - xa,
    rr * sp.sin(be) - d * sp.sin(be + th) + e * sp.cos(ph + de) - zt * sp.sin(de) - ya,
    rr * sp.cos(be) - d * sp.cos(be + th) - zf * sp.cos(om + ep) - u * sp.sin(ep) - xa,
    rr * sp.sin(be) - d * sp.sin(be + th) - zf * sp.sin(om + ep) + u * sp.cos(ep) - ya,
]
START_POSITIONS = (-0.0617138900142764496358948458001, 0.0, 0.455279819163070380255912382449,
                   0.222668390165885884674473185609, 0.487364979543842550225598953530,
                   -0.222668390165885884674473185609, 1.23054744454982119249735015568)

model = symdae.Model(
    "andrews_squeezer",
    coordinates=q,
    mass_matrix=M,
    forces=forces,
    constraints=constraints,
    parameters={mom: 0.033, c0: 4530.0, lo: 0.07785},
    outputs={"beta": be, "spring": length},
    initial_state=dict(zip(q, START_POSITIONS)),
)

SCENARIO = {"t_end": 0.03, "h": 1e-5, "alpha": -0.1}
OUTPUTS = ["beta", "spring"]
FREE = ["mom", "c0"]
START = {"mom": 0.03, "c0": 4000.0}
