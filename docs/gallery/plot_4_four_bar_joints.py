"""
A four-bar linkage from sympy.physics.mechanics
===============================================

``models/four_bar_joints.py`` builds a four-bar linkage as a ``sympy.physics.mechanics.System``
(three bars on PinJoints, a loop closure, gravity, a motor torque and a spring-damper) and
converts it with ``symdae.from_mechanics``. The loop closure stays two index-3 constraints.
Identify the spring's stiffness and damping from the rocker angle and the crank speed.
"""
import matplotlib.pyplot as plt

import symdae

model, ns = symdae.load_model("four_bar_joints")
system = symdae.compile_model(model)
scenario = ns["SCENARIO"]                            # 2 s, h = 2 ms, alpha = -0.3
data = symdae.Measurement.from_trajectory(system.simulate(scenario), ns["OUTPUTS"])
exp = symdae.Experiment(system, symdae.LeastSquares(data, ns["OUTPUTS"]), scenario)
res = symdae.identify(exp, ns["FREE"], ns["START"], progress=False)
truth = dict(zip(model.parameter_names, model.nominal_values))
print(res.summary())
print("relative errors:", {k: f"{e:.1e}" for k, e in res.relative_error(truth).items()})

# %%
# Start, data and identified model
# --------------------------------
start = system.simulate(scenario, params=ns["START"])
found = system.simulate(scenario, params=res.values)
fig, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True, layout="constrained")
for ax, name, unit in zip(axes, ns["OUTPUTS"], ("rad", "rad/s")):
    ax.plot(data.t, data.values[name], "k", lw=2.5, alpha=0.3, label="data")
    ax.plot(start.t, start.outputs[name], label="start")
    ax.plot(found.t, found.outputs[name], "--", label="identified")
    ax.set(ylabel=f"{name} [{unit}]")
axes[0].legend()
axes[1].set(xlabel="t [s]")
