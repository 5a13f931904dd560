"""symdae identify reports standard errors, correlations and warnings; --method least_squares
and --noise."""
from __future__ import annotations

import json
import math

import pytest

from symdae.cli.main import main


def test_identify_reports_statistics(tmp_path, capsys):
    out = tmp_path / "two_mass"
    assert main(["identify", "two_mass_oscillator", "--method", "least_squares", "--noise",
                 "x2=1e-6", "--quiet", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "statistics (noise given: x2 1e-06" in printed and "c2: 1100 +- 0.0637" in printed
    report = json.loads((out / "report.json").read_text())
    res = report["result"]
    assert res["method"] == "least_squares" and res["success"] is True
    assert max(report["relative_error"].values()) < 1e-12
    st = res["statistics"]
    # the left-rectangle cost of the CLI uses samples 0..N-1 (1000 of them)
    assert st["samples"] == {"x2": 1000} and st["noise"] == {"x2": 1e-6}
    se = st["standard_errors"]["c2"]
    assert se == pytest.approx(1 / math.sqrt(st["fisher_information"]["matrix"][0][0]),
                               rel=1e-12)
    assert se == pytest.approx(0.0637, rel=2e-3)


def test_identify_estimates_the_noise_and_warns(tmp_path, capsys):
    out = tmp_path / "osc"
    assert main(["identify", "oscillator", "--free", "c,d", "--start", "c=30", "--start",
                 "d=0.6", "--t-end", "2", "--outputs", "a", "--quiet", "--method", "lm",
                 "--data-noise", "0.05", "--seed", "4", "--out-dir", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["data"]["noise"] == {"a": 0.05} and report["data"]["seed"] == 4
    st = report["result"]["statistics"]
    assert st["noise_source"] == "estimated from the residual"
    assert st["noise"]["a"] == pytest.approx(0.05, rel=0.1)
    assert st["correlation"][0][1] == st["correlation"][1][0]
    assert "correlation: c-d" in capsys.readouterr().out


def test_noise_free_twin_data_report_no_standard_errors(tmp_path, capsys):
    """Synthetic data without --data-noise: the report says why there are no standard errors
    (none from a round-off residual) and how to get them."""
    out = tmp_path / "twin"
    assert main(["identify", "oscillator", "--free", "c", "--start", "c=30", "--t-end", "1",
                 "--outputs", "a", "--quiet", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "no statistics: the residual of output 'a'" in printed
    assert "the data carry no noise" in printed and "+-" not in printed
    report = json.loads((out / "report.json").read_text())
    assert report["result"]["statistics"] is None
    assert "--noise" in report["result"]["statistics_note"]


def test_bad_noise_on_the_command_line(tmp_path, capsys):
    args = ["identify", "two_mass_oscillator", "--quiet", "--out-dir", str(tmp_path)]
    assert main([*args, "--noise", "0"]) == 2
    assert "noise level (standard deviation) of output 'x2' must be a positive" in \
        capsys.readouterr().err
    assert main([*args, "--noise", "x9=1e-3"]) == 2
    assert "noise given for ['x9']" in capsys.readouterr().err
    assert main([*args, "--noise", "x2=abc"]) == 2
    assert "expected NAME=SIGMA or SIGMA" in capsys.readouterr().err


def test_identify_off_grid_data_counts_the_measured_samples(tmp_path, capsys):
    """Data at 99.3 Hz (off a 1 kHz grid, starting after t0 and ending before t_end, with
    noise): the report counts the measured samples the cost compares, states the interval
    they cover, and --t0 moves the interval's start."""
    import numpy as np

    import symdae

    model, _ = symdae.load_model("oscillator")
    run = symdae.compile_model(model).simulate(t_end=2.0, h=1e-3, alpha=-0.1)
    t = 0.0137 + np.arange(190) / 99.3
    q = np.interp(t, run.t, run.outputs["q"]) + 1e-3 * np.random.default_rng(5).standard_normal(190)
    symdae.Measurement.from_arrays(t, q=q).to_csv(tmp_path / "bench.csv")
    out = tmp_path / "osc"
    assert main(["identify", "oscillator", "--data", str(tmp_path / "bench.csv"), "--free",
                 "c,d", "--t-end", "2", "--outputs", "q", "--quiet", "--method", "lm",
                 "--out-dir", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: the data of 'q' cover [0.0137, 1.9" in err and "(189 samples)" in err
    report = json.loads((out / "report.json").read_text())
    compared = report["data"]["compared"]["q"]
    assert compared["samples"] == 189 and compared["span"][0] == pytest.approx(0.0137)
    assert compared["comparison"] == "model interpolated to the samples"
    st = report["result"]["statistics"]
    assert st["samples"] == {"q": 189} and st["degrees_of_freedom"] == 187
    assert st["noise"]["q"] == pytest.approx(1e-3, rel=0.15)
    # --t0: the interval starts later, fewer samples are compared
    assert main(["identify", "oscillator", "--data", str(tmp_path / "bench.csv"), "--free",
                 "c,d", "--t0", "0.5", "--t-end", "2", "--outputs", "q", "--quiet",
                 "--method", "lm", "--out-dir", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["scenario"]["t0"] == 0.5
    n = int(np.count_nonzero((t >= 0.5) & (t <= 2.0))) - 1
    assert report["data"]["compared"]["q"]["samples"] == n
    assert report["result"]["statistics"]["samples"] == {"q": n}


def test_the_verdict_on_synthetic_data_says_when_a_converged_fit_is_wrong(tmp_path, capsys):
    """The optimiser's "converged" only says it cannot improve nearby: from c = 400 (true 40)
    L-BFGS-B converges to a local minimum far off, and the fit's verdict (the residual far
    above the data's noise, and correlated) makes it a failure that says so; from a good start on
    noise-free data the verdict is the true values, and with noise it counts standard
    errors."""
    base = ["identify", "oscillator", "--free", "c", "--t-end", "4", "--outputs", "q",
            "--quiet", "--method", "L-BFGS-B"]
    assert main([*base, "--start", "c=400", "--out-dir", str(tmp_path / "far")]) == 0
    report = json.loads((tmp_path / "far" / "report.json").read_text())
    assert report["result"]["success"] is False and report["relative_error"]["c"] > 1.0
    assert report["result"]["verdict"]["local_minimum"] is True
    assert report["verdict"].startswith("the fit leaves") and "c is" in report["verdict"]
    assert "a local minimum is likely" in capsys.readouterr().out
    assert main([*base, "--start", "c=38", "--out-dir", str(tmp_path / "near")]) == 0
    report = json.loads((tmp_path / "near" / "report.json").read_text())
    assert report["verdict"] == "converged to the true values"
    assert main([*base, "--start", "c=38", "--data-noise", "1e-3", "--out-dir",
                 str(tmp_path / "noisy")]) == 0
    report = json.loads((tmp_path / "noisy" / "report.json").read_text())
    assert report["verdict"] == "converged to the true values within 3 standard errors"
