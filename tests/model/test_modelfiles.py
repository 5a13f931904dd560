"""Bundled models load by name from a plain checkout (no install) as well as when installed."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import symdae
from symdae.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]


def test_bundled_models_are_listed_and_load():
    names = symdae.bundled_models()
    assert {"oscillator", "pendulum", "engine_mount"} <= set(names)
    model, ns = symdae.load_model("pendulum")
    assert model.name == "pendulum" and "model" in ns
    with pytest.raises(ModelError, match="no bundled model 'pendullum'"):
        symdae.load_model("pendullum")


def test_load_model_from_a_plain_checkout(tmp_path):
    """A copy of the source tree, first on sys.path, with no install behind it."""
    shutil.copytree(Path(symdae.__file__).parent, tmp_path / "symdae",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "models", tmp_path / "models",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import symdae, pathlib; m, _ = symdae.load_model('pendulum'); "
            "print(pathlib.Path(symdae.__file__).parent.parent, m.name)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(tmp_path), "pendulum"]
