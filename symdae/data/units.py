"""Physical units of measured channels and the map from file channels to model outputs.

A test bench writes each channel in its own unit (mm, deg, g, rpm, kN*m, ...); the model works in
coherent SI units. A unit string is parsed into a factor to SI and a dimension (powers of m, kg,
s, A, K and rad), so conversions are checked: ``mm -> m`` is a factor 1e-3, ``deg -> rad`` pi/180,
``g -> m/s^2`` 9.80665, and ``mm -> rad`` is refused with both dimensions named.

The angle is kept as a dimension of its own (rad) although SI treats it as dimensionless, so
that ``deg -> m`` or ``rpm -> Hz`` are errors rather than silent factors of 2 pi. ``g`` is the
standard gravity (accelerometers), never the gram; masses are written in ``kg``.

Expressions: products with ``*``, ``.``, ``·`` or a space, one ``/`` (``m/s^2``, ``N*m``,
``1/min``), powers with ``^``, a trailing digit or a superscript (``m/s²``), and the
unit in brackets as files write it (``[mm]``).
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError

__all__ = ["Unit", "parse_unit", "unit_factor", "convert", "ChannelSpec", "ChannelMap",
           "split_name_unit"]

_BASE = ("m", "kg", "s", "A", "K", "rad")

# symbol -> (factor to SI, exponents of _BASE)
_SYMBOLS: dict[str, tuple[float, tuple]] = {
    "m": (1.0, (1, 0, 0, 0, 0, 0)),
    "kg": (1.0, (0, 1, 0, 0, 0, 0)),
    "s": (1.0, (0, 0, 1, 0, 0, 0)),
    "A": (1.0, (0, 0, 0, 1, 0, 0)),
    "K": (1.0, (0, 0, 0, 0, 1, 0)),
    "rad": (1.0, (0, 0, 0, 0, 0, 1)),
    "N": (1.0, (1, 1, -2, 0, 0, 0)),
    "Pa": (1.0, (-1, 1, -2, 0, 0, 0)),
    "J": (1.0, (2, 1, -2, 0, 0, 0)),
    "W": (1.0, (2, 1, -3, 0, 0, 0)),
    "V": (1.0, (2, 1, -3, -1, 0, 0)),
    "Hz": (1.0, (0, 0, -1, 0, 0, 0)),
    "g": (9.80665, (1, 0, -2, 0, 0, 0)),          # standard gravity, not the gram
    "t": (1000.0, (0, 1, 0, 0, 0, 0)),            # tonne
    "min": (60.0, (0, 0, 1, 0, 0, 0)),
    "h": (3600.0, (0, 0, 1, 0, 0, 0)),
    "in": (0.0254, (1, 0, 0, 0, 0, 0)),
    "ft": (0.3048, (1, 0, 0, 0, 0, 0)),
    "lbf": (4.4482216152605, (1, 1, -2, 0, 0, 0)),
    "bar": (1e5, (-1, 1, -2, 0, 0, 0)),
    "psi": (6894.757293168361, (-1, 1, -2, 0, 0, 0)),
    "deg": (math.pi / 180.0, (0, 0, 0, 0, 0, 1)),
    "°": (math.pi / 180.0, (0, 0, 0, 0, 0, 1)),
    "grad": (math.pi / 200.0, (0, 0, 0, 0, 0, 1)),
    "rev": (2 * math.pi, (0, 0, 0, 0, 0, 1)),
    "rpm": (2 * math.pi / 60.0, (0, 0, -1, 0, 0, 1)),
    "rps": (2 * math.pi, (0, 0, -1, 0, 0, 1)),
    "%": (0.01, (0, 0, 0, 0, 0, 0)),
    "1": (1.0, (0, 0, 0, 0, 0, 0)),
}
_PREFIXES = {"n": 1e-9, "u": 1e-6, "µ": 1e-6, "μ": 1e-6, "m": 1e-3, "c": 1e-2, "d": 1e-1,
             "k": 1e3, "M": 1e6, "G": 1e9}
_PLAIN = tuple(_SYMBOLS)
for _sym in ("m", "s", "N", "Pa", "J", "W", "V", "A", "Hz", "rad", "bar"):
    for _p, _f in _PREFIXES.items():
        _SYMBOLS.setdefault(_p + _sym, (_f * _SYMBOLS[_sym][0], _SYMBOLS[_sym][1]))
# spellings of whole units as test benches export them
_ALIASES = {"Nm": "N*m", "kNm": "kN*m", "Nmm": "N*mm", "U/min": "rpm", "1/min": "rpm",
            "rev/min": "rpm", "r/min": "rpm", "sec": "s", "degree": "deg", "degrees": "deg",
            "-": "", "m/s2": "m/s^2", "mm/s2": "mm/s^2", "rad/s2": "rad/s^2", "G": "g",
            "kph": "km/h"}
_SUPERSCRIPTS = str.maketrans({"²": "^2", "³": "^3", "¹": "^1", "⁻": "^-", "·": "*", "⋅": "*"})


@dataclass(frozen=True)
class Unit:
    """A parsed unit: ``factor`` times the SI unit of ``dims`` (exponents of m, kg, s, A, K,
    rad); ``text`` as written."""

    factor: float
    dims: tuple
    text: str = ""

    def describe(self) -> str:
        """The dimension in base units (``m s^-2``), or ``dimensionless``."""
        parts = [b if e == 1 else f"{b}^{e:g}" for b, e in zip(_BASE, self.dims) if e]
        return " ".join(parts) or "dimensionless"


def _clean(text: str) -> str:
    u = str(text).strip()
    if len(u) >= 2 and u[0] + u[-1] in ("[]", "()", "{}"):
        u = u[1:-1].strip()
    return _ALIASES.get(u, u)


def _factor(token: str, text: str) -> tuple[float, np.ndarray]:
    m = re.fullmatch(r"([^\^\d\-]+|1)\^?(-?\d+)?", token)
    if not m:
        raise InputError(f"unit {text!r}: cannot read {token!r}")
    sym, power = m.group(1), int(m.group(2)) if m.group(2) else 1
    sym = _ALIASES.get(sym, sym)
    if sym not in _SYMBOLS:
        raise InputError(f"unit {text!r}: unknown unit {sym!r} (known: {', '.join(_PLAIN)}; "
                         "m, s, N, Pa, J, W, V, A, Hz, rad, bar with the prefixes "
                         f"{''.join(_PREFIXES)})")
    f, dims = _SYMBOLS[sym]
    return f ** power, np.array(dims) * power


def parse_unit(text) -> Unit:
    """Parse a unit string (``""`` or ``None``: dimensionless). InputError names an unknown
    symbol."""
    if text is None:
        return Unit(1.0, (0,) * len(_BASE), "")
    raw = str(text)
    u = _clean(raw).translate(_SUPERSCRIPTS)
    u = _ALIASES.get(u, u)
    if not u:
        return Unit(1.0, (0,) * len(_BASE), raw)
    if u.count("/") > 1:
        raise InputError(f"unit {raw!r}: use at most one '/' (write m/s^2, not m/s/s)")
    num, slash, den = u.partition("/")
    factor, dims = 1.0, np.zeros(len(_BASE))
    for part, sign in ((num, 1), (den, -1)):
        part = part.strip().strip("()")
        tokens = [x for x in re.split(r"[*.\s]+", part) if x] if part else []
        if sign == -1 and slash and not tokens:
            raise InputError(f"unit {raw!r}: nothing after '/'")
        for tok in tokens:
            f, d = _factor(tok, raw)
            factor *= f ** sign
            dims += sign * d
    return Unit(factor, tuple(int(x) if float(x).is_integer() else float(x) for x in dims),
                raw)


def unit_factor(source, target, what: str = "") -> float:
    """The factor c with value[target] = c value[source]. InputError (naming ``what``, e.g.
    the file and channel) where the dimensions differ."""
    try:
        a, b = parse_unit(source), parse_unit(target)
    except InputError as exc:
        raise InputError(f"{what}: {exc}" if what else str(exc)) from None
    if a.dims != b.dims:
        where = f"{what}: " if what else ""
        raise InputError(f"{where}cannot convert {source!r} ({a.describe()}) to {target!r} "
                         f"({b.describe()})")
    return a.factor / b.factor


def convert(values, source, target, what: str = "") -> np.ndarray:
    """``values`` in unit ``source`` expressed in unit ``target``."""
    return np.asarray(values, dtype=float) * unit_factor(source, target, what)


def si_unit(unit) -> str:
    """The coherent SI unit of the dimension of ``unit`` (``mm`` -> ``m``, ``g`` ->
    ``m s^-2``, ``deg`` -> ``rad``), written as :meth:`Unit.describe` without spaces."""
    u = parse_unit(unit)
    parts = [b if e == 1 else f"{b}^{e:g}" for b, e in zip(_BASE, u.dims) if e]
    return "*".join(parts)


def split_name_unit(header: str) -> tuple[str, str | None]:
    """``"x1 [mm]"``, ``"x1 (mm)"`` or ``"x1 in mm"`` -> (``"x1"``, ``"mm"``); a plain name ->
    (name, None)."""
    h = header.strip()
    m = re.fullmatch(r"(.*?)\s*[\[(]([^\[\]()]*)[\])]", h) or re.fullmatch(r"(.+?)\s+in\s+(\S+)",
                                                                          h)
    if m and m.group(1):
        return m.group(1).strip(), m.group(2).strip()
    return h, None


@dataclass(frozen=True)
class ChannelSpec:
    """Where a model output comes from: the file ``channel``, the ``unit`` it is written in
    (None: the unit the file declares) and the model's ``to`` unit (None: the SI unit of that
    dimension); ``scale`` multiplies after the conversion (a sign or a gauge factor)."""

    channel: str
    to: str | None = None
    unit: str | None = None
    scale: float = 1.0

    def factor(self, file_unit, what: str) -> tuple[float, str]:
        """(factor from the file's values to the model's, the model's unit)."""
        source = self.unit if self.unit is not None else (file_unit or "")
        target = self.to if self.to is not None else si_unit(source)
        return self.scale * unit_factor(source, target, what), target


@dataclass(frozen=True)
class ChannelMap:
    """Model output -> :class:`ChannelSpec` (a channel name, ``(channel, to_unit)`` or a
    spec). Build from a dict or from the command-line form :meth:`parse`."""

    specs: Mapping = field(default_factory=dict)

    def __post_init__(self):
        out = {}
        for output, spec in dict(self.specs).items():
            if isinstance(spec, str):
                spec = ChannelSpec(spec)
            elif isinstance(spec, tuple):
                spec = ChannelSpec(*spec)
            elif not isinstance(spec, ChannelSpec):
                raise InputError(f"channel map entry {output!r}: give a channel name, "
                                 f"(channel, unit) or a ChannelSpec, got {spec!r}")
            out[str(output)] = spec
        if not out:
            raise InputError("the channel map is empty")
        object.__setattr__(self, "specs", out)

    @classmethod
    def parse(cls, text: str) -> ChannelMap:
        """``"x_tvd=disp_tvd[mm->m],phi=enc[deg],n=speed"``: output=channel, optionally
        ``[file unit]``, ``[file unit->model unit]`` or ``[->model unit]``."""
        specs = {}
        for item in filter(None, (s.strip() for s in str(text).split(","))):
            m = re.fullmatch(r"([^=\s]+)\s*=\s*([^\[]+?)\s*(?:\[([^\]]*)\])?", item)
            if not m:
                raise InputError(f"channel map {item!r}: write output=channel, output="
                                 "channel[unit] or output=channel[unit->model unit]")
            unit = to = None
            if m.group(3) is not None:
                src, arrow, dst = m.group(3).partition("->")
                unit = src.strip() or None
                to = dst.strip() if arrow else None
            specs[m.group(1)] = ChannelSpec(m.group(2), to=to, unit=unit)
        return cls(specs)

    def __iter__(self):
        return iter(self.specs.items())

    def __len__(self) -> int:
        return len(self.specs)
