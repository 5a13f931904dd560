"""
A slider-crank in redundant coordinates
=======================================

``models/slider_crank.py``: five coordinates (the crank angle and two pin positions), four
holonomic constraints (lengths inside them are parameters), a motor torque on the crank and a
spring-damper on the slider, written as a Lagrangian. The integrator keeps every constraint at
round-off (index 3, nothing eliminated) and returns the multipliers: here the rod force and
the guide's normal force, declared as outputs.
"""
import matplotlib.pyplot as plt
import numpy as np

import symdae

model, ns = symdae.load_model("slider_crank")
system = symdae.compile_model(model)
traj = system.simulate(t_end=3.0, h=1e-3, alpha=-0.1)
print(traj.summary())

# %%
# Motion, forces and the constraints' residual
# --------------------------------------------
p = dict(zip(model.parameter_names, model.nominal_values))
phi, x1, y1, x2, y2 = (traj.q[:, j] for j in range(5))
rod = np.hypot(x2 - x1, y2 - y1) - p["l"]             # the rod's length error
fig, axes = plt.subplots(3, 1, figsize=(7, 7), sharex=True, layout="constrained")
axes[0].plot(traj.t, traj.outputs["x_s"])
axes[0].set(ylabel="slider x [m]")
axes[1].plot(traj.t, traj.outputs["F_rod"], label="rod force")
axes[1].plot(traj.t, traj.outputs["N_guide"], label="guide normal force")
axes[1].set(ylabel="force [N]")
axes[1].legend()
axes[2].semilogy(traj.t, np.abs(rod) + 1e-20)
axes[2].set(xlabel="t [s]", ylabel="|rod length error| [m]")
print(f"largest rod length error: {np.max(np.abs(rod)):.1e} m")
