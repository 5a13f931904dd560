"""Every Python code block of README.md runs as written.

The blocks run in order in one namespace, as a reader pasting them one after the other into a
script (run as ``__main__``) in a fresh folder would; later blocks build on the names earlier
ones define (``system``, ``scenario``, ``start``, ``measured``). Two blocks read the reader's
own files, ``bench.csv`` and ``run.mf4``: the test writes them first, from the engine mount at
its nominal values, at sample times and in units of their own (a clock offset in the MDF4).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import symdae

README = Path(__file__).resolve().parents[2] / "README.md"
pytestmark = pytest.mark.source_tree      # the README is not in the wheel

G = 9.80665
OFFSET = 0.0123         # file time = model time + OFFSET in run.mf4


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line, code) of every ```python block."""
    return [(text[:m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


def write_user_files(folder: Path) -> None:
    """bench.csv: a1 at 3.3 kHz on [0, 1] s; run.mf4: a1 in g and the constraint force in kN at
    5 kHz, on a clock that started OFFSET s before the model's."""
    asammdf = pytest.importorskip("asammdf")
    model, _ = symdae.load_model("engine_mount")
    run = symdae.compile_model(model).simulate(t_end=1.0, h=1e-4, alpha=-0.1)
    t = np.arange(0.0, 1.0, 1 / 3300.0)
    symdae.Measurement.from_arrays(t, a1=np.interp(t, run.t, run.outputs["a1"])).to_csv(
        folder / "bench.csv")
    tm = np.arange(0.0, 1.0 + OFFSET, 2e-4) + OFFSET        # model time, shifted by the clock
    a1 = np.interp(tm - OFFSET, run.t, run.outputs["a1"])
    lam = np.interp(tm - OFFSET, run.t, run.outputs["lambda"])
    mdf = asammdf.MDF(version="4.10")
    mdf.append([asammdf.Signal(a1 / G, tm, name="acc", unit="g"),
                asammdf.Signal(lam / 1e3, tm, name="force", unit="kN")])
    mdf.save(folder / "run.mf4", overwrite=True)
    mdf.close()


def test_every_python_block_runs(tmp_path, monkeypatch):
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 12
    monkeypatch.chdir(tmp_path)
    write_user_files(tmp_path)
    ns = {"__name__": "__main__"}
    for line, code in blocks:
        exec(compile(code, f"README.md, block at line {line}", "exec"), ns)
    # what the blocks claim, where a reader would check it
    # the MDF4's clock offset, estimated against a simulation at the start values (cE1 40 %
    # off the data's, so the signals differ: the peak lies 3 steps of 1e-4 s away)
    assert abs(ns["al"].offset - OFFSET) < 5e-4 and ns["al"].estimate.correlation > 0.9
    assert ns["result"].success and ns["res"].statistics is not None
    assert ns["traj"].t[-1] == pytest.approx(2.0)
