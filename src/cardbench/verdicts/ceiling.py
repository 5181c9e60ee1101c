"""The ceiling of the path between host and card, and the checks that use it.

A figure can only be as fast as the slowest link it crossed. :func:`path_ceiling` names that
link's ceiling from what is known about the reader; :func:`mark_limits` marks results that sit at
it ("the card may be faster") or above it (implausible: a cache answered); :func:`plausibility`
flags impossible figures without knowing the reader at all; :func:`clear_limits` undoes the marks
so a stored result can be marked again when what is known about its reader changes.

Three lines per ceiling (figures and sources in ``data/ratings.toml``):

* ``physical_bytes_per_s``: the most the bus carries as payload. USB 2.0 bulk: 13 x 512 B per
  125 us microframe = 53.248 MB/s [S36]. A figure above it did not come from the card.
* ``limit_bytes_per_s``: the practical "cannot exceed" line. USB 2.0 with usb-storage (BOT):
  43 MB/s, the best case observed (Cypress) [S37]. A label requiring more cannot be verified on
  this path (:func:`cardbench.verdicts.claims.judge` says inconclusive).
* ``typical_bytes_per_s``: the top of the typical zone. USB 2.0 BOT: 35 MB/s (30-35 MB/s peak
  net is typical [S38]). A figure at >= 90% of it (31.5 MB/s) is marked "limited by the reader or
  bus". The 90% rule is the reference notes' tool note (standards.md §4.1), our inference.

Why two lines for USB 2.0: typical BOT readers stop at 30-35 MB/s, so a card reading 33 MB/s
there is most likely reader-bound; but good bridges reach ~43 MB/s, so only a requirement above
43 MB/s is one this path certainly cannot show. With uas (command queuing [S40]) the typical line
moves to 43 MB/s and the limit to the bus maximum (no practical UAS figure is sourced). USB 3
Gen 1: ~400 MB/s "realistic" [S39] of 500 MB/s after 8b/10b. Faster USB links have no sourced
practical figure: their after-encoding maximum is used for every line. On a native SD host the
bus mode sets all three lines: DS 12.5, HS 25, SDR50/DDR50 50, SDR104 104 MB/s [S14], or the
actual clock x bus width / 8 when known (hosts often run below nominal [S51]). A CompactFlash card
that answered ATA IDENTIFY adds its transfer mode (:func:`interface_mode_ceiling`: PIO 4 16.7,
UDMA 4 66.7 MB/s... [S23][S66][S67]) as all three lines; where two ceilings apply, the lower
typical line wins and the lower physical line is kept for the implausibility check.

The kernel prints "12" both for Full Speed and for an unknown speed [S31]; such a ceiling is
``speed_may_be_unknown`` and is dropped when a figure exceeds it, rather than calling the figure
implausible.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence, Union

from cardbench.result import Reader, Result, TestResult
from cardbench.units import MB, fmt_rate
from cardbench.verdicts.ratings import ratings


@dataclass(frozen=True)
class Ceiling:
    """How fast a path can carry data (all bytes/s); see the module docstring for the three lines."""

    limit_bytes_per_s: float
    typical_bytes_per_s: float
    physical_bytes_per_s: float | None
    label: str                               # "USB 2.0 usb-storage" / "SD bus SDR104" / "reader X (observed)"
    basis: str                               # "usb" | "sd-bus" | "observed"
    directions: tuple[str, ...] = ("read", "write")
    sources: tuple[str, ...] = ()
    note: str = ""
    speed_may_be_unknown: bool = False
    #: what ``physical_bytes_per_s`` belongs to, when another link than ``label`` is slower at that
    #: line (a CF card's transfer mode behind a USB link whose typical rate is lower still)
    physical_label: str | None = None

    @property
    def limited_from_bytes_per_s(self) -> float:
        """A median at or above this is marked as limited by the path."""
        return near_fraction() * self.typical_bytes_per_s

    def describe(self) -> str:
        """"USB 2.0 usb-storage, ~35-43 MB/s"."""
        lo, hi = _mb(self.typical_bytes_per_s), _mb(self.limit_bytes_per_s)
        span = f"~{lo} MB/s" if lo == hi else f"~{lo}-{hi} MB/s"
        return f"{self.label}, {span}"

    @property
    def who(self) -> str:
        """What sets a figure at this ceiling, in words."""
        return {"observed": "the reader", "card-mode": "the card's interface mode"}.get(self.basis,
                                                                                         "the reader or bus")

    def limited_by_text(self) -> str:
        if self.basis == "card-mode":
            return f"limited by the card's interface mode ({self.describe()}); its flash may be faster"
        return f"limited by {self.who} ({self.describe()}); the card may be faster"

    def to_dict(self) -> dict[str, Any]:
        return {"limit_bytes_per_s": self.limit_bytes_per_s, "typical_bytes_per_s": self.typical_bytes_per_s,
                "physical_bytes_per_s": self.physical_bytes_per_s, "label": self.label, "basis": self.basis,
                "directions": list(self.directions), "sources": list(self.sources), "note": self.note,
                "speed_may_be_unknown": self.speed_may_be_unknown, "physical_label": self.physical_label}


Ceilings = Union[Ceiling, Mapping[str, Ceiling], None]


def _mb(value: float) -> str:
    mb = value / MB
    if mb >= 100:
        return f"{mb:,.0f}"
    return f"{mb:.3g}"


def near_fraction() -> float:
    return float(ratings()["limits"]["near_ceiling_fraction"])


def memory_speed() -> float:
    return float(ratings()["limits"]["memory_speed_bytes_per_s"])


# --- the ceiling of a path -------------------------------------------------------------------

_SD_TRANSPORTS = {"mmc", "sd", "sdhci", "native", "mmcblk"}


def _speed_key(mbit: float | str) -> str | None:
    try:
        value = float(mbit)
    except (TypeError, ValueError):
        return None
    return f"{value:g}"


def usb_ceiling(speed: float | str, driver: str | None = None) -> Ceiling | None:
    """The ceiling of a USB link from its sysfs ``speed`` ("12", "480", "5000", "10000", "20000")
    and the mass-storage driver ("usb-storage" = BOT, "uas"); None for Low Speed or unknown values."""
    key = _speed_key(speed)
    entry = ratings()["usb"].get(key) if key is not None else None
    if key is None or entry is None:
        return None
    drv = (driver or "").strip().lower()
    if drv == "uas":
        proto, proto_name = entry["uas"], "uas"
    elif drv in ("usb-storage", "usb_storage", "bot"):
        proto, proto_name = entry["bot"], "usb-storage"
    else:
        proto, proto_name = entry["bot"], "driver unknown, usb-storage assumed"
    short = {"12": "USB 1.1", "480": "USB 2.0", "5000": "USB 3 Gen 1", "10000": "USB 3 Gen 2",
             "20000": "USB 3 Gen 2x2"}.get(key, entry["name"])
    sources = tuple(dict.fromkeys(list(entry["sources"]) + list(proto["sources"])))
    return Ceiling(limit_bytes_per_s=float(proto["limit_bytes_per_s"]),
                   typical_bytes_per_s=float(proto["typical_bytes_per_s"]),
                   physical_bytes_per_s=float(entry["physical_bytes_per_s"]),
                   label=f"{short} {proto_name}", basis="usb", sources=sources,
                   note=f"{entry['note']} {proto['note']}",
                   speed_may_be_unknown=bool(entry.get("speed_may_be_unknown", False)))


def _sd_mode(name: str) -> tuple[str, dict] | None:
    text = name.strip().lower()
    if "(" in text and ")" in text:          # debugfs "timing spec: 6 (sd uhs SDR104)"
        text = text[text.index("(") + 1:text.rindex(")")].strip()
    for mode, entry in ratings()["sd_bus_mode"].items():
        if text == mode.lower() or text in entry.get("aliases", []):
            return mode, entry
    return None


def sd_bus_ceiling(mode: str | None = None, clock_hz: float | None = None, bus_width: int = 4,
                   ddr: bool | None = None) -> Ceiling | None:
    """The ceiling of a native SD host from its bus mode ("SDR104", "sd uhs SDR104", "6 (sd uhs
    SDR104)", "HS"...) and/or actual clock: clock x width / 8 (x 2 for DDR) when the clock is known,
    else the mode's nominal figure [S14]. None when neither is known."""
    found = _sd_mode(mode) if mode else None
    if clock_hz:
        is_ddr = ddr if ddr is not None else bool(found and "DDR" in found[0])
        value = float(clock_hz) * bus_width / 8 * (2 if is_ddr else 1)
        label = f"SD bus {found[0] if found else 'mode unknown'} at {float(clock_hz) / 1e6:g} MHz"
        sources: tuple[str, ...] = ("S14", "S51")
        note = "Ceiling = actual clock x bus width / 8 (x 2 for DDR); hosts often run below nominal [S51]."
    elif found:
        value = float(found[1]["ceiling_bytes_per_s"])
        label = f"SD bus {found[0]}"
        sources = tuple(found[1]["sources"])
        note = found[1]["note"]
    else:
        return None
    return Ceiling(limit_bytes_per_s=value, typical_bytes_per_s=value, physical_bytes_per_s=value,
                   label=label, basis="sd-bus", sources=sources, note=note)


def path_ceiling(reader: Reader, *, sd_mode: str | None = None, sd_clock_hz: float | None = None,
                 sd_bus_width: int = 4, sd_ddr: bool | None = None) -> Ceiling | None:
    """The ceiling of the path to the card, from what the reader record says.

    A native SD slot (``reader.transport`` "mmc"/"sd", or an SD bus mode or clock given) gets the
    bus ceiling; a USB reader gets the link ceiling from ``reader.link_speed_mbit`` and
    ``reader.driver``. None when nothing is known (e.g. a reader entered by name only).
    """
    transport = (reader.transport or "").strip().lower()
    if transport in _SD_TRANSPORTS or sd_mode or sd_clock_hz:
        ceiling = sd_bus_ceiling(sd_mode, sd_clock_hz, sd_bus_width, sd_ddr)
        if ceiling is not None or transport in _SD_TRANSPORTS:
            return ceiling
    if reader.link_speed_mbit is not None:
        return usb_ceiling(reader.link_speed_mbit, reader.driver)
    return None


_MODE_TABLES = {"PIO": "cf_pio", "MDMA": "cf_mdma", "UDMA": "cf_udma"}


def mode_rate(kind: str, number: int) -> float | None:
    """bytes/s a CF/ATA transfer mode carries at most ("PIO", 4) -> 16.7 MB/s; None for a mode
    without a verified rate (CF 3.0's PIO 5-6 and MDMA 3-4) or an unknown one."""
    table = _MODE_TABLES.get(str(kind).upper())
    entry = ratings()[table].get(f"{str(kind).upper()}{number}") if table else None
    if entry is None or "ceiling_bytes_per_s" not in entry:
        return None
    return float(entry["ceiling_bytes_per_s"])


def interface_mode_ceiling(ata: Mapping[str, Any] | None) -> Ceiling | None:
    """The ceiling a CompactFlash card's transfer mode sets, from its IDENTIFY summary
    (``Card.ata``): the mode in use, i.e. the highest one both the card and the reader's bridge
    use (the one the bridge selected; with no DMA mode selected, the card's fastest PIO mode, an
    upper bound). Data crosses the card's ATA bus at that mode, so no figure can pass it: at it,
    "limited by the card's interface mode"; above it, a cache. None when the card did not answer
    or its mode has no verified rate (PIO 5-6, MDMA 3-4: see ``data/ratings.toml``)."""
    mode = (ata or {}).get("mode") or {}
    kind, number = mode.get("kind"), mode.get("number")
    if kind is None or number is None:
        return None
    rate = mode_rate(kind, int(number))
    if rate is None:
        return None
    entry = ratings()[_MODE_TABLES[str(kind).upper()]][f"{str(kind).upper()}{int(number)}"]
    name = f"{str(kind).upper()} {int(number)}"
    if mode.get("selected"):
        label, note = f"card mode {name}", f"{name} is the transfer mode the reader selected on the card."
    else:
        label = f"card mode {name} (no DMA selected)"
        note = (f"No DMA mode is selected on the card, so the reader talks PIO; {name} is the card's fastest "
                "PIO mode, the most it can be.")
    return Ceiling(limit_bytes_per_s=rate, typical_bytes_per_s=rate, physical_bytes_per_s=rate, label=label,
                   basis="card-mode", sources=tuple(entry["sources"]), note=f"{note} {entry['note']}")


def observed_ceiling(finding: Mapping[str, Any], accept: tuple[str, ...] = ("likely",)) -> Ceiling | None:
    """A :class:`Ceiling` from one finding of :func:`cardbench.verdicts.readers.reader_ceilings`
    (its top level or one of its ``findings``); None when it names no ceiling or its confidence
    is not in ``accept``. Only "likely" by default: a "possible" plateau was passed by some cards,
    so it is no line a requirement can be ruled out against."""
    value = finding.get("ceiling_bytes_per_s")
    if not value or finding.get("confidence") not in accept:
        return None
    direction = finding.get("direction") or "read"
    top = float(finding.get("cluster_max_bytes_per_s") or value)
    return Ceiling(limit_bytes_per_s=top, typical_bytes_per_s=float(value), physical_bytes_per_s=None,
                   label=f"{finding.get('name') or finding.get('identity') or 'this reader'}, observed "
                         f"{direction} ceiling ({finding.get('confidence')})",
                   basis="observed", directions=(direction,), note=str(finding.get("evidence") or ""))


def ceilings_for(result: Result, observed: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Ceiling]:
    """Per direction ("read", "write"), the ceiling that applies to ``result``.

    From the reader record and, for a native SD slot, ``result.target["sd_bus"]`` (keys "mode",
    "clock_hz", "bus_width", "ddr"), plus the observed ceiling of this reader in ``observed`` (the
    output of reader_ceilings over stored results) where one is named: in that direction the lower
    typical ceiling of the two wins; the physical maximum of the link is kept for the
    implausibility check.
    """
    bus = result.target.get("sd_bus") if isinstance(result.target, dict) else None
    bus = bus if isinstance(bus, dict) else {}
    base = path_ceiling(result.reader, sd_mode=bus.get("mode"), sd_clock_hz=bus.get("clock_hz"),
                        sd_bus_width=int(bus.get("bus_width") or 4), sd_ddr=bus.get("ddr"))
    out: dict[str, Ceiling] = {}
    if base is not None:
        out = {"read": base, "write": base}
    mode = interface_mode_ceiling(result.card.ata)
    if mode is not None:
        for direction in ("read", "write"):
            out[direction] = _lower(out.get(direction), mode)
    identity = result.reader.identity()
    for entry in observed or []:
        if entry.get("identity") != identity:
            continue
        for finding in (list(entry.get("findings") or []) + list(entry.get("direct") or [])) or [entry]:
            seen = observed_ceiling({**finding, "name": entry.get("name"), "identity": identity})
            if seen is None:
                continue
            for direction in seen.directions:
                current = out.get(direction)
                if current is None or seen.typical_bytes_per_s < current.typical_bytes_per_s:
                    physical = current.physical_bytes_per_s if current else None
                    out[direction] = replace(seen, physical_bytes_per_s=physical,
                                             physical_label=(current.physical_label or current.label)
                                             if current else None)
    return out


def _lower(current: Ceiling | None, other: Ceiling) -> Ceiling:
    """Of two ceilings on one path, the one with the lower typical line, keeping the lower physical
    line of the two (and what it belongs to) for the implausibility check."""
    if current is None:
        return other
    low, high = (other, current) if other.typical_bytes_per_s <= current.typical_bytes_per_s else (current, other)
    phys = [c for c in (low, high) if c.physical_bytes_per_s is not None]
    if not phys:
        return low
    floor = min(phys, key=lambda c: c.physical_bytes_per_s)   # type: ignore[arg-type, return-value]
    if floor is low:
        return low
    return replace(low, physical_bytes_per_s=floor.physical_bytes_per_s,
                   physical_label=floor.physical_label or floor.label)


def direction_of_test(name: str) -> str | None:
    """"read" or "write" for a test name (seq_write, cold_read, rand_read_4k_q1t1...), else None."""
    if "read" in name:
        return "read"
    if "write" in name:
        return "write"
    return None


def pick(ceilings: Ceilings, test_name: str, direction: str | None = None) -> Ceiling | None:
    """The ceiling for one test: a single Ceiling applies to its directions; a mapping is looked up
    by test name, then by direction ("read"/"write")."""
    direction = direction or direction_of_test(test_name)
    if ceilings is None:
        return None
    if isinstance(ceilings, Ceiling):
        if direction is None or direction in ceilings.directions:
            return ceilings
        return None
    if test_name in ceilings:
        return ceilings[test_name]
    return ceilings.get(direction) if direction else None


# --- marking results -----------------------------------------------------------------------

#: the words of the warning :func:`mark_limits` adds (and :func:`clear_limits` removes)
AT_CEILING = "is at the ceiling of the path"

def _warn(test: TestResult, text: str, added: list[str] | None = None) -> None:
    if text not in test.warnings:
        test.warnings.append(text)
        if added is not None:
            added.append(text)


def mark_limits(result: Result, ceiling: Ceilings) -> None:
    """Mark each test whose median sits at the path's ceiling, and flag figures above it.

    At >= 90% of the typical ceiling: ``test.limited_by`` is set ("limited by the reader or bus
    (USB 2.0 usb-storage, ~35-43 MB/s); the card may be faster") and a warning added. Above the
    physical maximum: a warning that the figure is implausible (a cache, not the card); on a link
    whose "12" may mean "unknown speed", a warning that the speed is probably unknown instead.
    Calling it twice adds nothing twice.
    """
    for test in result.tests:
        median = test.median_bytes_per_s
        c = pick(ceiling, test.name)
        if c is None or median is None:
            continue
        if c.physical_bytes_per_s is not None and median > c.physical_bytes_per_s:
            if c.speed_may_be_unknown:
                _warn(test, f"{test.name}: {fmt_rate(median)} is more than {c.label} can carry "
                            f"({fmt_rate(c.physical_bytes_per_s)}); the kernel prints 12 Mbit/s also for an "
                            "unknown link speed, so the speed is probably unknown: no ceiling applied")
            else:
                _warn(test, f"{test.name}: {fmt_rate(median)} is implausible: faster than "
                            f"{c.physical_label or c.label} can carry ({fmt_rate(c.physical_bytes_per_s)}); "
                            "the figure is a cache (the page cache or the device's), not the card")
            continue
        if median >= c.limited_from_bytes_per_s:
            test.limited_by = c.limited_by_text()
            what = ("the card's interface mode, not its flash, sets this figure" if c.basis == "card-mode"
                    else "the reader or bus, not the card, may set this figure")
            _warn(test, f"{test.name}: {fmt_rate(median)} {AT_CEILING} ({c.describe()}): {what}")


def clear_limits(result: Result) -> None:
    """Undo :func:`mark_limits`: every ``limited_by`` mark and every "at the ceiling" warning
    removed, so a result can be marked again against ceilings that changed (a reader's observed
    ceiling comes, moves or goes as more cards are measured through it). Other warnings stay."""
    for test in result.tests:
        test.limited_by = None
        test.warnings = [w for w in test.warnings if not (w.startswith(f"{test.name}: ") and AT_CEILING in w)]


def plausibility(result: Result) -> list[str]:
    """Checks that need no reader knowledge; adds warnings to the tests and returns the new ones.

    * runs of one test that disagree more than tenfold (max/min > 10): not one measurement;
    * a figure faster than 20 GB/s (memory speed): the page cache answered, not the card.
    """
    added: list[str] = []
    limits = ratings()["limits"]
    factor = float(limits["run_disagreement_factor"])
    memory = memory_speed()
    for test in result.tests:
        rates = test.rates()
        if not rates:
            continue
        lo, hi = min(rates), max(rates)
        if len(rates) >= 2 and lo > 0 and hi / lo > factor:
            _warn(test, f"{test.name}: runs disagree more than {factor:g}-fold ({fmt_rate(lo)} to {fmt_rate(hi)}): "
                        "not one measurement (a cache, throttling or another process changed between runs)", added)
        fast = [r for r in rates if r > memory]
        if fast:
            what = ("the page cache answered, not the card" if direction_of_test(test.name) != "write"
                    else "the writes went to the page cache, not the card")
            _warn(test, f"{test.name}: memory speed: {what} ({len(fast)} of {len(rates)} runs above "
                        f"{fmt_rate(memory, 'GB/s', 0)}, up to {fmt_rate(hi, 'GB/s', 1)})", added)
    return added
