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


def test_help_and_models_import_neither_sympy_nor_scipy():
    """`symdae --help` and `symdae models` answer at once (0.3 s measured, most of it the
    interpreter and NumPy): building the parsers and listing the models import neither SymPy,
    SciPy nor the compiler stage. A fresh interpreter, so nothing is imported already."""
    import subprocess
    import sys

    code = ("import sys, io, contextlib\n"
            "from symdae.cli.main import build_parser, main\n"
            "build_parser()\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    main(['models'])\n"
            "assert 'oscillator' in out.getvalue()\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('sympy', 'scipy')\n"
            "               or m.startswith('symdae.simulation.compile'))\n"
            "print(heavy)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert res.stdout.strip() == "[]", res.stdout


def test_models_lists_whole_first_sentences(capsys):
    from symdae.cli.models import first_sentence

    assert first_sentence("A chain of N pendula in Cartesian coordinates: point masses\n"
                          "joined by rods, e.g. a rope. Second sentence.") == \
        "A chain of N pendula in Cartesian coordinates: point masses joined by rods, e.g. a rope."
    assert first_sentence("Cart pendulum (Oberpeilsteiner et al. 2017, section 4.2).\n\nMore.") \
        == "Cart pendulum (Oberpeilsteiner et al. 2017, section 4.2)."
    assert first_sentence("Squeezer (E. Hairer, G. Wanner). Rest") == \
        "Squeezer (E. Hairer, G. Wanner)."
    assert main(["models"]) == 0
    listing = capsys.readouterr().out
    # every entry ends its sentence (the wrapped lines of one entry joined)
    entries = listing.replace("\n" + " " * (listing.index("Andrews") ), " ").splitlines()
    assert len(entries) >= 16 and all(e.rstrip().endswith(".") for e in entries), entries
