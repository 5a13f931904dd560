"""The progress line of an iterative fit (identify, least squares): one line per iteration."""
from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["report"]


def report(entry: dict, progress: bool | Callable) -> None:
    """Print ``entry`` (iteration, cost, values) to stderr when ``progress`` is True; hand it
    to ``progress`` when that is a callable."""
    if progress is True:
        vals = "  ".join(f"{k}={v:.8g}" for k, v in entry["values"].items())
        print(f"iter {entry['iteration']:4d}  J = {entry['cost']:.6e}  {vals}", file=sys.stderr)
    elif callable(progress):
        progress(entry)
