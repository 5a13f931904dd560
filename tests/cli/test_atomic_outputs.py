"""Outputs are whole or absent: every file is written under a temporary name and renamed into
place when complete, and a rerun removes its command's old outputs before it works, so a run
killed during its write leaves no file that claims to be complete (symdae/atomic.py)."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import symdae
from symdae.atomic import atomic_open, atomic_path, write_text
from symdae.cli.main import main

ROOT = Path(symdae.__file__).resolve().parents[1]


def test_sigkill_during_the_csv_write_leaves_no_file_that_claims_to_be_complete(tmp_path):
    out = tmp_path / "sim"
    assert main(["simulate", "oscillator", "--t-end", "0.5", "--out-dir", str(out)]) == 0
    old = {p.name for p in out.iterdir()}
    assert old == {"trajectory.csv", "summary.txt", "outputs.png"}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "symdae.cli", "simulate", "oscillator",
                             "--t-end", "2000", "--out-dir", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        part = []
        while not part and time.time() < deadline and proc.poll() is None:
            part = list(out.glob(".trajectory.*.csv"))
            time.sleep(0.005)
        assert part, "the CSV was never being written"
        while part[0].exists() and part[0].stat().st_size < 100_000:   # mid-write
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    # the earlier run's summary ("500 steps") and plot were removed before the rerun worked,
    # and the killed rerun's CSV never appeared under its name
    assert left == set(), left


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "report.json"
    write_text(path, "old")
    with pytest.raises(RuntimeError):
        with atomic_open(path) as fh:
            fh.write("half of the new")
            raise RuntimeError("stopped")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["report.json"]


def test_a_write_error_names_the_file(tmp_path):
    path = tmp_path / "trajectory.csv"
    with pytest.raises(OSError) as info:
        with atomic_path(path):
            raise OSError(errno.EFBIG, "File too large")
    assert str(path) in str(info.value) and os.listdir(tmp_path) == []
