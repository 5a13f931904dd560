"""Every Python code block of README.md runs as written.

The blocks run in order in one namespace, as a reader pasting them one after the other into a
script (run as ``__main__``) in a fresh folder would, and what the README says of them holds.
The guide pages' code blocks run in tests/examples/test_docs.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from doc_blocks import markdown_blocks, run_blocks

README = Path(__file__).resolve().parents[2] / "README.md"
pytestmark = pytest.mark.source_tree      # the README is not in the wheel


def test_every_python_block_runs(tmp_path, monkeypatch):
    blocks = markdown_blocks(README.read_text())
    assert blocks
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(blocks, "README.md")
    # the short example identifies the engine mount's four parameters from the paper's start
    model, res = ns["model"], ns["res"]
    truth = dict(zip(model.parameter_names, model.nominal_values))
    assert res.success and set(res.free) == {"cE1", "cE2", "dE", "dH2"}
    assert max(res.relative_error(truth).values()) < 1e-6


def test_the_links_into_the_documentation_resolve():
    root = README.parent
    links = re.findall(r"\]\(([^)#]+)\)", README.read_text())
    assert len(links) >= 15
    missing = [link for link in links if not (root / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_ci_runs_the_readme_s_test_command():
    """.ci/run runs the suite by the command the README gives (CI proves what readers run)."""
    (command,) = re.findall(r"&& (python -m pytest[^\n]*)", README.read_text())
    ci = (README.parent / ".ci" / "run").read_text()
    assert any(line.strip().endswith(command) for line in ci.splitlines()
               if not line.lstrip().startswith("#")), command
