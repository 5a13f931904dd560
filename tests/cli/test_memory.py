"""Memory estimates: a run that does not fit is refused before it allocates, in one line with
the estimate, the available memory and the options that shrink it; the estimate of
``symdae simulate`` is within 30 % of the measured peak (benchmarks/bench_memory_estimate.py
prints it for three models)."""
from __future__ import annotations

import re
import time
import tracemalloc

import numpy as np
import pytest

import symdae
from symdae.cli.main import main
from symdae.cli.simulate import simulate_estimate
from symdae.plots.base import plot_outputs
from symdae.simulation.memory import format_bytes


@pytest.mark.parametrize("argv, shrink", [
    (["simulate", "oscillator", "--t-end", "1e6", "--h", "1e-5", "--format", "none"],
     "a larger --h or a shorter --t-end"),
    (["design", "two_mass_oscillator", "--t-end", "1e4", "--h", "1e-8"],
     "a larger h or a shorter t_end (--h, --t-end), or fewer free parameters"),
])
def test_a_run_that_does_not_fit_is_refused_at_once(argv, shrink, tmp_path, capsys):
    main(["simulate", argv[1], "--t-end", "0.01", "--out-dir", str(tmp_path / "warm")])
    capsys.readouterr()
    t0 = time.perf_counter()
    assert main([*argv, "--out-dir", str(tmp_path / "out")]) == 2
    elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "needs about" in err and "of memory is available; shrink it with " + shrink in err
    assert elapsed < 5.0, elapsed          # no allocation, no sweep (about 0.1 s here)
    assert not any((tmp_path / "out").iterdir())


def test_the_simulate_estimate_is_within_30_percent_of_the_peak(tmp_path):
    model, _ = symdae.load_model("oscillator")
    system = symdae.compile_model(model)
    sc = symdae.Scenario(t_end=200.0, h=1e-3)
    estimate = simulate_estimate(system.sizes, sc, plot=True).total
    plot_outputs(system.simulate(t_end=0.01, h=1e-3), tmp_path / "warm.png")  # import, fonts
    tracemalloc.start()
    try:
        traj = system.simulate(sc)
        traj.to_csv(tmp_path / "trajectory.csv")
        plot_outputs(traj, tmp_path / "outputs.png")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0.7 < estimate / peak < 1.3, (estimate, peak)


@pytest.mark.parametrize("n, text", [
    (3.5 * 2**10, "3.5 KiB"), (512 * 2**20, "512 MiB"), (23.8 * 2**30, "23.8 GiB"),
    (1015 * 2**20, "1015 MiB"),            # .3g alone: 1.01e+03 MiB
    (999.9 * 2**20, "1000 MiB"), (1534 * 2**40, "1534 TiB"), (100, "0.0977 KiB"),
])
def test_sizes_in_messages_are_plain_numbers(n, text):
    assert format_bytes(n) == text


# ------------------------------------------------------------- one refusal per command
AVAILABLE = 2**16          # 64 KiB: a stand-in for a machine the run does not fit
# "<what> needs about <estimate> (<points> grid points x <bytes> bytes), 64 KiB of memory is
# available; shrink it with <options>"
REFUSAL = (r"needs about \d[\d.]* [KMGT]i?B \(\d+ grid points x \d+ bytes\), 64 KiB of "
           r"memory is available; shrink it with ")


@pytest.fixture
def small_memory(monkeypatch):
    import symdae.simulation.memory as memory

    monkeypatch.setattr(memory, "available_memory", lambda: AVAILABLE)
    monkeypatch.setattr(memory, "free_memory", lambda: 0)


@pytest.mark.parametrize("argv, what, shrink", [
    (["simulate", "oscillator", "--t-end", "10"], "the outputs of the run",
     "a larger --h or a shorter --t-end"),
    (["simulate", "oscillator", "--t-end", "10", "--format", "npz"],
     "the simulation and its outputs", "or --format csv or none (simulated in segments"),
    (["identify", "oscillator", "--free", "c,d", "--t-end", "10"],
     "(Gauss-Newton with 2 free parameters)", "method='L-BFGS-B' (its adjoint gradient is "
     "checkpointed)"),
    (["identify", "oscillator", "--free", "c,d", "--t-end", "10", "--method", "L-BFGS-B"],
     "(statistics of 2 free parameters)", "statistics=False"),
    (["identify", "flexible_beam", "--domain", "pod", "--modes", "3,4", "--basis",
      "simulated", "--t-end", "0.2"], "the runs of the fit plot",
     "a larger --h or a shorter --t-end"),
    (["identify", "cart_pendula", "--domain", "frequency", "--t-end", "20", "--contour", "0"],
     "cart_pendula-frequency", "a larger h, a shorter run"),
    (["design", "two_mass_oscillator"], "the input design",
     "a larger h or a shorter t_end (--h, --t-end), or fewer free parameters"),
    (["design", "two_mass_oscillator", "--monte-carlo", "8", "--mc-noise", "x2=1e-6"],
     "runs at once", "or fewer workers"),
])
def test_every_command_refuses_a_run_that_does_not_fit_before_it_writes(
        argv, what, shrink, tmp_path, capsys, small_memory):
    """Each command checks its one estimate before its first sweep: one line with the
    estimate, the available memory and the options that shrink it; no file written."""
    symdae.compile_model(symdae.load_model(argv[1])[0])      # built before it is timed
    capsys.readouterr()
    out = tmp_path / "out"
    t0 = time.perf_counter()
    assert main([*argv, "--out-dir", str(out)]) == 2
    elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert what in err and re.search(REFUSAL, err) and shrink in err, err
    assert not any(out.iterdir())
    assert elapsed < 5.0, elapsed       # the model's load; no sweep (a fraction of a second)


def test_the_contour_grid_counts_a_run_per_worker(tmp_path, capsys, small_memory,
                                                  monkeypatch):
    """--domain frequency draws its contour grid on every core at once: with eight, eight
    runs and their costs outweigh the fit."""
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    out = tmp_path / "out"
    assert main(["identify", "cart_pendula", "--domain", "frequency", "--t-end", "20",
                 "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "the contour grid, 8 points at once" in err and re.search(REFUSAL, err), err
    assert "--contour 0" in err and not any(out.iterdir())


def _refused_at_once(call, estimate) -> str:
    """The refusal's message, after checking that it allocated next to nothing of the
    estimate, at once."""
    from symdae.simulation.memory import MemoryLimitError

    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(MemoryLimitError) as info:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 1.0
    assert estimate > 10 * 2**20 and peak < 2**20, (estimate, peak)
    msg = str(info.value)
    assert re.search(REFUSAL, msg), msg
    return msg


@pytest.fixture(scope="module")
def oscillator(bundled):
    return bundled("oscillator")[0]


LONG = symdae.Scenario(t_end=1000.0, h=1e-3, alpha=-0.1)        # 10^6 steps


def test_system_simulate_refuses_before_it_allocates(oscillator, small_memory):
    from symdae.simulation.memory import forward_bytes

    est = (LONG.n_steps + 1) * forward_bytes(oscillator.sizes, LONG.scheme)
    msg = _refused_at_once(lambda: oscillator.simulate(LONG), est)
    assert msg.startswith("the trajectory needs about") and "a larger h or a shorter run" in msg


def _long_experiment(system, cost):
    return symdae.Experiment(system, cost, LONG)


def test_identify_refuses_an_order_fit_before_its_fourier_map(oscillator, small_memory):
    from symdae.costs.orders import OrderAnalysis, OrderCost, RunUp
    from symdae.identification.identify import identification_estimate

    analysis = OrderAnalysis.over_band(RunUp(600.0, 3000.0, 0.0, 1000.0), (900.0, 2700.0),
                                       60.0, (1, 2))
    cost = OrderCost("q", analysis, np.ones((2, analysis.n_speeds)))
    exp = _long_experiment(oscillator, cost)
    est = identification_estimate(exp, 2, "L-BFGS-B", statistics=False)
    # the map: per speed point, cosine and sine rows of 2 orders over the window's samples
    per, fixed = cost.memory(oscillator.sizes, LONG)
    assert fixed >= sum(16 * len(w.lines) * (w.length / LONG.h) for w in cost.windows)
    assert est.per_step > per and est.fixed == fixed
    msg = _refused_at_once(lambda: symdae.identify(exp, ["c", "d"], method="L-BFGS-B",
                                                   progress=False, statistics=False),
                           est.total)
    assert "(cost and adjoint gradient)" in msg and "(checkpointing)" in msg


def test_the_order_command_refuses_before_its_synthetic_data(oscillator, small_memory):
    from symdae.cli.orders import order_problem
    from symdae.costs.orders import RunUp

    msg = _refused_at_once(lambda: order_problem(
        oscillator, LONG, free=["c"], start={"c": 40.0}, output="q", orders=(1, 2),
        band_rpm=(900.0, 2700.0), step_rpm=60.0, runup=RunUp(600.0, 3000.0, 0.0, 1000.0)),
        (LONG.n_steps + 1) * 64)
    # with a short run-up window the two runs of the fit plot need more than the fit
    assert msg.startswith("the runs of the fit plot needs about")


def test_identify_refuses_a_pod_fit_by_its_snapshots(oscillator, small_memory):
    from symdae.identification.identify import identification_estimate

    cost = symdae.PODCost({o: None for o in ("q", "v", "a")}, ["q", "v", "a"], mode=[1, 2])
    exp = _long_experiment(oscillator, cost)
    est = identification_estimate(exp, 2, "L-BFGS-B")
    # the larger of the data's POD (6 x 3 outputs + 2) and an evaluation (3 + 2 + 3 + 9 + 6)
    assert cost.memory(oscillator.sizes, LONG) == (8 * 23, 0)
    # the trajectory (8 doubles a step) with the time and state terms kept for the
    # adjoint, and the cost's; no least-squares term: no statistics
    assert est.per_step == 8 * (8 + 23) + oscillator.sizes.kept_term_bytes
    msg = _refused_at_once(lambda: symdae.identify(exp, ["c", "d"], method="L-BFGS-B",
                                                   progress=False), est.total)
    assert "(cost and adjoint gradient)" in msg


def test_design_input_refuses_before_its_first_run(small_memory):
    from symdae.design.driver import design_estimate

    model, ns = symdae.load_model("two_mass_oscillator")
    system = symdae.compile_model(model)
    sc = ns["SCENARIO"].replace(t_end=1000.0)
    est = design_estimate(system, sc, ["c2"], 1, 1)
    msg = _refused_at_once(lambda: symdae.design_input(
        system, sc, ["c2"], ["x2"], inputs={"F": (-1.0, 1.0)}, progress=False), est.total)
    assert msg.startswith("the input design needs about")


def test_an_estimate_far_below_the_free_memory_does_not_read_the_available_memory(monkeypatch):
    """The check asks for MemAvailable (a parse of /proc/meminfo) only when the estimate
    exceeds half the free memory; above that the available memory decides."""
    import symdae.simulation.memory as memory

    read = []

    def available():
        read.append(1)
        return 10_000

    monkeypatch.setattr(memory, "available_memory", available)
    monkeypatch.setattr(memory, "free_memory", lambda: 20_000)
    memory.MemoryEstimate("a run", 10, 1_000).check()          # 10 kB: half the free memory
    assert read == []
    with pytest.raises(memory.MemoryLimitError, match=r"a run needs about 9.78 KiB.* 9.77 KiB "
                                                      r"of memory is available"):
        memory.MemoryEstimate("a run", 10, 1_001).check()      # a byte more: asked, and short
    assert read == [1]
    memory.MemoryEstimate("a run", 10, 999).check(available=9_990)   # given: not the free one
    with pytest.raises(memory.MemoryLimitError):
        memory.MemoryEstimate("a run", 10, 999).check(available=9_989)


def test_the_free_memory_is_read_from_the_system():
    import symdae.simulation.memory as memory

    free = memory.free_memory()
    assert 0 < free <= memory.physical_memory()
