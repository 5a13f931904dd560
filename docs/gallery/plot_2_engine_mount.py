"""
Identifying the engine mount
============================

The discrete-adjoint paper's second example (``models/engine_mount.py``): four parameters of a
hydraulic engine mount (a cubic elastomer spring, its damper, a cubic hydro damper) from the
engine mass's acceleration, starting from the paper's start values. Data: a simulation at the
true values with 1 % noise. ``identify`` takes Gauss-Newton on the exact tangent Jacobian and
reports standard errors from the Fisher information at the result.
"""
import matplotlib.pyplot as plt
import numpy as np

import symdae

model, ns = symdae.load_model("engine_mount")
system = symdae.compile_model(model)
scenario = ns["SCENARIO"]                     # 1 s, h = 0.1 ms, alpha = -0.1
true = system.simulate(scenario)
rng = np.random.default_rng(1)
noise = 0.01 * np.std(true.outputs["a1"])
data = symdae.Measurement.from_arrays(true.t, a1=true.outputs["a1"]
                                      + noise * rng.standard_normal(true.t.size))
exp = symdae.Experiment(system, symdae.LeastSquares(data, ["a1"]), scenario)
res = symdae.identify(exp, ns["FREE"], ns["START"], progress=False)
print(res.summary())

# %%
# The fit and the convergence
# ---------------------------
start = system.simulate(scenario, params=ns["START"])
found = system.simulate(scenario, params=res.values)
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6), layout="constrained")
ax1.plot(data.t, data.values["a1"], ".", ms=1, color="0.6", label="data (1 % noise)")
ax1.plot(start.t, start.outputs["a1"], lw=0.8, label="start")
ax1.plot(found.t, found.outputs["a1"], lw=0.8, label="identified")
ax1.set(xlabel="t [s]", ylabel="a1 [m/s^2]", xlim=(0.4, 0.6))
ax1.legend(loc="upper right")
ax2.semilogy([e["iteration"] for e in res.history], [e["cost"] for e in res.history], "o-")
ax2.set(xlabel="iteration", ylabel="J")

# %%
# Against the true values, in standard errors
# -------------------------------------------
truth = dict(zip(model.parameter_names, model.nominal_values))
se = res.statistics.standard_errors
for k in ns["FREE"]:
    print(f"{k:>4}: {res.values[k]:.6g} (true {truth[k]:.6g}), "
          f"{(res.values[k] - truth[k]) / se[k]:+.2f} standard errors")
