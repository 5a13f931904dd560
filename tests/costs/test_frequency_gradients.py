"""Exact gradients of the frequency-domain costs on simulated trajectories.

The Fourier coefficients are a fixed linear map of the output samples, so a FourierCost's dJ/dS
is exact and the discrete adjoint gives the exact gradient of the discrete cost. Checked as in
tests/simulation/test_gradients.py, on three bundled models (pendulum and slider_crank are constrained,
index-3; cart_pendula is the frequency-domain paper's example), for every cost kind and for a
rectangular and a Hann window:

* adjoint = tangent-linear sweep contracted with dJ/dS, to TLM_TOL (1e-10) norm-wise in
  log-parameter scaling (g_k |p_k|), and per parameter with a meaningful sensitivity;
* central finite differences: with relative steps 5e-4 and 2.5e-4 every parameter whose FD error
  is above RICH_FLOOR of the gradient norm shows it falling by a factor in RATIO (4 for the
  O(delta^2) truncation error) when the step is halved; with the case's small step (1e-4 to
  2.5e-6, where the truncation error has fallen below FD_TOL but J's round-off noise does not
  yet show) the FD gradient agrees with the adjoint to FD_TOL.

The data come from a run at perturbed parameters, so every residual is O(1).
``pytest tests/costs/test_frequency_gradients.py -s`` prints the measured errors.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytest

import symdae
from symdae.costs.fourier import Window
from symdae.costs.frequency import KINDS, FourierCost
from symdae.data.measurement import Measurement
from symdae.simulation.sensitivity import adjoint_gradient, tangent

TLM_TOL = 1e-10
SENSITIVE = 1e-2
FD_TOL = 2e-6
RICH_FLOOR = 1e-7
RATIO = (3.2, 5.0)


@dataclass(frozen=True)
class Case:
    model: str
    output: str
    t_end: float
    h: float
    alpha: float
    rect: tuple          # (start, end, f_lo, f_hi) of a rectangular band window
    hann: tuple          # the same for a Hann window
    fd: float            # small relative FD step for the accuracy check


CASES = [
    Case("pendulum", "x", 4.0, 1e-3, -0.3, (0.0, 4.0, 0.25, 1.5), (0.5, 3.5, 0.3, 1.4), 1e-4),
    Case("slider_crank", "x_s", 1.0, 1e-3, -0.3, (0.0, 1.0, 2.0, 20.0), (0.2, 1.0, 2.5, 15.0),
         5e-6),
    Case("cart_pendula", "phi1", 20.0, 0.01, -0.05, (0.0, 20.0, 1.2, 1.5),
         (2.0, 18.0, 0.1, 1.5), 2.5e-6),
]


@functools.cache
def compiled(name: str):
    model, _ = symdae.load_model(name)
    return symdae.compile_model(model)


def simulate(system, case, p, store=False):
    return system.simulate(t_end=case.t_end, h=case.h, alpha=case.alpha,
                           params=dict(zip(system.model.parameter_names, p)),
                           store_factorizations=store)


def scaled_error(g, ref, p) -> float:
    s = np.abs(p)
    return float(np.max(np.abs(g - ref) * s) / np.max(np.abs(ref) * s))


@dataclass
class Sweeps:
    """Everything one model's checks share: the trajectory, its tangent, FD trajectories."""

    system: object
    p0: np.ndarray
    traj: object
    ds: np.ndarray           # (N+1, n_s, n_p)
    data: Measurement
    fd: dict                 # (k, sign, step index) -> trajectory


def steps(case: Case) -> tuple:
    return (5e-4, 2.5e-4, case.fd)


@functools.cache
def sweeps(case: Case) -> Sweeps:
    system = compiled(case.model)
    names = system.model.parameter_names
    p0 = np.array(system.model.nominal_values, dtype=float)
    p_data = p0 * (1.0 + 0.05 * np.sin(np.arange(len(p0)) + 1.0))
    data = Measurement.from_trajectory(simulate(system, case, p_data), [case.output])
    traj = simulate(system, case, p0, store=True)
    ds = tangent(system, traj, names).ds
    fd = {}
    for k in range(len(p0)):
        for j, rel in enumerate(steps(case)):
            for sgn in (1, -1):
                p = p0.copy()
                p[k] += sgn * rel * abs(p0[k])
                fd[k, sgn, j] = simulate(system, case, p)
    return Sweeps(system, p0, traj, ds, data, fd)


def make_cost(case: Case, kind: str, window: str, data) -> FourierCost:
    start, end, lo, hi = case.rect if window == "rectangular" else case.hann
    win = Window.over_band(start, end, lo, hi, shape=window)
    return FourierCost(case.output, win, data, kind=kind, amplitude_scale="data")


def check_cost(case: Case, cost: FourierCost, label: str) -> None:
    """Adjoint against tangent (TLM_TOL), FD step halving (RATIO) and FD at the case's small
    step (FD_TOL), as the module docstring says."""
    sw = sweeps(case)
    system, p0 = sw.system, sw.p0
    J, dPhi = cost.evaluate(system, sw.traj)
    assert J > 0
    g_adj = adjoint_gradient(system, sw.traj, dPhi)
    g_tlm = np.einsum("is,isk->k", dPhi, sw.ds)
    err_tlm = scaled_error(g_adj, g_tlm, p0)
    sens = np.abs(g_tlm * p0)
    keep = sens >= SENSITIVE * sens.max()
    per_param = np.max(np.abs(g_adj - g_tlm)[keep] / np.abs(g_tlm)[keep])

    scale = np.max(np.abs(g_adj * p0))
    e = []
    for j, rel in enumerate(steps(case)):
        g = np.array([(cost.evaluate(system, sw.fd[k, 1, j])[0]
                       - cost.evaluate(system, sw.fd[k, -1, j])[0]) / (2 * rel * abs(p0[k]))
                      for k in range(len(p0))])
        e.append(np.abs(g - g_adj) * np.abs(p0) / scale)
    print(f"\n{case.model} {label:22s} J = {J:.3e}  tlm {err_tlm:.1e} "
          f"(per parameter {per_param:.1e})  FD {e[0].max():.2e} -> {e[1].max():.2e}, "
          f"{e[2].max():.2e} at {case.fd:g}")
    assert err_tlm <= TLM_TOL and per_param <= TLM_TOL
    assert e[2].max() <= FD_TOL
    above = e[0] > RICH_FLOOR
    assert above.any(), "no FD error above the floor: the step shows nothing"
    ratios = e[0][above] / e[1][above]
    print(f"   error ratios for step halving {np.round(ratios, 2)}")
    assert np.all((ratios >= RATIO[0]) & (ratios <= RATIO[1])), ratios


@pytest.mark.parametrize("window", ["rectangular", "hann"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.model)
def test_adjoint_equals_tangent_and_finite_differences(case, kind, window):
    cost = make_cost(case, kind, window, sweeps(case).data)
    check_cost(case, cost, f"{kind} {window}")

def test_many_windows_and_a_prescribed_phase():
    """An analysis of several windows with their own shapes, lines and weights, one line with a
    prescribed phase function (order tracking against a given angle): still exact."""
    from symdae.costs.fourier import Line

    case = CASES[2]
    sw = sweeps(case)
    def theta(t):                       # a prescribed 'angle' of a slow run-up
        return 2 * np.pi * (1.3 * t + 0.01 * t**2)

    windows = [Window.over_band(2.0, 10.0, 1.0, 1.5, shape="hann", weights=0.5),
               Window.over_band(10.0, 20.0, 1.2, 1.5),
               Window(4.0, 16.0, (Line(1.3, 2.0, phase=theta), Line(2.6)), "hamming")]
    for kind in KINDS:
        cost = FourierCost(case.output, windows, sw.data, kind=kind, amplitude_scale="data")
        check_cost(case, cost, f"{kind} many windows")
