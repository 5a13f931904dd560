"""The documentation under docs/ cannot drift from the code.

Every ``.. code-block:: python`` of a guide page runs, in order, in one namespace per page, as a
reader pasting the page's blocks into a script in a fresh folder holding their own recordings
(``bench.csv``, ``run.mf4``: see tests/doc_blocks.py); what a page claims is checked where a
reader would check it. The API reference names every public name. (The examples gallery runs
when the documentation is built: ``python -m sphinx -W --keep-going -b html docs
docs/_build/html``, which .ci/run does.)
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import symdae
from doc_blocks import OFFSET, rst_blocks, run_blocks, write_user_files

DOCS = Path(__file__).resolve().parents[2] / "docs"
pytestmark = pytest.mark.source_tree      # the documentation is not in the wheel

GENERATED = {"_build", "auto_gallery", "auto_examples", "api"}
PAGES = sorted(p for p in DOCS.rglob("*.rst")
               if not GENERATED & set(p.relative_to(DOCS).parts) and rst_blocks(p.read_text()))


def page_id(path: Path) -> str:
    return str(path.relative_to(DOCS))


def check_claims(page: str, ns: dict) -> None:
    """What the page's text says of its results."""
    if page == "install.rst":
        truth = dict(zip(ns["model"].parameter_names, ns["model"].nominal_values))
        assert ns["res"].success
        assert max(ns["res"].relative_error(truth).values()) < 1e-6
    elif page == "guide/measurements.rst":
        # the clock offset, estimated against a simulation at the start values (cE1 40 % off
        # the data's, so the signals differ: the peak lies 3 steps of 1e-4 s away)
        assert abs(ns["al"].offset - OFFSET) < 5e-4 and ns["al"].estimate.correlation > 0.9
    elif page == "guide/identification.rst":
        assert ns["res"].success and ns["res"].statistics is not None
        assert ns["res"].values["c2"] == pytest.approx(1100.0, rel=1e-3)
        # multiple shooting from p0 = 50: the gaps closed, the answer single shooting's
        assert ns["multi"].success and ns["multi"].shooting.max_gap <= 1e-10
        assert ns["multi"].shooting.state_sources == {"experiment": "data"}
    elif page == "guide/models.rst":
        assert ns["traj"].t[-1] == pytest.approx(2.0)
    elif page == "guide/gradients.rst":
        assert ns["run"].cost == pytest.approx(ns["J"], rel=1e-12)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_python_block_of_the_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_user_files(tmp_path)
    ns = run_blocks(rst_blocks(page.read_text()), f"docs/{page_id(page)}")
    check_claims(page_id(page), ns)


def test_the_guide_has_code_to_run():
    names = {page_id(p) for p in PAGES}
    assert {"install.rst", "guide/models.rst", "guide/gradients.rst",
            "guide/identification.rst", "guide/measurements.rst"} <= names


def test_rst_blocks_reads_indented_blocks_to_their_end():
    text = ("Intro:\n\n.. code-block:: python\n\n   a = 1\n\n   b = a + 1\n"
            "Text after.\n\n- item\n\n  .. code-block:: python\n\n     c = 3\n\nEnd.\n")
    assert [code for _, code in rst_blocks(text)] == ["a = 1\n\nb = a + 1\n", "c = 3\n\n"]


def test_every_public_name_is_in_the_api_reference():
    documented = set()
    for page in (DOCS / "api").glob("*.rst"):
        documented |= set(re.findall(r"^\.\. auto\w+:: (?:symdae\.)?(\w+)\s*$",
                                     page.read_text(), re.M))
    missing = [name for name in symdae.__all__ if name not in documented]
    assert not missing, f"public names missing from docs/api: {missing}"
