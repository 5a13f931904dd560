"""Files written whole or not at all.

Every file symdae writes (trajectories, reports, summaries, figures, cache entries) is written
to a temporary name in its own folder and renamed into place when complete: a run stopped by
Ctrl-C, SIGKILL or a full disk leaves either the previous file or none, never a truncated one
that looks whole. The temporary name starts with a dot and keeps the suffix (matplotlib reads
the format from it); a leftover one can only come from a killed process.
"""
from __future__ import annotations

import csv
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import numpy as np

__all__ = ["atomic_path", "atomic_open", "write_text", "write_columns", "remove_outputs"]

CSV_CHUNK = 65536     # rows formatted at a time: a whole table as Python lists took 0.5 kB a row


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` for the body to write; renamed to ``path`` when the
    body completes, removed when it raises."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)     # "[Errno 27] File too large" names the file
        raise


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[IO]:
    """``open(path, mode)`` through ``atomic_path``: the file appears when it is closed."""
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as fh:
        yield fh


def write_text(path: str | os.PathLike, text: str) -> Path:
    """``Path(path).write_text(text)``, atomically."""
    with atomic_open(path, "w") as fh:
        fh.write(text)
    return Path(path)


def write_columns(path: str | os.PathLike, header: Sequence[str],
                  columns: Sequence[np.ndarray]) -> Path:
    """A CSV file of equally long columns under ``header``, written atomically and a chunk of
    rows at a time (so writing adds little memory to the columns')."""
    n = len(columns[0]) if columns else 0
    with atomic_open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(header))
        for k in range(0, n, CSV_CHUNK):
            w.writerows(np.column_stack([c[k:k + CSV_CHUNK] for c in columns]).tolist())
    return Path(path)


def remove_outputs(folder: str | os.PathLike, names: Iterable[str]) -> None:
    """Remove a command's own files from an earlier run in ``folder`` before it writes new
    ones, so that old and new outputs never mix (other files stay)."""
    for name in names:
        (Path(folder) / name).unlink(missing_ok=True)
