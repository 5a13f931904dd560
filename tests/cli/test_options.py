"""Options are checked before any work: every name an option gives is checked against the
model (the message names the option and the valid choices), negative numbers are values, and
a model file with a syntax error is one line with its file and line."""
from __future__ import annotations

import pytest

import symdae
from symdae.cli import main as cli
from symdae.cli.main import main


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a command gets as far as compiling a model."""
    def refuse(*args, **kwargs):
        raise AssertionError("the model was compiled before the options were checked")
    monkeypatch.setattr("symdae.simulation.compile.compile_model", refuse)   # load() imports it


@pytest.mark.parametrize("argv, message", [
    (["identify", "oscillator", "--free", "c,d", "--start", "nosuch=1"],
     "--start 'nosuch': not a free parameter; valid: c, d"),
    (["identify", "oscillator", "--free", "c", "--start", "d=1"],
     "--start 'd': not a free parameter; valid: c"),
    (["identify", "oscillator", "--free", "c", "--bound", "d=1:2"],
     "--bound 'd': not a free parameter; valid: c"),
    (["identify", "oscillator", "--free", "c", "--outputs", "nosuch"],
     "--outputs 'nosuch': not an output of oscillator; valid: a, q, v"),
    (["identify", "oscillator", "--free", "cc"],
     "--free 'cc': not a parameter of oscillator; valid: m, c, d, q_init"),
    (["simulate", "oscillator", "-p", "nosuch=2"],
     "--param 'nosuch': not a parameter of oscillator"),
    (["design", "two_mass_oscillator", "--start", "nosuch=1"],
     "--start 'nosuch': not a parameter of two_mass_oscillator"),
    (["design", "two_mass_oscillator", "--input", "G=-1:1"],
     "--input 'G': not an input of two_mass_oscillator; valid: F"),
    (["simulate", "oscillator", "--h", "-1e-3"], "h must be positive, got -0.001"),
    (["simulate", "oscillator", "--max-file-size", "nan"],
     "--max-file-size must be a positive number of GB (inf: no limit), got nan"),
    (["simulate", "oscillator", "--max-file-size", "0"],
     "--max-file-size must be a positive number of GB (inf: no limit), got 0"),
    (["identify", "oscillator", "--free", "c", "--data", "nosuch.csv"],
     "--data: data file 'nosuch.csv' does not exist"),
    (["identify", "cart_pendula", "--domain", "frequency", "--data", "nosuch.csv"],
     "--data: data file 'nosuch.csv' does not exist"),
])
def test_bad_names_and_values_are_refused_before_any_work(argv, message, tmp_path, capsys,
                                                          no_work):
    out = tmp_path / "out"
    assert main([*argv, "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() or not any(out.iterdir())        # nothing written


def test_negative_numbers_are_values():
    assert cli.join_negative_values(["simulate", "m", "--h", "-1e-3", "--alpha", "-.1",
                                     "-p", "c=-2", "--t-end", "-5"]) == \
        ["simulate", "m", "--h=-1e-3", "--alpha=-.1", "-p", "c=-2", "--t-end=-5"]


def test_a_model_file_with_a_syntax_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("import sympy\nmodel = 1\nx = = 2\n")
    assert main(["simulate", str(path), "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == f"symdae simulate: error: model file {path}, line 3: invalid syntax: x = = 2\n"
    with pytest.raises(symdae.ModelError, match="line 3"):
        symdae.load_model(path)


def test_identify_refuses_start_values_of_parameters_that_are_not_free():
    model, _ = symdae.load_model("oscillator")
    system = symdae.compile_model(model)
    traj = system.simulate(t_end=0.1, h=1e-3)
    exp = symdae.Experiment(system, symdae.LeastSquares(
        symdae.Measurement.from_trajectory(traj, ["a"]), ["a"]), symdae.Scenario(0.1, 1e-3))
    with pytest.raises(symdae.InputError, match=r"start values for \['m'\], which are not free"):
        symdae.identify(exp, ["c"], {"c": 41.0, "m": 2.0}, progress=False)
