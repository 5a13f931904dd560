"""Memory estimates: a run that does not fit is refused before it allocates, in one line with
the estimate, the available memory and the options that shrink it; the estimate of
``symdae simulate`` is within 30 % of the measured peak (benchmarks/bench_memory_estimate.py
prints it for three models)."""
from __future__ import annotations

import time
import tracemalloc

import pytest

import symdae
from symdae.cli.main import main
from symdae.cli.simulate import simulate_estimate
from symdae.plots.base import plot_outputs


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
