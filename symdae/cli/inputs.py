"""``--input NAME=FILE[:CHANNEL[UNIT->UNIT]]``: a model input measured in a file, on the grid.

The file is read like a measurement (:func:`~symdae.data.readers.read_recording`: CSV
dialects, .mat, MDF4, TDMS; the channel's unit converted as in a channel map) and the channel
is put on the simulation grid by the same rules as measured outputs
(:func:`~symdae.data.alignment.align_channel`: linear interpolation, or anti-aliased
resampling for a channel faster than the grid), with model time = file time - ``--offset``.
An input is needed at every grid time, so the channel must cover [t0, t_end].
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError, InputError

__all__ = ["InputFile", "parse_input", "measured_inputs"]


@dataclass(frozen=True)
class InputFile:
    """One ``--input``: the model input ``name``, the ``path`` and the ``channel`` text (a
    channel name with an optional ``[unit->unit]``, or None for the file's only channel or
    the one named like the input)."""

    name: str
    path: Path
    channel: str | None = None


def parse_input(text: str) -> InputFile:
    """``NAME=FILE`` or ``NAME=FILE:CHANNEL`` (the channel may carry ``[unit->unit]``)."""
    name, sep, rest = str(text).partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=FILE[:CHANNEL], got {text!r}")
    path, colon, channel = rest.rpartition(":")
    if not colon or "/" in channel:       # no channel given (a ':' inside a folder name)
        path, channel = rest, ""
    return InputFile(name.strip(), Path(path.strip()), channel.strip() or None)


def _channel(spec: InputFile):
    from ..data.readers import read_recording  # not at import: --help stays fast
    from ..data.units import ChannelMap

    if not spec.path.is_file():
        raise DataError(f"--input {spec.name}: file {str(spec.path)!r} does not exist")
    if spec.channel is not None:
        cmap = ChannelMap.parse(f"{spec.name}={spec.channel}")
        return read_recording(spec.path, channels=cmap).channel(spec.name)
    rec = read_recording(spec.path)
    if spec.name in rec.channels:
        return rec.channel(spec.name)
    if len(rec.channels) == 1:
        return next(iter(rec.channels.values()))
    raise DataError(f"--input {spec.name}: {spec.path} has channels {rec.names}; name one: "
                    f"--input {spec.name}={spec.path}:CHANNEL")


def measured_inputs(specs, model, scenario, offset: float = 0.0) -> dict:
    """{input name: values on the scenario's grid} of the ``--input`` files; one line per
    input on stderr says how it was put on the grid."""
    from ..data.alignment import align_channel

    names = model.input_names
    out = {}
    for spec in specs:
        if spec.name not in names:
            raise InputError(f"--input {spec.name}: the model has no input {spec.name!r}; its "
                             f"inputs are {names}")
        if spec.name in out:
            raise InputError(f"--input {spec.name} is given twice")
        ch = _channel(spec)
        values, how = align_channel(ch, scenario.times, offset=offset)
        out[spec.name] = np.asarray(values, dtype=float)
        extra = f", decimated by {how.k}" if how.method == "resample" else ""
        print(f"input {spec.name}: {spec.path}, channel {ch.name!r} ({ch.unit or 'no unit'}, "
              f"{how.rate:g} Hz) -> {how.grid_rate:g} Hz grid by {how.method}{extra}",
              file=sys.stderr)
    return out
