"""Every Python code block of README.md runs as written.

The blocks run in order in one namespace, as a reader pasting them one after the other into a
script (run as ``__main__``) in a fresh folder would; later blocks build on the names earlier
ones define (``system``, ``scenario``, ``start``, ``measured``). Two blocks read the reader's
own files, ``bench.csv`` and ``run.mf4``: the test writes them first, from the engine mount at
its nominal values, at sample times and in units of their own (a clock offset in the MDF4).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from doc_blocks import OFFSET, markdown_blocks, run_blocks, write_user_files

README = Path(__file__).resolve().parents[2] / "README.md"
pytestmark = pytest.mark.source_tree      # the README is not in the wheel


def test_every_python_block_runs(tmp_path, monkeypatch):
    blocks = markdown_blocks(README.read_text())
    assert len(blocks) >= 12
    monkeypatch.chdir(tmp_path)
    write_user_files(tmp_path)
    ns = run_blocks(blocks, "README.md")
    # what the blocks claim, where a reader would check it
    # the MDF4's clock offset, estimated against a simulation at the start values (cE1 40 %
    # off the data's, so the signals differ: the peak lies 3 steps of 1e-4 s away)
    assert abs(ns["al"].offset - OFFSET) < 5e-4 and ns["al"].estimate.correlation > 0.9
    assert ns["result"].success and ns["res"].statistics is not None
    assert ns["traj"].t[-1] == pytest.approx(2.0)
