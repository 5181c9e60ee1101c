"""Units at the edges: parse and format sizes, durations and rates.

Inside cardbench every quantity is bytes, seconds or bytes per second (plain ints and floats).
This module is the only place where MB (10^6 B), MiB (2^20 B) and the card makers' "X"
(1X = 150,000 B/s, see docs/methods.md, "Units") appear.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

MB = 1_000_000
MiB = 1 << 20
KB = 1_000
KiB = 1 << 10
GB = 1_000_000_000
GiB = 1 << 30

#: 1X as card makers define it: 150 kB/s, decimal (Kingston, Lexar, Crucial).
X_BYTES_PER_S = 150_000
#: The CD-ROM origin of "X" (75 sectors x 2048 B), shown only as an alternative reading.
X_CDROM_BYTES_PER_S = 153_600


class UnitError(ValueError):
    """A size, rate or duration string that cannot be understood."""


_SIZE_FACTORS = {
    "": 1, "b": 1,
    "k": KB, "kb": KB, "kib": KiB,
    "m": MB, "mb": MB, "mib": MiB,
    "g": GB, "gb": GB, "gib": GiB,
    "t": 10**12, "tb": 10**12, "tib": 1 << 40,
}

_NUM = r"(?P<num>[0-9]+(?:[.,][0-9]+)?|[.,][0-9]+)"
_SIZE_RE = re.compile(rf"^\s*{_NUM}\s*(?P<unit>[a-zA-Z]*)\s*$")


def _number(text: str) -> float:
    return float(text.replace(",", "."))


#: the largest whole number a store (SQLite's and PostgreSQL's INTEGER) holds
INT64_MAX = (1 << 63) - 1
_DECIMAL_RE = re.compile(r"^\s*(?P<sign>[+-]?)(?P<num>[0-9]+(?:[.,][0-9]*)?|[.,][0-9]+)(?P<exp>[eE][+-]?[0-9]+)?\s*$")


def parse_number(value: object, where: str, *, expected: str = "a number", negative: bool = False,
                 exponent: bool = True) -> float:
    """The one checked reading of a number from outside: a figure an importer reads from a
    file's text ("41.2", "4,9" with a decimal comma, "1e3"), or a number of a JSON document
    (an int or float; a number in a string too, as fio writes some). Raises UnitError, one line
    naming ``where`` (the file's line or key and the field) and ``expected``: for text that is
    not one decimal number ("10.044.47", "0x10", "nan"), a value that is not a number (true, a
    list), a non-finite one (NaN, Infinity, 1e400), a whole number beyond 64 bits, or a negative
    one (unless ``negative``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UnitError(f"{where}: expected {expected}, got {_shown(value)}")
    if isinstance(value, int):
        if abs(value) > INT64_MAX:
            raise UnitError(f"{where}: expected {expected}, got {_shown(value)} (beyond a 64-bit integer)")
        number = float(value)
    elif isinstance(value, float):
        number = value
    else:
        m = _DECIMAL_RE.match(value)
        if not m or (m.group("exp") and not exponent):
            raise UnitError(f"{where}: expected {expected}, got {_shown(value)}")
        num, exp = m.group("num").replace(",", "."), m.group("exp")
        number = float(m.group("sign") + num + (exp or ""))
        if not exp and abs(number) >= 9e18 and int(num.split(".")[0] or 0) > INT64_MAX:
            raise UnitError(f"{where}: expected {expected}, got {_shown(value)} (beyond a 64-bit integer)")
    if not math.isfinite(number):
        raise UnitError(f"{where}: expected {expected}, got {_shown(value)} (not finite)")
    if number < 0 and not negative:
        raise UnitError(f"{where}: expected {expected}, got {_shown(value)} (negative)")
    return number


def parse_count(value: object, where: str, *, expected: str = "a whole number", negative: bool = False) -> int:
    """A whole number (a count of bytes, sectors, I/Os) read as :func:`parse_number` reads it:
    its text has no fraction ("12" or "12.0"), it fits a store's 64-bit integer."""
    number = parse_number(value, where, expected=expected, negative=negative)
    if number != int(number):
        raise UnitError(f"{where}: expected {expected}, got {_shown(value)}")
    if abs(number) > INT64_MAX:
        raise UnitError(f"{where}: expected {expected}, got {_shown(value)} (beyond a 64-bit integer)")
    return value if isinstance(value, int) else int(number)


#: how deep a JSON document from outside may nest (a cardbench document needs about 6 levels)
MAX_JSON_DEPTH = 64
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def check_json_numbers(doc: object, where: str = "") -> None:
    """Every number of a JSON document as :func:`parse_number` reads it (negative allowed): finite
    (no NaN or Infinity, which Python's json reads), a whole one within 64 bits; every text (key
    or value) one UTF-8 can hold (no lone surrogate such as ``"\\ud800"``, which Python's json
    reads and no store can keep); nested at most :data:`MAX_JSON_DEPTH` deep. UnitError naming the
    first that is not by its key path ("verify[0].usable_bytes")."""
    try:
        bad = _first_bad_number(doc, MAX_JSON_DEPTH)
    except RecursionError:
        bad = None, ["..."]
    if bad is not None:
        value, path = bad
        at = ".".join(path).replace(".[", "[") or where or "the document"
        if path and path[-1] == "...":
            raise UnitError(f"{where or 'the document'}: nested deeper than {MAX_JSON_DEPTH} levels, "
                            "more than cardbench reads")
        if isinstance(value, str):
            raise UnitError(f"{at}: text that UTF-8 cannot hold (a lone surrogate, {_shown(value)})")
        parse_number(value, at, negative=True)


def finite_or_null(doc: object) -> object:
    """``doc`` with every non-finite float (NaN, Infinity) as None: what JSON can say of it. For
    writing out what was stored before such numbers were refused (``export``, the server's API)."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: finite_or_null(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [finite_or_null(v) for v in doc]
    return doc


def _bad_text(text: str) -> bool:
    return not text.isascii() and _SURROGATE_RE.search(text) is not None


def _first_bad_number(node: object, depth: int = MAX_JSON_DEPTH) -> tuple[object, list[str]] | None:
    """The first number (or text) of ``node`` :func:`check_json_numbers` would refuse, and its key
    path; None when none; a path ending in "..." when nested deeper than ``depth``. Quick on the
    whole (an export holds hundreds of numbers a record): the path is only built for the one found."""
    if isinstance(node, float):
        return None if math.isfinite(node) else (node, [])
    if isinstance(node, int):
        return None if isinstance(node, bool) or -INT64_MAX <= node <= INT64_MAX else (node, [])
    if isinstance(node, str):
        return (node, []) if _bad_text(node) else None
    items: Iterable[tuple[object, object]]
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = ((f"[{i}]", v) for i, v in enumerate(node))
    else:
        return None
    if depth <= 0:
        return None, ["..."]
    for k, v in items:
        if isinstance(k, str) and _bad_text(k):
            return k, [_shown(k)]
        if isinstance(v, (dict, list, float, int, str)):
            found = _first_bad_number(v, depth - 1)
            if found is not None:
                found[1].insert(0, str(k))
                return found
    return None


def _shown(value: object) -> str:
    """A value in a message: short, on one line."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_size(text: str | int, *, minimum: int = 1) -> int:
    """Parse "16MB", "64MiB", "1.5 GB", "4096" (bytes) into bytes.

    K/M/G/T without "i" are decimal (10^3...), KiB/MiB/GiB/TiB binary. Raises UnitError with
    a one-line message a user can act on.
    """
    if isinstance(text, bool):
        raise UnitError(f"not a size: {text!r}")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE_RE.match(str(text))
        if not m:
            raise UnitError(f"not a size: {text!r} (try 16MB, 64MiB or 1GB)")
        unit = m.group("unit").lower()
        if unit not in _SIZE_FACTORS:
            raise UnitError(f"unknown size unit {m.group('unit')!r} in {text!r} (use B, kB, MB, GB, KiB, MiB, GiB)")
        exact = _number(m.group("num")) * _SIZE_FACTORS[unit]
        if not math.isfinite(exact) or exact > 2**62:
            raise UnitError(f"size too large: {text!r}")
        if exact != int(exact) and unit in ("", "b"):
            raise UnitError(f"a size in bytes must be whole: {text!r}")
        value = int(round(exact))
    if value < minimum:
        raise UnitError(f"size must be at least {minimum} B, got {text!r}")
    return value


_RATE_RE = re.compile(rf"^\s*{_NUM}\s*(?P<unit>[a-zA-Z]*(?:/s|ps)?|x)\s*$", re.IGNORECASE)


def parse_rate(text: str | float) -> float:
    """Parse "4.9MB/s", "20 MiB/s", "133x", "1000000" (bytes/s) into bytes per second."""
    if isinstance(text, bool):
        raise UnitError(f"not a rate: {text!r}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _RATE_RE.match(str(text))
        if not m:
            raise UnitError(f"not a rate: {text!r} (try 4.9MB/s, 20MiB/s or 133x)")
        unit = m.group("unit").lower().removesuffix("/s").removesuffix("ps")
        number = _number(m.group("num"))
        if unit == "x":
            value = number * X_BYTES_PER_S
        elif unit in _SIZE_FACTORS:
            value = number * _SIZE_FACTORS[unit]
        else:
            raise UnitError(f"unknown rate unit {m.group('unit')!r} in {text!r} (use MB/s, MiB/s or x)")
    if not math.isfinite(value) or value <= 0:
        raise UnitError(f"rate must be a positive number, got {text!r}")
    return value


def parse_duration(text: str | float, *, zero: bool = False) -> float:
    """Parse "10", "10s", "250ms", "2m" into seconds (> 0; or >= 0 with ``zero``, e.g. "0" or "0ms")."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.match(rf"^\s*{_NUM}\s*(?P<unit>ms|s|m|min|h)?\s*$", str(text), re.IGNORECASE)
        if not m:
            raise UnitError(f"not a duration: {text!r} (try 10s or 250ms)")
        factor = {"ms": 1e-3, "s": 1.0, None: 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}[
            (m.group("unit") or "s").lower() if m.group("unit") else None]
        value = _number(m.group("num")) * factor
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise UnitError(f"duration must be positive, got {text!r}")
    return value


def x_rating(bytes_per_s: float) -> float:
    """The card makers' X rating of a rate (1X = 150,000 B/s)."""
    return bytes_per_s / X_BYTES_PER_S


# --- formatting -------------------------------------------------------------------------

RATE_UNITS = {"MB/s": MB, "MiB/s": MiB, "kB/s": KB, "KiB/s": KiB, "GB/s": GB}


def fmt_rate(bytes_per_s: float | None, unit: str = "MB/s", digits: int = 3) -> str:
    """"4.897 MB/s"; always labelled. None prints as "n/a"."""
    if bytes_per_s is None:
        return "n/a"
    return f"{bytes_per_s / RATE_UNITS[unit]:.{digits}f} {unit}"


def rate_in(bytes_per_s: float, unit: str = "MB/s") -> float:
    return bytes_per_s / RATE_UNITS[unit]


def fmt_x(bytes_per_s: float | None, digits: int = 1) -> str:
    if bytes_per_s is None:
        return "n/a"
    return f"{x_rating(bytes_per_s):.{digits}f}X"


def fmt_size(n: int | float | None, binary: bool = False) -> str:
    """"16.0 MB" (decimal) or "16.0 MiB" (binary); bytes under 1 kB as "512 B"."""
    if n is None:
        return "n/a"
    base, names = (1024, ["B", "KiB", "MiB", "GiB", "TiB"]) if binary else (1000, ["B", "kB", "MB", "GB", "TB"])
    value = float(n)
    for name in names:
        if abs(value) < base or name == names[-1]:
            return f"{int(value)} B" if name == "B" else f"{value:.1f} {name}"
        value /= base
    raise AssertionError("unreachable")


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "n/a"
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def block_label(block_size: int) -> str:
    """The block size in a test name (binary, as fio and CrystalDiskMark mean them): 4096 -> "4k",
    1048576 -> "1m", 131072 -> "128k", 512 -> "512" (bytes without a suffix)."""
    if block_size % MiB == 0:
        return f"{block_size // MiB}m"
    if block_size % KiB == 0:
        return f"{block_size // KiB}k"
    return str(block_size)
