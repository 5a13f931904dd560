"""Command-line options for test-bench recordings: ``symdae identify MODEL --data FILE`` with a
channel map, a time offset, an alignment method and, for engine orders, the speed from a tacho
or speed channel with windows in crank angle.

Without ``--channels`` a ``.csv`` file is read as before (:meth:`Measurement.from_csv`, its
sample times kept), or, where that reader refuses it, by the dialect-detecting reader (sample
times kept where the columns share them); with ``--channels``, or for any other format, the
file goes through
:func:`~symdae.data.readers.read_recording` (the channel map converts the units) and
:func:`~symdae.data.alignment.align_recording` onto the simulation's grid.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..data.alignment import METHODS, align_recording
from ..data.measurement import Measurement
from ..data.readers import Channel, read_recording
from ..data.units import ChannelMap
from ..errors import DataError, InputError

__all__ = ["add_measurement_options", "load_data", "speed_trace", "parse_tacho", "parse_offset"]


def parse_tacho(text: str) -> tuple[str, int]:
    name, sep, ppr = str(text).rpartition(":")
    try:
        n = int(ppr)
    except ValueError:
        n = 0
    if not sep or not name or n < 1:
        raise InputError(f"--tacho {text!r}: write CHANNEL:PULSES_PER_REVOLUTION (e.g. "
                         "tacho:60)")
    return name, n


def parse_offset(text: str) -> float | str:
    """``--offset``: seconds or ``estimate``."""
    if str(text).strip().lower() == "estimate":
        return "estimate"
    try:
        return float(text)
    except ValueError:
        raise InputError(f"--offset {text!r}: give seconds or 'estimate'") from None


def add_measurement_options(parser) -> None:
    """The options of measured data files on the ``identify`` parser."""
    g = parser.add_argument_group("test-bench recordings (--data FILE: .csv, .mat, .mf4, "
                                  ".tdms)")
    g.add_argument("--channels", type=ChannelMap.parse, metavar="OUT=CHANNEL[UNIT->UNIT],...",
                   help="model output = file channel, optionally with the file's unit and the "
                   "model's (e.g. twist=twist_deg[deg->rad]; default model unit: SI)")
    g.add_argument("--offset", type=parse_offset, default=0.0, metavar="SECONDS|estimate",
                   help="model time = file time - offset (default 0); estimate: by "
                   "cross-correlating the first mapped channel with a simulation at the start "
                   "values")
    g.add_argument("--align", choices=METHODS, default="auto",
                   help="how channels meet the grid: samples (compared at their own sample "
                   "times, the model interpolated to them), interpolate (onto the grid), "
                   "resample (anti-aliased decimation) or auto (resample channels more than "
                   "1.2 x faster than the grid, else samples)")
    g.add_argument("--tacho", type=parse_tacho, metavar="CHANNEL:PPR",
                   help="engine orders: the crank angle from this tacho channel (pulses per "
                   "revolution) instead of the model's ramp")
    g.add_argument("--speed-channel", metavar="CHANNEL",
                   help="engine orders: the crank angle from this speed channel (its unit, "
                   "else rpm) instead of the model's ramp")
    g.add_argument("--order-domain", choices=["time", "angle"], default="time",
                   help="engine orders: Hann windows in time (the paper's) or in crank angle "
                   "(orders stay orthogonal during the ramp)")


def load_data(args, scenario, first_run=None) -> Measurement:
    """The measured data of ``args.data`` for ``scenario`` (see the module). ``first_run``:
    a function returning a simulation at the start values, for ``--offset estimate``; the
    estimated offset replaces ``args.offset`` (the tacho channel is shifted by it too)."""
    path = Path(args.data)
    cmap = getattr(args, "channels", None)
    opts = {}
    if path.suffix.lower() in (".csv", ".txt", ".tsv", ".asc") and args.time_column != "t":
        opts["time_column"] = args.time_column
    if cmap is None and path.suffix.lower() == ".csv":
        try:
            return Measurement.from_csv(path, time_column=args.time_column)
        except DataError as plain:
            # another dialect (';', decimal comma, units row, ...): read it as a recording;
            # where that fails too, the plain reader's message is the one to show
            try:
                rec = read_recording(path, **opts)
            except DataError:
                raise plain from None
            if rec.common_times() is not None:
                return rec.measurement()
    else:
        rec = read_recording(path, channels=cmap, **opts)
    offset = getattr(args, "offset", 0.0)
    reference = None
    if offset == "estimate":
        if first_run is None:
            raise InputError("--offset estimate needs a first simulation")
        reference = first_run()
    al = align_recording(rec, scenario.times, offset=offset, reference=reference,
                         method=getattr(args, "align", "auto"))
    args.offset = al.offset
    print(f"{path}: {al.report()}", file=sys.stderr)
    return al.measurement


def speed_trace(args, scenario):
    """The measured run-up of ``--tacho`` or ``--speed-channel`` in model time over the
    scenario's interval (the order windows must lie where the data are), or None."""
    from ..costs.order_tracking import SpeedTrace

    tacho, speed = getattr(args, "tacho", None), getattr(args, "speed_channel", None)
    if tacho is None and speed is None:
        return None
    if args.data is None:
        raise InputError("--tacho / --speed-channel need --data FILE")
    rec = read_recording(args.data)
    ch = rec.channel(tacho[0] if tacho else speed)
    t = ch.t - args.offset
    keep = (t >= scenario.t0) & (t <= scenario.times[-1])
    shifted = Channel(ch.name, t[keep], ch.values[keep], ch.unit, ch.source)
    if tacho:
        return SpeedTrace.from_tacho(shifted, tacho[1])
    return SpeedTrace.from_speed(shifted)
