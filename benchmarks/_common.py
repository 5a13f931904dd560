"""Helpers shared by the benchmark scripts: what machine the figures come from."""
from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_line() -> str:
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    return f"machine : {cpu_model()}, nproc {os.cpu_count()}, load avg {load}"
