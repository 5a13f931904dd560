"""
Stick-slip: a mass on a belt with Coulomb friction
==================================================

``models/belt_friction.py``: a mass on a spring lies on a moving belt; friction with a
Stribeck rise makes it stick to the belt, slip back and stick again. Two friction laws: the
regularised ``tanh(z / v_eps)`` (``model``) and the set-valued ``sign(z)`` (``model_sign``),
whose steps end on the switch while the mass sticks. The trajectory of a non-smooth model counts
the switches and the steps that lie on one.
"""
import matplotlib.pyplot as plt

import symdae

model, ns = symdae.load_model("belt_friction")
runs = {}
for label, m in (("tanh law", ns["model"]), ("sign law", ns["model_sign"])):
    runs[label] = symdae.compile_model(m).simulate(ns["SCENARIO"])      # 3 s, h = 1 ms
    c = runs[label].counters          # a smooth model has no switch counters
    print(f"{label}: {c.get('switches', 0)} switches, {c.get('on_switch', 0)} steps on a "
          f"switch, {c['newton_iterations'] / c['steps']:.1f} residual evaluations per step")

# %%
# Position and slip velocity
# --------------------------
# While the mass sticks its velocity equals the belt's (0.2 m/s): the slip velocity is zero
# to round-off with the sign law, a creep of about v_eps with the tanh law.
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True, layout="constrained")
for label, traj in runs.items():
    ax1.plot(traj.t, traj.outputs["x"], label=label)
    ax2.plot(traj.t, 0.2 - traj.outputs["v"], label=label)
ax1.set(ylabel="x [m]")
ax1.legend()
ax2.set(xlabel="t [s]", ylabel="slip velocity [m/s]")
