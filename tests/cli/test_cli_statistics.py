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
                 "--out-dir", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    st = report["result"]["statistics"]
    assert st["noise_source"] == "estimated from the residual"
    assert st["correlation"][0][1] == st["correlation"][1][0]
    assert "correlation: c-d" in capsys.readouterr().out


def test_bad_noise_on_the_command_line(tmp_path, capsys):
    args = ["identify", "two_mass_oscillator", "--quiet", "--out-dir", str(tmp_path)]
    assert main([*args, "--noise", "0"]) == 2
    assert "noise level (standard deviation) of output 'x2' must be a positive" in \
        capsys.readouterr().err
    assert main([*args, "--noise", "x9=1e-3"]) == 2
    assert "noise given for ['x9']" in capsys.readouterr().err
    assert main([*args, "--noise", "x2=abc"]) == 2
    assert "expected NAME=SIGMA or SIGMA" in capsys.readouterr().err
