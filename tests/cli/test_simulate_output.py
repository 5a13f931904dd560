"""symdae simulate: --every, --format csv|npz|none and the file-size limit."""
from __future__ import annotations

import csv

import numpy as np
import pytest

import symdae
from symdae.cli.main import main


def test_every_and_formats(tmp_path, capsys):
    base = ["simulate", "oscillator", "--t-end", "1", "--h", "1e-3", "--no-plot"]
    assert main([*base, "--out-dir", str(tmp_path / "all")]) == 0
    with open(tmp_path / "all" / "trajectory.csv") as fh:
        rows = list(csv.reader(fh))
    header, full = rows[0], np.array(rows[1:], dtype=float)
    assert full.shape[0] == 1001
    assert main([*base, "--every", "10", "--out-dir", str(tmp_path / "thin")]) == 0
    assert "every 10-th step" in capsys.readouterr().out
    with open(tmp_path / "thin" / "trajectory.csv") as fh:
        thin = np.array(list(csv.reader(fh))[1:], dtype=float)
    np.testing.assert_array_equal(thin, full[::10])        # the same values, every 10th row
    assert main([*base, "--format", "npz", "--every", "10", "--out-dir",
                 str(tmp_path / "npz")]) == 0
    with np.load(tmp_path / "npz" / "trajectory.npz") as z:
        assert list(z.keys()) == header
        np.testing.assert_array_equal(np.column_stack([z[k] for k in header]), full[::10])
    assert main([*base, "--format", "none", "--out-dir", str(tmp_path / "none")]) == 0
    assert sorted(p.name for p in (tmp_path / "none").iterdir()) == ["summary.txt"]


def test_a_file_over_the_limit_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("simulated although the file is too large")

    monkeypatch.setattr(symdae.System, "simulate", refuse)
    args = ["simulate", "oscillator", "--t-end", "1000", "--h", "1e-4", "--no-plot",
            "--out-dir", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    # 10 000 001 rows of 1 + 3 + 3 columns at about 22 bytes
    assert "would take about 1.54 GB (10000001 rows, --format csv)" in err
    assert "--every K" in err and "--format npz or none" in err
    assert main([*args[:-2], "--every", "0", "--out-dir", str(tmp_path)]) == 2
    assert "--every must be a whole number >= 1, got 0" in capsys.readouterr().err


def test_trajectory_columns_api(tmp_path):
    model, _ = symdae.load_model("pendulum")
    traj = symdae.compile_model(model).simulate(t_end=0.1, h=1e-3)
    names, cols = traj.columns(every=5)
    assert names[:2] == ["t", "q:x"] and "lambda:lambda" in names and len(cols[0]) == 21
    with pytest.raises(symdae.InputError, match="every must be a whole number >= 1"):
        traj.columns(every=0)


def test_a_cold_build_and_a_long_run_say_what_they_do(tmp_path, capsys):
    """A model not in the cache: the command says it derives, generates and compiles (a cold
    build of a large model takes minutes); the second run loads it silently. A long sweep is
    announced with its step count."""
    model_file = tmp_path / "decay.py"
    model_file.write_text(
        "import sympy as sp\n"
        "from sympy.physics.mechanics import dynamicsymbols\n"
        "import symdae\n"
        "x = dynamicsymbols('x')\n"
        "k = sp.Symbol('k_decay_progress')\n"
        "model = symdae.Model('decay_progress', [x], mass_matrix=[[1]],\n"
        "                     forces=[-k * x - x.diff(dynamicsymbols._t)],\n"
        "                     parameters={k: 3.0}, outputs={'x': x},\n"
        "                     initial_state={x: 1})\n")
    args = ["simulate", str(model_file), "--no-plot", "--format", "none", "--cache-dir",
            str(tmp_path / "cache"), "--out-dir", str(tmp_path / "out")]
    assert main([*args, "--t-end", "300", "--h", "1e-3"]) == 0
    err = capsys.readouterr().err
    for text in ("symdae: decay_progress: not in the cache: deriving the equations",
                 "generating the kernels", "symdae: compiling", "symdae: compiled in",
                 "symdae: simulating 300000 steps of h = 0.001 s"):
        assert text in err, err
    assert main([*args, "--t-end", "1", "--h", "1e-3"]) == 0
    assert capsys.readouterr().err == ""          # cached, short: nothing to say


def test_a_run_whose_states_do_not_fit_is_written_in_segments(tmp_path, capsys, monkeypatch):
    """With the memory available too small for the whole trajectory, simulate runs in
    segments and appends each to the CSV: the file equals the one-piece run's, bit for bit
    (the restarts take the very steps of the long run), and so do the summary's outputs."""
    import symdae.cli.simulate as cli_simulate

    base = ["simulate", "oscillator", "--t-end", "20", "--h", "1e-3", "--no-plot"]
    assert main([*base, "--out-dir", str(tmp_path / "whole")]) == 0
    whole_summary = capsys.readouterr().out
    # 20 001 points: the whole run needs ~1.4 MB plus a 6.7 MB CSV chunk, its outputs 1.1 MB
    monkeypatch.setattr(cli_simulate, "available_memory", lambda: 1_500_000)
    monkeypatch.setattr(symdae.simulation.memory, "available_memory", lambda: 1_500_000)
    monkeypatch.setattr(symdae.simulation.memory, "free_memory", lambda: 0)
    assert main([*base, "--every", "7", "--out-dir", str(tmp_path / "parts")]) == 0
    printed = capsys.readouterr()
    import re

    segments = re.search(r"do not fit in memory: simulating (\d+) segments of", printed.err)
    assert segments and int(segments.group(1)) > 2, printed.err
    with open(tmp_path / "whole" / "trajectory.csv") as fh:
        whole = list(csv.reader(fh))
    with open(tmp_path / "parts" / "trajectory.csv") as fh:
        parts = list(csv.reader(fh))
    assert parts[0] == whole[0] and parts[1:] == whole[1::7]
    out_lines = [line for line in printed.out.splitlines() if line.startswith("output ")]
    assert out_lines == [line for line in whole_summary.splitlines()
                         if line.startswith("output ")]
