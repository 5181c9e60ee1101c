"""The result record: one JSON-serialisable, versioned document of what was measured and how.

Schema ``cardbench.result/1`` (documented field by field in docs/formats.md).
A result carries its method (engine, block size, queue depth, cache and sync policy, sizes,
repetitions, filesystem, tool version) and the raw per-run samples, so any figure can be
recomputed later. ``Result.from_dict(r.to_dict()) == r`` holds.
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
import re
import socket
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from cardbench import __version__
from cardbench.stats import summarize
from cardbench.units import x_rating

SCHEMA = "cardbench.result/1"
#: how identify() has always written an SD card's CID serial: manufacturer id, OEM id, serial
_CID_SERIAL = re.compile(r"^[0-9a-f]{2}-.{2}-0x[0-9a-f]{1,8}$")


#: the largest count a store's integer columns hold (SQLite INTEGER, PostgreSQL bigint)
INT64_MAX = 2**63 - 1


def beyond_store(result: "Result") -> str | None:
    """The first count of ``result`` (a run's bytes, operations or offset) too large for a
    store's 64-bit integers, in words ("rand_read_4k run 1: ops 3.1e+19"), or None. Only an
    imported file can hold one (a mangled runtime times a rate); it is refused, not stored."""
    for t in result.tests:
        for kind, runs in (("warm-up", t.warmup), ("run", t.runs)):
            for i, x in enumerate(runs, 1):
                for name in ("bytes", "ops", "offset"):
                    v = getattr(x, name)
                    if v is not None and not -INT64_MAX <= v <= INT64_MAX:
                        return f"{t.name} {kind} {i}: {name} {v:.3g} is beyond any device"
    return None


@dataclass
class Run:
    """One timed repetition: bytes moved and seconds taken (plus optional per-operation detail)."""

    bytes: int
    seconds: float
    ops: int | None = None                     # I/O operations (for IOPS)
    latency_s: dict[str, float] | None = None  # percentiles of per-operation latency
    offset: int | None = None                  # where on the device (raw tests, sampled positions)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"bytes": self.bytes, "seconds": self.seconds,
                             "bytes_per_s": self.bytes_per_s if self.seconds > 0 else None}
        if self.ops is not None:
            d["ops"] = self.ops
            d["iops"] = self.ops / self.seconds if self.seconds > 0 else None
        if self.latency_s is not None:
            d["latency_s"] = self.latency_s
        if self.offset is not None:
            d["offset"] = self.offset
        if self.extra:
            d["extra"] = self.extra
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Run":
        return cls(bytes=int(d["bytes"]), seconds=float(d["seconds"]), ops=d.get("ops"),
                   latency_s=d.get("latency_s"), offset=d.get("offset"), extra=d.get("extra") or {})


@dataclass
class TestResult:
    """One named test (seq_write, cold_read, raw_read, rand_read_4k_q1t1, ...) with its runs."""

    name: str
    method: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    warmup: list[Run] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    complete: bool = True
    #: bytes/s ceiling of the path this figure crossed, when known, and whether the figure sits at it
    limited_by: str | None = None
    #: free-form extra data (curves, positions, verification counts)
    extra: dict[str, Any] = field(default_factory=dict)

    __test__ = False  # not a pytest class

    def rates(self) -> list[float]:
        """Per-run rates; a run too short to time (a rate that is not finite) has none."""
        return [r.bytes_per_s for r in self.runs if r.seconds > 0 and math.isfinite(r.bytes_per_s)]

    def iops_values(self) -> list[float]:
        return [r.ops / r.seconds for r in self.runs if r.ops and r.seconds > 0 and math.isfinite(r.ops / r.seconds)]

    @property
    def median_bytes_per_s(self) -> float | None:
        rates = self.rates()
        return summarize(rates).median if rates else None

    def to_dict(self) -> dict:
        rates = self.rates()
        s = summarize(rates) if rates else None
        d: dict[str, Any] = {
            "name": self.name,
            "complete": self.complete,
            "method": self.method,
            "runs": [r.to_dict() for r in self.runs],
            "warmup": [r.to_dict() for r in self.warmup],
            "median_bytes_per_s": s.median if s else None,
            "mean_bytes_per_s": s.mean if s else None,
            "min_bytes_per_s": s.min if s else None,
            "max_bytes_per_s": s.max if s else None,
            "stdev_bytes_per_s": s.stdev if s else None,
            "ci95_bytes_per_s": list(s.ci95) if s and s.ci95 else None,
            "cv": s.cv if s else None,
            "ci95_method": s.ci_method if s else None,
            "spread": s.spread if s else None,
            "spread_too_wide": s.too_wide if s else False,
            "outlier_runs": s.outliers if s else [],
            "x_rating": x_rating(s.median) if s else None,
            "warnings": list(self.warnings),
            "limited_by": self.limited_by,
        }
        iops = self.iops_values()
        if iops:
            si = summarize(iops)
            d["median_iops"] = si.median
            d["mean_iops"] = si.mean
            d["stdev_iops"] = si.stdev
        if self.extra:
            d["extra"] = self.extra
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TestResult":
        return cls(name=d["name"], method=d.get("method") or {},
                   runs=[Run.from_dict(r) for r in d.get("runs") or []],
                   warmup=[Run.from_dict(r) for r in d.get("warmup") or []],
                   warnings=list(d.get("warnings") or []), complete=bool(d.get("complete", True)),
                   limited_by=d.get("limited_by"), extra=d.get("extra") or {})


@dataclass
class Card:
    """What the user told us and what the device told us about the card.

    ``ata``: what a CompactFlash (or other ATA) card said in its IDENTIFY DEVICE data, when it
    answered through the reader (:meth:`cardbench.devices.ata.Identify.summary`: model, serial,
    firmware, sectors, PIO/MDMA/UDMA modes supported and in use). Such a card is known by model +
    serial + sectors, so two cards of one make and size in the same reader are two cards.
    """

    name: str | None = None
    brand: str | None = None
    capacity_bytes: int | None = None
    label: str | None = None
    serial: str | None = None
    model: str | None = None
    ata: dict[str, Any] | None = None
    #: an SD/MMC card on a native slot: its registers as the card declares them (raw CID, CSD, SCR
    #: and what they say: manufacturer, OEM, product, revision, serial, manufacturing date, hwrev,
    #: fwrev, capacity), kept with every record of the card
    sd: dict[str, Any] | None = None
    #: where ``serial`` comes from: "cid" (the SD card's CID), "ata" (IDENTIFY), "usb" (the USB
    #: device that is the card: a stick), "device" (the disk's own serial), None (the user's, or none)
    serial_source: str | None = None

    def identity(self) -> str:
        """A stable key for grouping runs of the same card: the ATA identity (model, serial, sectors)
        of a card that answered IDENTIFY with a serial, else serial+capacity, else the user's name.
        The device side of the rule (which serial is the card's own) is
        :func:`cardbench.devices.identity.identify`, the one function every record goes through."""
        ata = self.ata or {}
        if ata.get("serial"):
            return f"ata:{ata.get('model') or ''}|{ata['serial']}|{ata.get('sectors') or ''}"
        if self.serial:
            return f"serial:{self.serial}:{self.capacity_bytes or ''}"
        parts = [self.brand or "", self.name or "", str(self.capacity_bytes or ""), self.label or ""]
        return "user:" + "|".join(parts)

    def own_identity(self) -> bool:
        """Whether the identity is the card's own (its ATA serial, its CID, a stick's USB serial,
        a disk's serial), not a size, a brand or a name: only such an identity, or a name the person
        typed (:func:`cardbench.verdicts.readers.same_card_basis`), makes two records the same card
        for the reader verdicts."""
        ata = self.ata or {}
        if ata.get("serial"):
            return True
        if self.serial and self.serial_source is None and _CID_SERIAL.match(self.serial):
            return True     # a record from before serial_source: an SD card's CID ("03-SD-0x1234abcd")
        return bool(self.serial) and self.serial_source in ("cid", "ata", "usb", "device")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["identity"] = self.identity()
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "Card":
        d = d or {}
        return cls(**{k: d.get(k) for k in ("name", "brand", "capacity_bytes", "label", "serial", "model", "ata",
                                            "sd", "serial_source")})


@dataclass
class Reader:
    """The path to the card: a USB reader (ids, link speed, driver), a native slot, or a user name."""

    name: str | None = None
    vendor_id: str | None = None
    product_id: str | None = None
    serial: str | None = None
    link_speed_mbit: float | None = None
    driver: str | None = None
    transport: str | None = None
    #: what holds the card: "reader" (a USB device that outlives its media), "stick" (the USB
    #: device is the card: its medium comes and goes with it), "unsure" (cannot tell: said in
    #: ``kind_evidence``), "native" (an SD slot of the host), "hub" (the USB hub or host
    #: controller cards in USB devices of their own share: a probe's, devices.identity.shared_path),
    #: None (not known: a user's name)
    kind: str | None = None
    #: why ``kind`` was chosen, in words
    kind_evidence: list[str] | None = None

    def identity(self) -> str:
        if self.vendor_id and self.product_id:
            return f"usb:{self.vendor_id}:{self.product_id}:{self.serial or ''}"
        return f"name:{self.name or 'unknown'}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["identity"] = self.identity()
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "Reader":
        d = d or {}
        return cls(**{k: d.get(k) for k in ("name", "vendor_id", "product_id", "serial", "link_speed_mbit",
                                            "driver", "transport", "kind", "kind_evidence")})


def host_info() -> dict:
    return {"hostname": socket.gethostname(), "kernel": platform.release(), "machine": platform.machine(),
            "python": platform.python_version()}


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Result:
    """A whole `cardbench run` (or import): target, card, reader, tests, verdicts, warnings."""

    target: dict[str, Any]
    card: Card = field(default_factory=Card)
    reader: Reader = field(default_factory=Reader)
    tests: list[TestResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = True
    error: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    host: dict[str, Any] = field(default_factory=host_info)
    tool: dict[str, Any] = field(default_factory=lambda: {"name": "cardbench", "version": __version__})
    source: str = "run"   # run | import | import-fio | demo

    def test(self, name: str) -> TestResult | None:
        for t in self.tests:
            if t.name == name:
                return t
        return None

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "id": self.id,
            "source": self.source,
            "complete": self.complete,
            "error": self.error,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "tool": self.tool,
            "host": self.host,
            "target": self.target,
            "card": self.card.to_dict(),
            "reader": self.reader.to_dict(),
            "tests": [t.to_dict() for t in self.tests],
            "claims": self.claims,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document (schema={d.get('schema')!r})")
        return cls(target=d.get("target") or {}, card=Card.from_dict(d.get("card")),
                   reader=Reader.from_dict(d.get("reader")),
                   tests=[TestResult.from_dict(t) for t in d.get("tests") or []],
                   warnings=list(d.get("warnings") or []), claims=list(d.get("claims") or []),
                   complete=bool(d.get("complete", True)), error=d.get("error"), id=d.get("id") or uuid.uuid4().hex,
                   started_at=d.get("started_at") or now_iso(), finished_at=d.get("finished_at"),
                   host=d.get("host") or {}, tool=d.get("tool") or {}, source=d.get("source") or "run")
