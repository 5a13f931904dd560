"""Measured inputs on the command line: --input NAME=FILE[:CHANNEL[UNIT->UNIT]]."""
from __future__ import annotations

import csv

import numpy as np
import pytest

import symdae
from symdae.cli.main import main

FMAX, T_END = 2.0, 2.0


def force(t):
    return FMAX * np.sin(2 * np.pi * t / T_END) + 0.3 * np.cos(7.0 * t)


@pytest.fixture
def force_file(tmp_path):
    """The force in kN at 777 Hz (off the 1 kHz grid), with a second channel."""
    t = -0.004 + np.arange(int(2.02 * 777)) / 777.0
    path = tmp_path / "bench.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "force_kN", "other"])
        w.writerows(np.column_stack([t, force(t) / 1e3, 0 * t]).tolist())
    return path, t


def read_trajectory(path):
    with open(path) as fh:
        rows = list(csv.reader(fh))
    return rows[0], np.array(rows[1:], dtype=float)


def test_simulate_with_a_measured_input(tmp_path, force_file, capsys):
    path, t_file = force_file
    out = tmp_path / "sim"
    assert main(["simulate", "cart_pendulum", "--input", f"F={path}:force_kN[kN->N]",
                 "--no-plot", "--out-dir", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"input F: {path}, channel 'F' (N, 777 Hz) -> 1000 Hz grid by interpolate" in err
    header, rows = read_trajectory(out / "trajectory.csv")
    # the same run through the API, the input interpolated independently
    model, ns = symdae.load_model("cart_pendulum")
    sc = ns["SCENARIO"]
    u = np.interp(sc.times, t_file, force(t_file) / 1e3) * 1e3
    ref = symdae.compile_model(model).simulate(sc.replace(inputs={"F": u}))
    for name in model.output_names:
        col = header.index(name)
        np.testing.assert_allclose(rows[:, col], ref.outputs[name], rtol=1e-12,
                                   atol=1e-12 * np.abs(ref.outputs[name]).max())
    # not the model file's own input (a sine without the cosine)
    own = symdae.compile_model(model).simulate(sc)
    col = header.index(model.output_names[0])
    assert np.abs(rows[:, col] - own.outputs[model.output_names[0]]).max() > 1e-4


def test_identify_with_a_measured_input(tmp_path, force_file):
    """simulate with the measured input, then identify from its trajectory with the same
    input: the nominal values are read back."""
    path, _ = force_file
    spec = f"F={path}:force_kN[kN->N]"
    assert main(["simulate", "cart_pendulum", "--input", spec, "--no-plot", "--out-dir",
                 str(tmp_path / "sim")]) == 0
    model, ns = symdae.load_model("cart_pendulum")
    free = ns["FREE"][:1]
    start = {free[0]: 1.2 * model.nominal_values[model.parameter_names.index(free[0])]}
    out = tmp_path / "id"
    assert main(["identify", "cart_pendulum", "--input", spec, "--data",
                 str(tmp_path / "sim" / "trajectory.csv"), "--free", free[0], "--start",
                 f"{free[0]}={start[free[0]]}", "--quiet", "--out-dir", str(out)]) == 0
    import json

    res = json.loads((out / "report.json").read_text())["result"]
    nominal = model.nominal_values[model.parameter_names.index(free[0])]
    assert res["identified"][free[0]] == pytest.approx(nominal, rel=1e-8)


def test_bad_measured_inputs(tmp_path, force_file, capsys):
    path, _ = force_file
    base = ["simulate", "cart_pendulum", "--no-plot", "--out-dir", str(tmp_path / "x")]

    def error(*extra):
        assert main([*base, *extra]) == 2
        return capsys.readouterr().err

    assert "the model has no input 'G'; its inputs are ['F']" in error("--input", f"G={path}")
    assert "does not exist" in error("--input", f"F={tmp_path / 'nosuch.csv'}")
    assert "has channels ['force_kN', 'other']; name one: --input F=" in \
        error("--input", f"F={path}")
    assert "no channel 'nosuch'" in error("--input", f"F={path}:nosuch")
    # the file does not cover [t0, t_end]
    assert "not measured" in error("--input", f"F={path}:force_kN", "--t-end", "3")
    assert "--input F is given twice" in error("--input", f"F={path}:force_kN", "--input",
                                               f"F={path}:other")
    with pytest.raises(SystemExit):              # argparse refuses it while parsing
        main([*base, "--input", "F"])
    assert "expected NAME=FILE[:CHANNEL], got 'F'" in capsys.readouterr().err


def test_a_model_input_without_values_is_named(tmp_path, capsys):
    model_file = tmp_path / "driven.py"
    model_file.write_text(
        "import sympy as sp\n"
        "from sympy.physics.mechanics import dynamicsymbols\n"
        "import symdae\n"
        "t = dynamicsymbols._t\n"
        "x = dynamicsymbols('x')\n"
        "F = sp.Function('F')(t)\n"
        "k = sp.Symbol('k')\n"
        "model = symdae.Model('driven', [x], mass_matrix=[[1]], forces=[-k * x + F],\n"
        "                     parameters={k: 4.0}, inputs=[F], outputs={'x': x})\n")
    assert main(["simulate", str(model_file), "--no-plot", "--out-dir", str(tmp_path)]) == 2
    assert "input(s) ['F'] have no values: give --input F=FILE[:CHANNEL]" in \
        capsys.readouterr().err
