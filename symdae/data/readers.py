"""Test-bench recordings: channels with their own time bases and units, read from CSV (any
common dialect), MATLAB .mat, MDF4 (ASAM MDF, through asammdf) and TDMS (through npTDMS).

A :class:`Recording` is a set of :class:`Channel` s; each keeps its own sample times, because
benches sample a speed at 100 Hz and an accelerometer at 20 kHz in the same file. A
:class:`~symdae.data.units.ChannelMap` names which file channel feeds which model output and in
which unit; :func:`read_recording` applies it once, at reading, so the rest of symdae only sees
model outputs in model units. :mod:`symdae.data.alignment` then puts the channels on a simulation
grid.

Every reader names the file, the channel and the sample (or line) in its errors: unknown or
damaged files, a channel that does not exist (with the ones that do), units that cannot be
converted, time stamps that go back or repeat, NaN samples.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DataError, InputError
from .measurement import Measurement
from .units import ChannelMap, split_name_unit, unit_factor

__all__ = ["Channel", "Recording", "read_recording", "read_csv", "read_mat", "read_mdf",
           "read_tdms", "check_times", "FORMATS"]

FORMATS = ("csv", "mat", "mdf", "tdms")
_SUFFIXES = {".csv": "csv", ".txt": "csv", ".tsv": "csv", ".asc": "csv", ".mat": "mat",
             ".mf4": "mdf", ".mdf": "mdf", ".mf3": "mdf", ".tdms": "tdms"}
_TIME_NAMES = ("t", "time", "zeit", "timestamp", "timestamps", "time_s", "t_s")
_COMMENTS = ("#", "%", "//")


def check_times(t, where: str) -> np.ndarray:
    """Sample times as a float array; DataError naming ``where`` and the sample where they are
    not finite, repeat or go back."""
    t = np.asarray(t, dtype=float).ravel()
    if t.size < 2:
        raise DataError(f"{where}: {t.size} sample(s); a channel needs at least 2")
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        raise DataError(f"{where}: time stamp of sample {bad[0]} is {t[bad[0]]}")
    step = np.diff(t)
    bad = np.flatnonzero(step <= 0)
    if bad.size:
        k = int(bad[0]) + 1
        how = "repeats" if step[k - 1] == 0 else "goes back from"
        raise DataError(f"{where}: time stamp of sample {k} (t = {float(t[k])!r} s) {how} "
                        f"sample {k - 1} (t = {float(t[k - 1])!r} s); time stamps must be "
                        "strictly increasing")
    return t


@dataclass
class Channel:
    """One measured channel: ``values`` at its own times ``t`` (s), in ``unit``."""

    name: str
    t: np.ndarray
    values: np.ndarray
    unit: str = ""
    source: str = "arrays"

    def __post_init__(self):
        where = f"{self.source}, channel {self.name!r}"
        self.t = check_times(self.t, where)
        x = np.asarray(self.values, dtype=float).ravel()
        if x.shape != self.t.shape:
            raise DataError(f"{where}: {x.size} samples for {self.t.size} time stamps")
        bad = np.flatnonzero(~np.isfinite(x))
        if bad.size:
            k = int(bad[0])
            raise DataError(f"{where}: sample {k} (t = {self.t[k]:g} s) is {x[k]}; remove or "
                            "fill it")
        self.values = x
        self.unit = "" if self.unit is None else str(self.unit).strip()

    @property
    def rate(self) -> float:
        """Sample rate in Hz (from the median spacing)."""
        return 1.0 / float(np.median(np.diff(self.t)))

    @property
    def span(self) -> tuple[float, float]:
        """The first and last sample times [s]."""
        return float(self.t[0]), float(self.t[-1])

    def converted(self, name: str, factor: float, unit: str) -> Channel:
        """A copy named ``name`` with values times ``factor`` in ``unit``."""
        return Channel(name, self.t.copy(), self.values * factor, unit, self.source)


def _channel(name: str, spec: tuple, source: str) -> Channel:
    """A channel from ``(t, values)`` or ``(t, values, unit)``."""
    if len(spec) not in (2, 3):
        raise InputError(f"{source}, channel {name!r}: give (t, values) or (t, values, unit), "
                         f"got {len(spec)} item(s)")
    return Channel(name, spec[0], spec[1], spec[2] if len(spec) == 3 else "", source)


@dataclass
class Recording:
    """Channels read from one file (``source``), by name."""

    channels: dict
    source: str = "arrays"
    mapping: dict = field(default_factory=dict)    # output -> (file channel, factor, unit)

    def __post_init__(self):
        if not self.channels:
            raise DataError(f"{self.source}: no channels")

    @classmethod
    def from_arrays(cls, source: str = "arrays", **channels) -> Recording:
        """``name=(t, values)`` or ``name=(t, values, unit)`` per channel."""
        return cls({n: _channel(n, tuple(spec), source) for n, spec in channels.items()},
                   source)

    @property
    def names(self) -> list:
        """The channels' names, in file order."""
        return list(self.channels)

    def channel(self, name: str) -> Channel:
        """The channel ``name``; DataError names the channels that exist."""
        if name not in self.channels:
            raise DataError(f"{self.source}: no channel {name!r}; the channels are "
                            f"{self.names}")
        return self.channels[name]

    def mapped(self, channels) -> Recording:
        """The channels of a :class:`ChannelMap` (or a dict for one), renamed to the model's
        outputs and converted to the model's units."""
        cmap = channels if isinstance(channels, ChannelMap) else ChannelMap(channels)
        out, mapping = {}, {}
        for output, spec in cmap:
            ch = self.channel(spec.channel)
            factor, unit = spec.factor(ch.unit, f"{self.source}, channel {spec.channel!r}")
            out[output] = ch.converted(output, factor, unit)
            mapping[output] = (spec.channel, factor, unit)
        return Recording(out, self.source, mapping)

    def common_times(self) -> np.ndarray | None:
        """The shared sample times if every channel has the same, else None."""
        first = next(iter(self.channels.values())).t
        same = all(c.t.shape == first.shape and np.array_equal(c.t, first)
                   for c in self.channels.values())
        return first if same else None

    def measurement(self) -> Measurement:
        """A :class:`Measurement` of all channels; they must share their sample times (else
        align them with the simulation grid: :func:`symdae.data.alignment.align_recording`)."""
        t = self.common_times()
        if t is None:
            rates = {n: round(c.rate, 6) for n, c in self.channels.items()}
            raise DataError(f"{self.source}: the channels have their own time bases "
                            f"(rates {rates} Hz); put them on the simulation grid with "
                            "align_recording")
        return Measurement(t.copy(), {n: c.values.copy() for n, c in self.channels.items()},
                           source=self.source)


# ---------------------------------------------------------------------------- dispatch
def _sniff(path: Path) -> str | None:
    head = path.read_bytes()[:128]
    if head.startswith(b"MDF "):
        return "mdf"
    if head.startswith(b"TDSm"):
        return "tdms"
    if head.startswith(b"MATLAB"):
        return "mat"
    if b"\x00" not in head or head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "csv"
    return None


def read_recording(path, format: str | None = None, *, channels=None, **options) -> Recording:
    """Read a recording; ``format`` one of :data:`FORMATS` (default: from the suffix, else
    from the file's first bytes). ``channels``: a :class:`ChannelMap` (or dict) applied at
    reading. ``options`` go to the format's reader (e.g. ``time_column`` for CSV)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file {str(path)!r} does not exist")
    fmt = format or _SUFFIXES.get(path.suffix.lower()) or _sniff(path)
    if fmt not in FORMATS:
        raise DataError(f"{path}: unknown file format (suffix {path.suffix!r}); symdae reads "
                        f"{FORMATS} ({', '.join(sorted(_SUFFIXES))})")
    readers: dict[str, Callable[..., Recording]] = {"csv": read_csv, "mat": read_mat,
                                                    "mdf": read_mdf, "tdms": read_tdms}
    reader = readers[fmt]
    rec = reader(path, **options)
    return rec.mapped(channels) if channels is not None else rec


# ---------------------------------------------------------------------------- CSV
def _decode(path: Path) -> str:
    raw = path.read_bytes()
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16")
    if b"\x00" in raw[:4096]:
        raise DataError(f"{path}: binary content, not a text (CSV) file")
    try:
        return raw.decode("utf-8-sig")           # drops a UTF-8 byte order mark
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")   # spreadsheets in Western locales


def _separator(lines: list) -> str | None:
    """The separator that splits every line into the same number (> 1) of fields; the most
    fields wins (a decimal comma splits data lines but not the header)."""
    best, most = None, 0
    for sep in ("\t", ";", ",", "|"):
        counts = {ln.count(sep) for ln in lines}
        if len(counts) == 1 and (n := counts.pop()) > most:
            best, most = sep, n
    if best is None:
        counts = {len(ln.split()) for ln in lines}
        if len(counts) == 1 and counts.pop() > 1:
            return " "
    return best


_NUMBER = re.compile(r"[+-]?(\d+([.,]\d*)?|[.,]\d+)([eE][+-]?\d+)?")


def _is_number(field_: str) -> bool:
    s = field_.strip()
    return bool(_NUMBER.fullmatch(s)) or s.lower() in ("nan", "inf", "-inf", "+inf")


def read_csv(path, *, time_column: str | None = None, time_unit: str | None = None,
             separator: str | None = None, decimal: str | None = None) -> Recording:
    """A CSV (or text) export: the dialect is detected, every option can be forced.

    * encoding: UTF-8 with or without byte order mark, UTF-16 with BOM, else Windows-1252;
    * comment lines (``#``, ``%``, ``//``) and blank lines are skipped;
    * ``separator``: tab, ``;``, ``,`` or ``|`` (the one giving every line the same number of
      fields), else white space;
    * ``decimal``: ``","`` when the separator is not a comma and numbers are written ``1,5``;
    * units: in the header (``x [mm]``, ``x (mm)``) or in a row under it (``s;mm;deg``);
    * the time column: ``time_column``, else the first named t/time/zeit/timestamp, else the
      first column; its unit (``time_unit``, else from the file, else s) is converted to s;
    * an empty field is a missing sample: such a channel keeps only the times where it has
      values (several rates in one export).
    """
    path = Path(path)
    text = _decode(path)
    rows = [(k, ln) for k, ln in enumerate(text.splitlines(), start=1)
            if ln.strip() and not ln.lstrip().startswith(_COMMENTS)]
    if len(rows) < 3:
        raise DataError(f"{path}: needs a header row and at least two data rows (found "
                        f"{len(rows)} non-comment line(s))")
    sep = separator or _separator([ln for _, ln in rows[:50]])
    if sep is None:
        raise DataError(f"{path}: cannot tell the separator: the first lines do not split into "
                        "the same number of fields by tab, ';', ',', '|' or spaces "
                        f"(line {rows[0][0]}: {rows[0][1][:60]!r}); pass separator=")
    split = (lambda s: s.split()) if sep == " " else (lambda s: s.split(sep))
    table = [(k, [f.strip().strip('"') for f in split(ln)]) for k, ln in rows]
    header = table[0][1]
    body = table[1:]
    units: list[str | None] = [None] * len(header)
    names = []
    for j, h in enumerate(header):
        name, unit = split_name_unit(h)
        names.append(name)
        units[j] = unit
    # a units row holds no number (a data row with one bad field is reported by its line)
    if not any(_is_number(f) for f in body[0][1]):
        units = [u.strip("[]() ") or units[j] for j, u in enumerate(body[0][1])]
        body = body[1:]
    if len(body) < 2:
        raise DataError(f"{path}: needs at least two data rows")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DataError(f"{path}: column name(s) {dup} appear more than once in the header")
    if decimal is None:
        decimal = "," if sep != "," and any(
            re.fullmatch(r"[+-]?\d*,\d+([eE][+-]?\d+)?", f) for _, r in body[:50] for f in r) \
            else "."
    if time_column is None:
        lower = [n.lower() for n in names]
        time_column = next((names[lower.index(c)] for c in _TIME_NAMES if c in lower), names[0])
    if time_column not in names:
        raise DataError(f"{path}: no time column {time_column!r}; the columns are {names}")
    data = _parse_body(path, body, names, decimal)
    jt = names.index(time_column)
    t_raw = data[:, jt]
    missing = np.flatnonzero(np.isnan(t_raw))
    if missing.size:
        raise DataError(f"{path}, line {body[missing[0]][0]}: no time stamp in column "
                        f"{time_column!r}")
    t_unit = time_unit or units[jt] or "s"
    t = t_raw * unit_factor(t_unit, "s", f"{path}, time column {time_column!r}")
    chans: dict[str, Channel] = {}
    for j, name in enumerate(names):
        if j == jt:
            continue
        have = ~np.isnan(data[:, j])
        if not have.any():
            raise DataError(f"{path}: column {name!r} has no values")
        chans[name] = Channel(name, check_times(t[have], f"{path}, channel {name!r}"),
                              data[have, j], units[j] or "", str(path))
    if not chans:
        raise DataError(f"{path}: only the time column {time_column!r}, no channels")
    return Recording(chans, str(path))


def _parse_body(path: Path, body: list, names: list, decimal: str) -> np.ndarray:
    """The data rows as floats; NaN marks an empty field (no sample). A written NaN, a wrong
    number of fields or text is an error naming the line and column."""
    out = np.full((len(body), len(names)), np.nan)
    for i, (line, fields) in enumerate(body):
        if len(fields) != len(names):
            raise DataError(f"{path}, line {line}: {len(fields)} fields, the header has "
                            f"{len(names)}")
        for j, f in enumerate(fields):
            if not f:
                continue
            s = f.replace(",", ".") if decimal == "," else f
            try:
                v = float(s)
            except ValueError:
                raise DataError(f"{path}, line {line}, column {names[j]!r}: {f!r} is not a "
                                "number") from None
            if not math.isfinite(v):
                raise DataError(f"{path}, line {line}, column {names[j]!r}: the sample is "
                                f"{f!r}; remove or fill it")
            out[i, j] = v
    return out


# ---------------------------------------------------------------------------- MATLAB
_MAT_TIME_KEYS = ("time", "t", "timestamps", "Time")
_MAT_VALUE_KEYS = ("values", "data", "y", "signal", "Data", "Values")
_MAT_UNIT_KEYS = ("unit", "units", "Unit")


def read_mat(path, *, time: str | None = None) -> Recording:
    """A MATLAB file (v4 to v7, scipy.io.loadmat). Channels are

    * structs with a time (``time``/``t``) and a value (``values``/``data``/``y``) field and
      optionally ``unit``: each channel with its own time base;
    * vectors on a shared time vector (``time``, default ``t`` or ``time``), or on their own
      ``<name>_t`` / ``<name>_time`` vector;

    units from a ``<name>_unit`` string or a struct ``units`` with one field per channel.
    """
    from scipy.io import loadmat

    path = Path(path)
    try:
        raw = loadmat(str(path), squeeze_me=True, simplify_cells=True)
    except NotImplementedError:
        raise DataError(f"{path}: a MATLAB v7.3 (HDF5) file; save it with save(..., '-v7') "
                        "to read it here") from None
    except Exception as exc:      # scipy raises several types for damaged files
        raise DataError(f"{path}: not a readable MATLAB file ({type(exc).__name__}: {exc})") \
            from None
    src = str(path)
    var = {k: v for k, v in raw.items() if not k.startswith("__")}
    units: dict = var["units"] if isinstance(var.get("units"), dict) else {}
    chans: dict[str, Channel] = {}
    for name, v in var.items():
        if isinstance(v, dict) and name != "units":
            tk = next((k for k in _MAT_TIME_KEYS if k in v), None)
            vk = next((k for k in _MAT_VALUE_KEYS if k in v), None)
            if tk is None or vk is None:
                raise DataError(f"{path}: struct {name!r} has fields {sorted(v)}; a channel "
                                f"needs a time field {_MAT_TIME_KEYS} and a value field "
                                f"{_MAT_VALUE_KEYS}")
            uk = next((k for k in _MAT_UNIT_KEYS if k in v), None)
            chans[name] = Channel(name, v[tk], v[vk], str(v[uk]) if uk else "", src)
    vectors = {k: np.asarray(v, dtype=float) for k, v in var.items()
               if isinstance(v, np.ndarray) and v.dtype.kind in "fiu" and v.ndim == 1}
    own = {k.rsplit(suffix, 1)[0]: k for k in vectors for suffix in ("_time", "_t")
           if k.endswith(suffix) and k.rsplit(suffix, 1)[0] in vectors}
    tname = time or next((k for k in ("t", "time") if k in vectors), None)
    if time is not None and time not in vectors:
        raise DataError(f"{path}: no time vector {time!r}; the numeric vectors are "
                        f"{sorted(vectors)}")
    skip = {tname, *own.values()}
    for name, x in vectors.items():
        if name in skip:
            continue
        tt = vectors[own[name]] if name in own else vectors.get(tname)
        if tt is None:
            raise DataError(f"{path}: vector {name!r} has no time base: give a time vector "
                            f"'t' or '{name}_t' (the vectors are {sorted(vectors)})")
        if tt.size != x.size:
            continue          # another time base's vector or a parameter list, not a channel
        unit = var.get(f"{name}_unit", units.get(name, ""))
        chans[name] = Channel(name, tt, x, str(unit), src)
    if not chans:
        raise DataError(f"{path}: no channels (variables {sorted(var)})")
    return Recording(chans, src)


# ---------------------------------------------------------------------------- MDF4 / TDMS
def _optional(module: str, extra: str, path: Path):
    try:
        return __import__(module)
    except ImportError:
        raise InputError(f"{path}: reading this format needs the package {module!r}: pip "
                         f"install 'symdae[{extra}]'") from None


def _unique(name: str, group: str, taken: Mapping) -> str:
    return name if name not in taken else f"{group}/{name}"


def read_mdf(path) -> Recording:
    """An ASAM MDF file (MDF4 ``.mf4``, MDF3 ``.mdf``) through asammdf; every channel with
    its own time stamps (its channel group's master) and unit. A name used in several groups
    is kept as ``group<k>/<name>`` after its first occurrence."""
    path = Path(path)
    asammdf = _optional("asammdf", "mdf", path)
    src = str(path)
    try:
        mdf = asammdf.MDF(str(path))
    except Exception as exc:
        raise DataError(f"{path}: not a readable MDF file ({type(exc).__name__}: {exc})") \
            from None
    chans: dict[str, Channel] = {}
    try:
        for sig in mdf.iter_channels():
            x = np.asarray(sig.samples)
            if x.dtype.kind not in "fiub" or x.ndim != 1:
                continue              # text, byte arrays or structures: not a signal
            group = f"group{sig.group_index}"
            name = _unique(sig.name, group, chans)
            chans[name] = Channel(name, sig.timestamps, x.astype(float), sig.unit or "", src)
    finally:
        mdf.close()
    if not chans:
        raise DataError(f"{path}: no numeric channels")
    return Recording(chans, src)


def read_tdms(path) -> Recording:
    """An NI TDMS file through npTDMS: waveform channels use their ``wf_start_offset`` /
    ``wf_increment`` time track; other channels the group's ``time``/``t`` channel; units
    from the ``unit_string`` property. A name used in several groups is kept as
    ``group/name`` after its first occurrence."""
    path = Path(path)
    nptdms = _optional("nptdms", "tdms", path)
    src = str(path)
    try:
        f = nptdms.TdmsFile.read(str(path))
    except Exception as exc:
        raise DataError(f"{path}: not a readable TDMS file ({type(exc).__name__}: {exc})") \
            from None
    chans: dict[str, Channel] = {}
    for group in f.groups():
        members = {c.name: c for c in group.channels()}
        tcol = next((members[k] for k in members if k.lower() in _TIME_NAMES), None)
        for cname, ch in members.items():
            if ch is tcol:
                continue
            x = np.asarray(ch[:], dtype=float)
            if "wf_increment" in ch.properties:
                t = ch.time_track()
            elif tcol is not None:
                t = np.asarray(tcol[:], dtype=float)
            else:
                raise DataError(f"{path}, group {group.name!r}, channel {cname!r}: no time "
                                "base (no wf_increment property and no time channel in the "
                                "group)")
            name = _unique(cname, group.name, chans)
            chans[name] = Channel(name, t, x, ch.properties.get("unit_string", ""), src)
    if not chans:
        raise DataError(f"{path}: no channels (an empty or truncated file?)")
    return Recording(chans, src)
