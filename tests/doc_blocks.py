"""The code blocks of README.md and the documentation's guide pages, and the files a reader
would bring to them (``bench.csv``, ``run.mf4``), for tests/examples/test_readme.py and
tests/examples/test_docs.py."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

import symdae

G = 9.80665
OFFSET = 0.0123         # file time = model time + OFFSET in run.mf4


def markdown_blocks(text: str) -> list[tuple[int, str]]:
    """(line, code) of every ```python block of a Markdown text."""
    return [(text[:m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


def rst_blocks(text: str) -> list[tuple[int, str]]:
    """(line, code) of every ``.. code-block:: python`` of a reST text, dedented."""
    found = []
    for m in re.finditer(r"^( *)\.\. code-block:: python\n((?:[ \t]*\n|\1   .*\n)+)", text, re.M):
        found.append((text[:m.start()].count("\n") + 3, textwrap.dedent(m.group(2)).lstrip("\n")))
    return found


def run_blocks(blocks: list[tuple[int, str]], source: str) -> dict:
    """Run the blocks in order in one namespace, as one script run as ``__main__``."""
    ns = {"__name__": "__main__"}
    for line, code in blocks:
        exec(compile(code, f"{source}, block at line {line}", "exec"), ns)
    return ns


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
