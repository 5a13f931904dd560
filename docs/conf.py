"""Sphinx configuration of symdae's documentation.

Build (from the repository root): ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
The gallery's scripts run during the build; the guide pages' code blocks run as tests
(``tests/examples/test_docs.py``).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the checkout's package first (a build from the source tree documents the source tree)
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "agg")

import symdae  # noqa: E402

project = "symdae"
author = "the symdae authors"
copyright = "the symdae authors, MIT licence"
release = symdae.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

exclude_patterns = ["_build", "gallery", "auto_gallery/*.ipynb", "auto_gallery/*.py",
                    "auto_gallery/*.zip", "auto_gallery/*.json", "auto_gallery/*.md5"]
templates_path: list[str] = []
html_theme = "furo"
html_title = f"symdae {release}"
html_static_path: list[str] = []

# API reference: autodoc reads the docstrings, numpydoc parses their sections
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True, "undoc-members": True}
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# every documented object carries a docstring (GL08)
numpydoc_validation_checks = {"GL08"}

# the examples gallery: every docs/gallery/plot_*.py runs at build time (compiled kernels come
# from symdae's cache); the full studies of examples/ are shown, not run
sphinx_gallery_conf = {
    "examples_dirs": ["gallery", str(ROOT / "examples")],
    "gallery_dirs": ["auto_gallery", "auto_examples"],
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    "show_memory": False,
}
