"""What a card's label (or its SD Status register) promises, as checks a measurement can judge.

``parse_label("Class 10 U3 V30 A2 95MB/s read 90MB/s write")`` returns one :class:`Claim` per
claim on the label; each claim holds one or more :class:`Check`: the figure required (bytes/s
or IOPS), the test(s) that measure it, in order of preference, and what meeting it means.

What each mark means (figures in ``data/ratings.toml``):

* ``133x``, ``4 X``: the card makers' X, 1X = 150,000 B/s [S1][S2][S3]. No standards body defines
  it and vendors disagree on the direction [S1]: Kingston and Crucial mean write [S1][S2][S5],
  Lexar's SD white paper and Wikipedia mean read [S3][S9]. The primary check is on sequential
  read; a second, non-primary check flags whether write meets it too.
* ``C2``-``C10`` / ``Class 10`` / ``CL10``, ``U1``/``U3``, ``V6``-``V90``, ``E150``-``E600``: SD
  Association minimum sequential write [S12][S13][S21].
* ``A1``/``A2``: 4 KiB random read and write IOPS plus a sustained sequential write of 10 MB/s
  [S15][S16]; A2 needs a host with command queuing and cache [S15][S22].
* ``UDMA0``-``UDMA7``: a CompactFlash transfer mode, i.e. an interface ceiling (167 MB/s for
  UDMA 7), not a promise that the card is that fast [S23]. Judged as information only.
* ``UHS-I``/``UHS-II``/``UHS-III``: the SD bus the card supports (a ceiling, likewise) [S14].
* ``VPG-20`` ... ``VPG1600``: CFA Video Performance Guarantee, a sustained-write floor [S27][S29][S30].
* ``95MB/s read``, ``90 MB/s write``, ``read 95MB/s``, ``95/90MB/s`` (read/write), ``up to
  170MB/s`` and a bare ``170MB/s``: a vendor's speed; a figure without a direction is taken as
  read, the figure vendors headline.
* ``SD``, ``SDHC``, ``SDXC``, ``microSDXC``, ``CF``, ``CFexpress``...: the card family; accepted
  and ignored (no speed promise). A capacity (``64GB``) is refused with a hint: it is no speed claim.

Tokens may be separated by spaces, commas, semicolons, ``/``, ``|``, ``+``, ``&`` or "and"; case
does not matter. Anything else raises :class:`cardbench.errors.UsageError` naming the token.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from cardbench.errors import UsageError
from cardbench.units import GB, KB, MB, GiB, KiB, MiB
from cardbench.verdicts.ratings import ratings

#: test names per measured aspect, in order of preference (the first one present is judged)
READ_TESTS = ("cold_read", "raw_read")
WRITE_TESTS = ("seq_write", "raw_write")
SUSTAINED_TESTS = ("sustained_write",)
#: A1/A2's sustained write: a sustained test if there is one, else the plain sequential write,
#: which is what the Raspberry Pi sniff test judges [S43]
APP_SUSTAINED_TESTS = ("sustained_write", "seq_write", "raw_write")
#: queued first: the only stored test conditions (Raspberry Pi, "to match the specification") use
#: iodepth 32 [S43]; q1 when that is all there is
RAND_READ_TESTS = ("rand_read_4k_q32t1", "rand_read_4k_q1t1")
RAND_WRITE_TESTS = ("rand_write_4k_q32t1", "rand_write_4k_q1t1")

#: the families an SD Status register can declare, with the key of the decoded ssr dict
SSR_FAMILIES = {
    "speed_class": ("speed_class", "C", "Speed Class"),
    "uhs_speed_grade": ("uhs_speed_class", "U", "UHS Speed Class"),
    "video_speed_class": ("video_speed_class", "V", "Video Speed Class"),
    "app_perf_class": ("app_class", "A", "Application Performance Class"),
}

MAX_RATE = 10**13   # bytes/s; anything above is a typo, not a card
MAX_X = MAX_RATE // 150_000


@dataclass(frozen=True)
class Check:
    """One figure a claim requires and how it is measured.

    ``direction``: "read" | "write" | "sustained write" | "random read" | "random write" |
    "interface" (a ceiling the card's bus allows, not a speed promise: judged as information).
    """

    direction: str
    required: float
    unit: str                         # "B/s" | "IOPS"
    tests: tuple[str, ...]            # candidate test names, preferred first
    primary: bool = True              # False: a flag beside the main check (X on write)
    meaning: str = ""
    #: the figure is N x 10^6 B/s from a spec whose "MB" is unverified: a result between N x 10^6
    #: and N x 2^20 is reported as a marginal pass (standards.md §2.7)
    marginal_band: bool = False
    #: an alternative reading of the requirement (X at 153,600 B/s)
    alt_required: float | None = None
    #: A2: shortfalls are not the card's fault unless the host queues commands [S15][S22]
    needs_command_queuing: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"direction": self.direction, "required": self.required, "unit": self.unit,
                "tests": list(self.tests), "primary": self.primary, "meaning": self.meaning,
                "marginal_band": self.marginal_band, "alt_required": self.alt_required,
                "needs_command_queuing": self.needs_command_queuing}


@dataclass(frozen=True)
class Claim:
    """One promise from a label or the card's register, with the checks that judge it."""

    text: str                         # as written ("Class 10", "4 X", "UDMA 6")
    kind: str                         # x | speed_class | uhs_speed_class | video_speed_class |
                                      # sd_express_speed_class | app_class | sd_bus | udma | vpg | rate
    name: str                         # canonical ("C10", "133X", "UDMA6", "VPG-20", "95 MB/s read")
    checks: tuple[Check, ...]
    sources: tuple[str, ...] = ()
    note: str = ""
    origin: str = "label"             # "label" | "register" (the card's SD Status)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind, "name": self.name, "origin": self.origin,
                "checks": [c.to_dict() for c in self.checks], "sources": list(self.sources), "note": self.note}


# --- building claims from figures ------------------------------------------------------------

def _x_claim(text: str, n: float) -> Claim:
    x = ratings()["x"]
    if not (0 < n <= MAX_X):
        raise UsageError(f"X rating out of range in the label: {text!r}")
    req = n * x["unit_bytes_per_s"]
    alt = n * x["alt_unit_bytes_per_s"]
    name = f"{n:g}X"
    checks = (
        Check("read", req, "B/s", READ_TESTS, True, alt_required=alt,
              meaning=f"{name} read at 150 kB/s per X (the common modern meaning: Lexar, Wikipedia [S3][S9])"),
        Check("write", req, "B/s", WRITE_TESTS, False, alt_required=alt,
              meaning=f"{name} write (how Kingston and Crucial define X [S1][S2][S5])"),
    )
    return Claim(text, "x", name, checks, tuple(x["sources"]), x["note"])


def _sd_class_claim(text: str, name: str, origin: str = "label") -> Claim:
    table = ratings()["sd_class"]
    entry = table.get(name)
    if entry is None:
        family = {"C": "C2, C4, C6, C10", "U": "U1, U3", "V": "V6, V10, V30, V60, V90",
                  "E": "E150, E300, E450, E600"}[name[0]]
        raise UsageError(f"no such SD class {name!r} in the label (known: {family})")
    req = entry["min_seq_write_bytes_per_s"]
    check = Check("write", req, "B/s", WRITE_TESTS, True, marginal_band=True,
                  meaning=f"{name}: minimum sequential write {req / MB:g} MB/s")
    return Claim(text, entry["family"], name, (check,), tuple(entry["sources"]), entry["note"], origin)


def _app_class_claim(text: str, name: str, origin: str = "label") -> Claim:
    entry = ratings()["sd_app_class"].get(name)
    if entry is None:
        raise UsageError(f"no such application performance class {name!r} in the label (known: A1, A2)")
    cq = bool(entry["needs_host_command_queuing"])
    sus = entry["min_sustained_write_bytes_per_s"]
    checks = (
        Check("random read", entry["min_rand_read_iops"], "IOPS", RAND_READ_TESTS, True, needs_command_queuing=cq,
              meaning=f"{name}: at least {entry['min_rand_read_iops']} random 4 KiB reads per second"),
        Check("random write", entry["min_rand_write_iops"], "IOPS", RAND_WRITE_TESTS, True, needs_command_queuing=cq,
              meaning=f"{name}: at least {entry['min_rand_write_iops']} random 4 KiB writes per second"),
        Check("sustained write", sus, "B/s", APP_SUSTAINED_TESTS, True, marginal_band=True,
              meaning=f"{name}: sustained sequential write of at least {sus / MB:g} MB/s"),
    )
    return Claim(text, "app_class", name, checks, tuple(entry["sources"]), entry["note"], origin)


def _udma_claim(text: str, mode: int) -> Claim:
    entry = ratings()["cf_udma"].get(f"UDMA{mode}")
    if entry is None:
        raise UsageError(f"no such CompactFlash mode {text!r} in the label (known: UDMA0 to UDMA7)")
    ceiling = entry["ceiling_bytes_per_s"]
    name = f"UDMA{mode}"
    check = Check("interface", ceiling, "B/s", READ_TESTS, True,
                  meaning=(f"{name} is a CompactFlash transfer mode: the card's interface can move up to "
                           f"{ceiling / MB:g} MB/s; it does not promise the card reads or writes that fast"))
    return Claim(text, "udma", name, (check,), tuple(entry["sources"]), entry["note"])


def _sd_bus_claim(text: str, roman: str) -> Claim:
    name = f"UHS-{roman}"
    entry = ratings()["sd_bus_label"][name]
    ceiling = entry["ceiling_bytes_per_s"]
    check = Check("interface", ceiling, "B/s", READ_TESTS, True,
                  meaning=(f"{name} is an SD bus: up to {ceiling / MB:g} MB/s in a reader that supports it; "
                           "it is not a speed promise"))
    return Claim(text, "sd_bus", name, (check,), tuple(entry["sources"]), entry["note"])


def _vpg_claim(text: str, n: int) -> Claim:
    table = ratings()["cf_vpg"]
    by_number = {int(re.sub(r"[^0-9]", "", k)): k for k in table}
    key = by_number.get(n)
    if key is None:
        raise UsageError(f"no such VPG profile {text!r} in the label (known: {', '.join(table)})")
    entry = table[key]
    req = entry["min_sustained_write_bytes_per_s"]
    check = Check("sustained write", req, "B/s", SUSTAINED_TESTS, True,
                  meaning=f"{key}: sustained write of at least {req / MB:g} MB/s (video recording floor)")
    return Claim(text, "vpg", key, (check,), tuple(entry["sources"]), entry["note"])


def _rate_claim(text: str, value: float, unit: str, direction: str) -> Claim:
    bps = value * _RATE_UNITS[unit.lower()]
    if not (0 < bps <= MAX_RATE) or not math.isfinite(bps):
        raise UsageError(f"rate out of range in the label: {text!r}")
    tests = READ_TESTS if direction == "read" else WRITE_TESTS
    name = f"{value:g} {_UNIT_NAMES[unit.lower()]} {direction}"
    check = Check(direction, bps, "B/s", tests, True,
                  meaning=f"the vendor's {direction} speed ({name}), usually measured in the vendor's own reader")
    return Claim(text, "rate", name, (check,), (),
                 "A vendor's \"up to\" figure: the best case in the vendor's test setup, not a minimum.")


_RATE_UNITS = {"b": 1, "kb": KB, "kib": KiB, "mb": MB, "mib": MiB, "gb": GB, "gib": GiB}
_UNIT_NAMES = {"b": "B/s", "kb": "kB/s", "kib": "KiB/s", "mb": "MB/s", "mib": "MiB/s", "gb": "GB/s", "gib": "GiB/s"}

# --- the scanner ---------------------------------------------------------------------------

_F = re.IGNORECASE | re.ASCII
_SEP = re.compile(r"(?:[\s,;/|+&]+|and(?=$|[\s,;/|+&]))+", _F)
_END = r"(?=$|[\s,;/|+&])"
_NUM = r"[0-9]{1,12}(?:\.[0-9]{1,6})?"
_UNIT = r"(?P<unit>[kmg]i?b|b)\s*(?:/\s*s(?:ec)?|ps)"
_BITS = re.compile(r"^[KMG]b$", re.ASCII)   # "Mb/s": megabits
_UPTO = r"(?:up\s*to\s*:?\s*)?"
_DIR = r"(?P<dir>reads?|reading|writes?|writing|r|w)(?:\s*speeds?)?"

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(rx + _END, _F)) for name, rx in [
    ("pair", rf"{_UPTO}(?P<a>{_NUM})\s*/\s*(?P<b>{_NUM})\s*{_UNIT}(?:\s*(?:r\s*/\s*w|read\s*/\s*write))?"),
    ("rate", rf"{_UPTO}(?P<n>{_NUM})\s*{_UNIT}(?:\s*{_DIR})?"),
    ("dir_rate", rf"{_DIR}\s*:?\s*{_UPTO}(?P<n>{_NUM})\s*{_UNIT}"),
    ("x", rf"(?P<n>{_NUM})\s*x"),
    ("x", rf"x\s*(?P<n>{_NUM})"),           # "x633", as some labels print it
    ("udma", r"udma\s*-?\s*(?P<n>[0-9]{1,6})"),
    ("vpg", r"vpg\s*-?\s*(?P<n>[0-9]{1,6})"),
    ("uhs", r"uhs\s*-?\s*(?P<n>iii|ii|i|[0-9]{1,6})"),
    ("capacity", rf"{_NUM}\s*(?:[kmgt]i?b|[kmgt])"),
    ("family", r"(?:micro\s*-?\s*)?sd(?:hc|xc|uc)?|compact\s*flash|cfast(?:\s*2(?:\.0)?)?|cfexpress|cf|xqd"),
    ("class", r"(?:class|cl|c)\s*-?\s*(?P<n>[0-9]{1,6})"),
    ("u", r"u\s*-?\s*(?P<n>[0-9]{1,6})"),
    ("v", r"v\s*-?\s*(?P<n>[0-9]{1,6})"),
    ("a", r"a\s*-?\s*(?P<n>[0-9]{1,6})"),
    ("e", r"e\s*-?\s*(?P<n>[0-9]{1,6})"),
]]
_TOKEN = re.compile(r"[^\s,;/|+&]+", re.ASCII)
_ROMAN = {"i": "I", "1": "I", "ii": "II", "2": "II", "iii": "III", "3": "III"}

_HELP = ("expected X ratings (133x), SD classes (C10, U3, V30, A2, E150), UDMA modes (UDMA7), VPG (VPG-20) "
         "or speeds (95MB/s read, 90MB/s write)")


def _direction(word: str | None) -> str:
    if not word:
        return "read"
    return "read" if word.lower().startswith("r") else "write"


def _check_bits(text: str, m: re.Match[str]) -> None:
    unit = m.group("unit")
    if _BITS.match(unit):
        raise UsageError(f"{text!r} in the label looks like bits per second; write bytes (MB/s), not Mb/s")


def _claims_for(kind: str, m: re.Match[str], text: str) -> list[Claim]:
    if kind == "pair":
        _check_bits(text, m)
        unit = m.group("unit")
        return [_rate_claim(text, float(m.group("a")), unit, "read"),
                _rate_claim(text, float(m.group("b")), unit, "write")]
    if kind in ("rate", "dir_rate"):
        _check_bits(text, m)
        return [_rate_claim(text, float(m.group("n")), m.group("unit"), _direction(m.group("dir")))]
    if kind == "x":
        return [_x_claim(text, float(m.group("n")))]
    if kind == "udma":
        return [_udma_claim(text, int(m.group("n")))]
    if kind == "vpg":
        return [_vpg_claim(text, int(m.group("n")))]
    if kind == "uhs":
        roman = _ROMAN.get(m.group("n").lower())
        if roman is None:
            raise UsageError(f"no such SD bus {text!r} in the label (known: UHS-I, UHS-II, UHS-III)")
        return [_sd_bus_claim(text, roman)]
    if kind == "family":
        return []
    if kind == "capacity":
        raise UsageError(f"{text!r} in the label is a capacity, not a speed claim: leave it out of the label")
    n = int(m.group("n"))
    if kind == "class":
        return [_sd_class_claim(text, f"C{n}")]
    if kind == "a":
        return [_app_class_claim(text, f"A{n}")]
    return [_sd_class_claim(text, f"{kind.upper()}{n}")]


def _normal(text: str) -> str:
    return " ".join(text.replace("\u00d7", "x").split())


def _marks(s: str):
    """Each mark of a normalised label in order: (kind, match), or (None, the token) for a token
    that is no known mark."""
    pos = 0
    while pos < len(s):
        sep = _SEP.match(s, pos)
        if sep:
            pos = sep.end()
            continue
        for kind, rx in _PATTERNS:
            m = rx.match(s, pos)
            if m:
                yield kind, m
                pos = m.end()
                break
        else:
            token = _TOKEN.match(s, pos)
            word = token.group(0) if token else s[pos]
            yield None, word
            pos += len(word)


def parse_label(text: str) -> list[Claim]:
    """The claims on a card's label, in the order written (duplicates dropped).

    Raises UsageError (one line, naming the token) for anything that is not a known mark.
    An empty label gives an empty list.
    """
    if not isinstance(text, str):
        raise UsageError(f"a label must be text, not {type(text).__name__}")
    claims: list[Claim] = []
    seen: set[tuple[str, str]] = set()
    for kind, m in _marks(_normal(text)):
        if kind is None:
            word = m if len(m) <= 40 else m[:40] + "..."
            raise UsageError(f"cannot read {word!r} in the label: {_HELP}")
        for claim in _claims_for(kind, m, m.group(0)):
            key = (claim.kind, claim.name)
            if key not in seen:
                seen.add(key)
                claims.append(claim)
    return claims


def claimed_x(text: str | None) -> float | None:
    """The X figure a label claims, read with the same patterns as :func:`parse_label` but
    leniently (words that are no mark, such as a card's name, are passed over): "4X" -> 4,
    "133x" -> 133, "C10 U1 x633" -> 633, "Ultra 2.5 X" -> 2.5; no X figure -> None."""
    if not text or not isinstance(text, str):
        return None
    for kind, m in _marks(_normal(text)):
        if kind == "x":
            value = float(m.group("n"))
            return value if value > 0 else None
    return None


# --- what the card declares ------------------------------------------------------------------

def _register_value(key: str, value: Any) -> str | None:
    """The class name ("C10", "U3", "V30", "A2") of one decoded SD Status field, or None."""
    _, letter, _ = SSR_FAMILIES[key]
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        if value == 0:
            return None
        if key == "speed_class" and value in (1, 3):
            # raw SPEED_CLASS codes that cannot be class numbers: 1 = C2, 3 = C6 [S12]
            return {1: "C2", 3: "C6"}[value]
        return f"{letter}{value}"
    text = str(value).strip()
    if not text or text.lower() in ("none", "c0", "u0", "v0", "a0", "0"):
        return None
    if text.isdigit():
        return _register_value(key, int(text))
    try:
        found = [c for c in parse_label(text)]
    except UsageError:
        return None   # a reserved code spelt out ("U2"): nothing to judge
    if not found or found[0].kind != SSR_FAMILIES[key][0]:
        raise ValueError(f"SD Status field {key}={value!r} is not a {SSR_FAMILIES[key][2]}")
    return found[0].name


def claims_from_ssr(ssr_fields: dict[str, Any]) -> list[Claim]:
    """Claims for the classes a card declares in its SD Status register.

    Keys: "speed_class", "uhs_speed_grade", "video_speed_class", "app_perf_class". Values are
    names ("C10", "U3", "V30", "A2") or ints. Ints are class numbers (10 = C10, 3 = U3, 30 = V30,
    2 = A2), as for the other three fields where number and code agree; for speed_class the raw
    codes 1 and 3 (which cannot be class numbers) are read as C2 and C6. A raw speed_class code
    2 or 4 would be misread (as C2/C4 instead of C4/C10): pass names to be safe (as
    ``cardbench.devices.registers.SdStatus.to_dict()`` does). 0, None, "" or "none": none declared.
    Reserved values (an unknown int, "reserved(5)", "U2") are skipped. A name of the wrong family
    (``{"uhs_speed_grade": "V30"}``) raises ValueError: that is a caller's bug.
    """
    claims: list[Claim] = []
    for key in SSR_FAMILIES:
        if key not in ssr_fields:
            continue
        name = _register_value(key, ssr_fields[key])
        if name is None:
            continue
        try:
            if name.startswith("A"):
                claims.append(_app_class_claim(name, name, origin="register"))
            else:
                claims.append(_sd_class_claim(name, name, origin="register"))
        except UsageError:
            continue   # a reserved code: nothing to judge
    return claims


def label_register_mismatches(label_claims: list[Claim], ssr_fields: dict[str, Any]) -> list[str]:
    """Findings where the label and the card's SD Status register disagree (standards.md §2.5).

    Only families present in ``ssr_fields`` are compared; a class the register declares but the
    label does not print is not a mismatch (labels often leave marks out).
    """
    findings = []
    register = claims_from_ssr(ssr_fields)
    for key, (family, _, title) in SSR_FAMILIES.items():
        if key not in ssr_fields:
            continue
        on_label = [c.name for c in label_claims if c.kind == family]
        declared = [c.name for c in register if c.kind == family]
        if not on_label or sorted(on_label) == sorted(declared):
            continue
        said = ", ".join(on_label)
        if declared:
            findings.append(f"label/register mismatch: the label says {said}, the card declares "
                            f"{', '.join(declared)} in its SD Status register")
        else:
            findings.append(f"label/register mismatch: the label says {said}, the card declares no {title} "
                            "in its SD Status register")
    return findings


def _span(modes: list[int]) -> str:
    if not modes:
        return "none"
    lo, hi = min(modes), max(modes)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def udma_against_card(name: str, ata: dict[str, Any]) -> tuple[bool, str]:
    """A label's "UDMA n" against what the card announces in its IDENTIFY data (word 88 [S67]):
    (the card supports it, the finding in words)."""
    n = int(re.sub(r"[^0-9]", "", name))
    modes = [int(m) for m in ata.get("udma_modes") or []]
    in_use = ata.get("udma_selected")
    said = f"UDMA {_span(modes)}" if modes else "no Ultra DMA mode"
    use = f", UDMA {in_use} in use" if in_use is not None else ", none in use"
    if n in modes:
        text = f"the card itself announces UDMA {n} (IDENTIFY word 88: {said}{use if modes else ''})"
        if in_use is not None and in_use < n:
            text += f"; the reader uses UDMA {in_use}, so it, not the card, caps the transfer mode"
        elif in_use is None:
            text += "; the reader selected no Ultra DMA mode, so it talks a slower mode to the card"
        return True, text
    return False, f"the card itself does not announce UDMA {n} (IDENTIFY word 88: {said})"


def label_identify_mismatches(label_claims: list[Claim], ata: dict[str, Any] | None) -> list[str]:
    """Findings where a "UDMA n" on the label is more than the card announces in its IDENTIFY data
    (a CompactFlash card that answered through a SAT reader; ``Card.ata``)."""
    if not ata:
        return []
    findings = []
    for claim in label_claims:
        if claim.kind != "udma":
            continue
        supported, text = udma_against_card(claim.name, ata)
        if not supported:
            findings.append(f"label/card mismatch: the label says {claim.name}, but {text}")
    return findings
