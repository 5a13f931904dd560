"""
A damped oscillator against its exact solution
==============================================

The discrete-adjoint paper's first example (``models/oscillator.py``): m q'' + d q' + c q = 0,
started from q0 = 1. The HHT scheme is second order: halving the step divides the error by
four. The adjoint gradient of a least-squares cost agrees with central finite differences.
"""
import matplotlib.pyplot as plt
import numpy as np

import symdae

model, ns = symdae.load_model("oscillator")
system = symdae.compile_model(model)
m, c, d = 1.0, 40.0, 0.4                  # the model's nominal values


def exact(t):
    """q(t) of the underdamped oscillator from q(0) = 1, q'(0) = 0."""
    delta, wd = d / (2 * m), np.sqrt(c / m - (d / (2 * m))**2)
    return np.exp(-delta * t) * (np.cos(wd * t) + delta / wd * np.sin(wd * t))


# %%
# The error at three step sizes
# -----------------------------
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), layout="constrained")
errors = {}
for h in (4e-3, 2e-3, 1e-3):
    traj = system.simulate(t_end=5.0, h=h, alpha=-0.1)
    errors[h] = np.max(np.abs(traj.outputs["q"] - exact(traj.t)))
    ax2.semilogy(traj.t, np.abs(traj.outputs["q"] - exact(traj.t)) + 1e-16, label=f"h = {h:g} s")
ax1.plot(traj.t, traj.outputs["q"], label="HHT, h = 1 ms")
ax1.plot(traj.t[::40], exact(traj.t[::40]), "k.", label="exact")
ax1.set(ylabel="q [m]")
ax1.legend()
ax2.set(xlabel="t [s]", ylabel="|error| [m]")
ax2.legend()
print("error ratios per halving:",
      [round(float(errors[2 * h] / errors[h]), 2) for h in (2e-3, 1e-3)])

# %%
# The exact gradient of a cost
# ----------------------------
# Least squares on the acceleration against data at the nominal values, evaluated at c = 38:
# the adjoint gradient with respect to every parameter, and central differences for c.
scenario = symdae.Scenario(t_end=5.0, h=1e-3, alpha=-0.1)
cost = symdae.LeastSquares({"a": system.simulate(scenario).outputs["a"]})


def J(c_value):
    return cost.evaluate(system, system.simulate(scenario, params={"c": c_value}))[0]


traj = system.simulate(scenario, params={"c": 38.0})
_, dJdS = cost.evaluate(system, traj)
grad = dict(zip(model.parameter_names, symdae.adjoint_gradient(system, traj, dJdS)))
fd = (J(38.0 * (1 + 1e-4)) - J(38.0 * (1 - 1e-4))) / (2 * 38.0 * 1e-4)
print(f"dJ/dc: adjoint {grad['c']:.10e}, central differences {fd:.10e}")
