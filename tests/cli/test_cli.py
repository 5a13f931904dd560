"""The command line: simulate and identify write their files; bad input exits with code 2 and
a message naming the problem."""
from __future__ import annotations

import csv
import json

import numpy as np

from symdae.cli.main import main


def test_simulate_writes_csv_plot_and_summary(tmp_path, capsys):
    out = tmp_path / "sim"
    rc = main(["simulate", "pendulum", "--t-end", "0.5", "--h", "1e-3", "--alpha", "-0.3",
               "-p", "L=0.9", "--out-dir", str(out)])
    assert rc == 0
    with open(out / "trajectory.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][:3] == ["t", "q:x", "q:y"] and len(rows) == 502
    # states by kind and name, multipliers by their declared names, outputs by theirs
    assert {"v:x", "a:y", "lambda:lambda", "x", "vy", "ax"} <= set(rows[0])
    assert len(set(rows[0])) == len(rows[0])
    x, y = np.array([[float(r[1]), float(r[2])] for r in rows[1:]]).T
    assert np.max(np.abs(np.hypot(x, y) - 0.9)) < 1e-12     # the -p override took effect
    assert (out / "outputs.png").stat().st_size > 1000
    assert "500 steps" in (out / "summary.txt").read_text()
    assert "500 steps" in capsys.readouterr().out


def test_identify_oscillator_from_synthetic_data_and_from_its_csv(tmp_path):
    args = ["--free", "c,d", "--start", "c=30", "--start", "d=0.6", "--h", "1e-3",
            "--t-end", "2", "--outputs", "a", "--quiet"]
    out = tmp_path / "synthetic"
    assert main(["identify", "oscillator", *args, "--out-dir", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["data"]["synthetic"] is True
    assert max(report["relative_error"].values()) < 1e-8
    assert report["result"]["cost"] < 1e-20 * report["result"]["start_cost"]
    assert report["result"]["success"] is True
    for name in ("convergence.png", "fit.png", "data.csv"):
        assert (out / name).stat().st_size > 100
    # the synthetic data written there identify the same values when read back as a file
    out2 = tmp_path / "from_csv"
    assert main(["identify", "oscillator", *args, "--data", str(out / "data.csv"),
                 "--out-dir", str(out2)]) == 0
    r2 = json.loads((out2 / "report.json").read_text())
    assert r2["data"]["synthetic"] is False
    assert abs(r2["result"]["identified"]["c"] - 40.0) < 1e-6


def test_bad_input_exits_with_a_message(tmp_path, capsys):
    assert main(["identify", "oscillator", "--free", "cc", "--out-dir", str(tmp_path)]) == 2
    assert "--free 'cc': not a parameter of oscillator" in capsys.readouterr().err
    assert main(["simulate", "no_such_model", "--out-dir", str(tmp_path)]) == 2
    assert "no bundled model 'no_such_model'" in capsys.readouterr().err
    assert main(["simulate", "oscillator", "--h", "0.3", "--t-end", "1",
                 "--out-dir", str(tmp_path)]) == 2
    assert "not a whole multiple of h" in capsys.readouterr().err
