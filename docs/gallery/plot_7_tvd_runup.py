"""
Engine orders in a run-up: a torsional vibration damper
=======================================================

A quick variant of ``examples/tvd_runup.py``: the four-cylinder crankshaft with its torsional
vibration damper (``models/four_cylinder_tvd.py``: 26 coordinates, 16 constraints), a short
run-up through the damper's resonance (3900 -> 4700 rpm in 0.4 s), and the damper's two Maxwell
elements identified from the 4th, 6th and 8th engine orders of the crankshaft twist, from the
spec's start values, with the exact adjoint gradient.
"""
import matplotlib.pyplot as plt

import symdae
from symdae import Experiment, Measurement, OrderAnalysis, OrderCost, RunUp, identify

model, ns = symdae.load_model("four_cylinder_tvd")
system = symdae.compile_model(model)
params = {"n0": 3900.0, "n1": 4700.0, "t0": 0.02, "t1": 0.42}       # rpm, rpm, s, s
scenario = symdae.Scenario(t_end=0.42, h=5e-5, alpha=-0.05)
data = Measurement.from_trajectory(system.simulate(scenario, params=params), ["twist"])
analysis = OrderAnalysis.over_band(RunUp(**params), (4000, 4600), 50, orders=(4, 6, 8),
                                   tracking="angle")
cost = OrderCost("twist", analysis, data, amplitude_scale="data")
exp = Experiment(system, cost, scenario, params=params)
res = identify(exp, ns["FREE"], ns["START"], progress=False)
truth = dict(zip(model.parameter_names, model.nominal_values))
print(res.summary())
print("relative errors:", {k: f"{e:.1e}" for k, e in res.relative_error(truth).items()})

# %%
# The orders before and after
# ---------------------------
start = cost.curves(exp.simulate(ns["START"]))
found = cost.curves(exp.simulate(res.values))
rpm = analysis.speeds
fig, axes = plt.subplots(1, 3, figsize=(9, 3), sharex=True, layout="constrained")
for ax, order in zip(axes, (4, 6, 8)):
    ax.plot(rpm, 1e3 * cost.measured_curves.order(order), "k", lw=3, alpha=0.3, label="data")
    ax.plot(rpm, 1e3 * start.order(order), label="start")
    ax.plot(rpm, 1e3 * found.order(order), "--", label="identified")
    ax.set(title=f"order {order}", xlabel="speed [rpm]")
axes[0].set(ylabel="twist amplitude [mrad]")
axes[0].legend(fontsize="small")
