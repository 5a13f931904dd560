"""``symdae design``: the optimal input as CSV, the report, the figures, the Monte Carlo table;
bad input exits with code 2 and names the problem."""
from __future__ import annotations

import csv
import json

import numpy as np

from symdae.cli.main import main


def test_design_writes_the_input_report_and_figures(tmp_path, capsys):
    out = tmp_path / "design"
    rc = main(["design", "two_mass_oscillator", "--t-end", "0.4", "--max-iterations", "40",
               "--quiet", "--out-dir", str(out), "--rms-noise", "0,1e-5", "--rms-points", "7",
               "--monte-carlo", "4", "--mc-noise", "x2=1e-6"])
    assert rc == 0
    with open(out / "input.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["t", "F"] and len(rows) == 402
    F = np.array([float(r[1]) for r in rows[1:]])
    assert F[0] == 0.5 and np.all(np.abs(F) <= 1.0)
    report = json.loads((out / "report.json").read_text())
    d = report["design"]
    assert d["criterion"] == "trace" and d["settings"]["end"].keys() == {"v1", "v2"}
    assert d["gain_trace_over_start"] > 1 and d["optimal"]["value"] < d["start"]["value"]
    assert np.allclose(d["settings"]["params"]["c2"], 1000.0)       # designed at START
    assert set(report["monte_carlo"]) == {"start", "sine", "optimal"}
    assert [s["noise"] for s in report["rms_scans"]] == [0.0, 1e-5]
    for name in ("convergence.png", "inputs.png", "outputs.png", "end_conditions.png",
                 "rms.png"):
        assert (out / name).stat().st_size > 1000, name
    text = capsys.readouterr().out
    assert "optimal input design of two_mass_oscillator" in text and "Monte Carlo" in text


def test_design_options_and_bad_input(tmp_path, capsys):
    out = tmp_path / "d"
    rc = main(["design", "cart_pendulum", "--t-end", "0.4", "--max-iterations", "5",
               "--criterion", "D", "--map", "logistic", "--knots", "9", "--input", "F=-1:1.5",
               "--start-input", "F=0.25", "--end", "phi=0", "--quiet", "--no-plots",
               "--out-dir", str(out)])
    assert rc == 0
    d = json.loads((out / "report.json").read_text())["design"]
    assert d["criterion"] == "D" and d["bound_map"] == "logistic"
    assert d["parameterisation"] == {"F": "knots"} and len(d["variables"]) == 9
    assert d["settings"]["bounds"] == {"F": [-1.0, 1.5]} and list(d["settings"]["end"]) == ["phi"]
    assert not (out / "inputs.png").exists()
    capsys.readouterr()
    for argv, message in (
            (["--input", "F=1:-1"], "input 'F': the lower bound 1 must be below"),
            (["--start-input", "F=3"], "initial input 'F' is 3"),
            (["--end", "omega=0"], "end condition on 'omega'"),
            (["--noise", "phi=-1"], "must be a positive finite number"),
            (["--monte-carlo", "3"], "--monte-carlo needs --mc-noise")):
        rc = main(["design", "cart_pendulum", "--t-end", "0.2", "--max-iterations", "1",
                   "--quiet", "--no-plots", "--out-dir", str(tmp_path / "bad"), *argv])
        assert rc == 2
        assert message in capsys.readouterr().err
