"""The demo drawer: nine emulated CompactFlash cards like a classic 2006 survey done by hand
through one USB 2.0 reader, each tested with the standard `cardbench run`.

The survey's figures (write / read, MB/s) are the emulated cards' set rates, scaled up by
``SPEED_FACTOR`` so the demo is quick; each card gets ext4 and the standard test with a file
sized by the run command's own rule (:func:`cardbench.plan.size_for_rates`) from the rates the
card is set to, so that every run lasts at least ``RUN_SECONDS``: long enough to time well (above
:data:`cardbench.plan.MIN_RUN_SECONDS`), short enough for nine cards in about 80 s. (The survey
used one 41.99 MB file, which `cardbench run` takes on the 48 MB card too: each run needs one
file's room.)
Every figure set is printed beside every figure measured, and the results go to a demo
database, so `cardbench results --db <demo db>` and `cardbench readers` work on them.

The survey ended on an open question: what is the upper limit of the reader? The demo's reader
has a ceiling (``READER_CEILING_MB_S`` at survey scale), and the demo answers it from direct
evidence: first the known-fast card (the survey's fastest, the Ultra II) through another reader
without a ceiling, then the drawer through the capped reader, then two cards in its slots read
at once (:func:`cardbench.workloads.shared.read_together`). :func:`reader_answer` names the
ceiling, the cards it hides (set faster than it) and the evidence
(:func:`cardbench.verdicts.readers.reader_ceilings`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from functools import partial
from typing import Callable

from cardbench.emulate import CardSpec, EmulatedReader
from cardbench.errors import EnvironmentMissing
from cardbench.plan import MAX_AUTO_SIZE, size_for_rates
from cardbench.progress import NullProgress, ProgressReporter
from cardbench.result import Card, Reader, Result
from cardbench.runner import RunOptions, run_directory
from cardbench.target import DirTarget
from cardbench.units import MB
from cardbench.verdicts.readers import judge_shared, reader_ceilings
from cardbench.workloads.shared import open_devices, read_together

from .emulate.system import load_mfusepy

SPEED_FACTOR = 3
#: every run of every card lasts at least this long at the rates the card is set to (its faster
#: direction; a whole number of MiB, as the run command sizes, may take up to 1 MiB off). The
#: run command's automatic size (3 s writes, reads of at least 1 s) would take the drawer 4 min;
#: fixed 6 MB files made runs of 0.41-0.5 s, and figures 3.5% off the rates set.
RUN_SECONDS = 0.6
RUNS = 3


@dataclass(frozen=True)
class DemoCard:
    brand: str
    capacity_bytes: int
    label: str | None
    write_mb_s: float   # the survey's figure, MB/s (10^6 B/s)
    read_mb_s: float


#: the survey's drawer (write/read MB/s, through one USB 2.0 reader)
DRAWER = [
    DemoCard("Lexar", 48 * MB, "4X", 1.013, 3.6),
    DemoCard("SanDisk", 64 * MB, None, 0.881, 1.9),
    DemoCard("PNY", 128 * MB, None, 1.378, 3.8),
    DemoCard("SanDisk", 128 * MB, None, 1.804, 3.8),
    DemoCard("PNY", 256 * MB, None, 1.580, 3.8),
    DemoCard("SanDisk", 256 * MB, None, 2.370, 3.7),
    DemoCard("Crucial", 256 * MB, None, 4.348, 3.8),
    DemoCard("Lexar", 512 * MB, "4X", 3.479, 4.2),
    DemoCard("SanDisk Ultra II", 1024 * MB, None, 4.897, 4.9),
]

READER_NAME = "demo USB 2.0 reader (emulated)"
FAST_READER_NAME = "demo fast reader (emulated, no ceiling)"
#: the demo reader's ceiling at survey scale (MB/s; x SPEED_FACTOR when emulated): above most of the
#: drawer, below the two fastest cards' reads, which it hides
READER_CEILING_MB_S = 4.0
#: seconds each card is read alone when the two cards in the reader's slots are read at once
PROBE_SECONDS = 0.5


def check_environment() -> None:
    """Raise EnvironmentMissing (one line) when emulated cards cannot run here."""
    if os.geteuid() != 0:
        raise EnvironmentMissing("the demo needs root (loop devices and FUSE); "
                                 "try `cardbench run DIRECTORY` on a mounted card instead")
    if not os.path.exists("/dev/fuse"):
        raise EnvironmentMissing("the demo needs FUSE (/dev/fuse is missing); "
                                 "try `cardbench run DIRECTORY` on a mounted card instead")
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            raise EnvironmentMissing(f"the demo needs {tool} (util-linux/e2fsprogs); "
                                     "try `cardbench run DIRECTORY` instead")
    try:
        load_mfusepy()
    except (ImportError, OSError, EnvironmentMissing):
        raise EnvironmentMissing("the demo needs libfuse3 (apt-get install fuse3); "
                                 "try `cardbench run DIRECTORY` instead") from None


def file_size(spec, ceiling: float | None, seconds: float = RUN_SECONDS) -> int:
    """The demo's test file for an emulated card (``spec``: a CardSpec) behind a reader of
    ``ceiling`` bytes/s (None: none): the run command's sizing (:func:`cardbench.plan.size_for_rates`)
    with the rates the card is set to, so that each run lasts at least ``seconds``."""
    cap = ceiling or float("inf")
    return size_for_rates(min(spec.write_rate, cap), min(spec.read_rate, cap), MAX_AUTO_SIZE,
                          write_seconds=seconds, read_seconds=seconds)


def _test_card(reader, c: DemoCard, name: str, reader_name: str, factor: float, file_bytes: int | None, runs: int,
               progress: ProgressReporter | None) -> Result:
    """One card behind ``reader``: ext4, the standard test (``file_bytes`` files, None: sized by
    :func:`file_size`), then the card is taken out."""
    spec = CardSpec(size=c.capacity_bytes, write_rate=c.write_mb_s * MB * factor,
                    read_rate=c.read_mb_s * MB * factor, name=name)
    card = reader.add_card(spec)
    try:
        with card.filesystem("ext4") as mnt:
            opts = RunOptions(size=file_bytes or file_size(spec, reader.ceiling), runs=runs,
                              progress=progress or NullProgress(),
                              card=Card(brand=c.brand, capacity_bytes=c.capacity_bytes, label=c.label),
                              reader=Reader(name=reader_name, transport="usb"))
            result = run_directory(DirTarget.open(mnt), opts)
    finally:
        reader.remove_card(card)
    result.source = "demo"
    result.target["emulated"] = {"write_bytes_per_s": spec.write_rate, "read_bytes_per_s": spec.read_rate,
                                 "speed_factor": factor,
                                 "reader_ceiling_bytes_per_s": reader.ceiling}
    return result


#: ``keep(card, measure) -> Result``: run one card's test and keep what it measured
Keep = Callable[["DemoCard", Callable[[], Result]], Result]


def _only_measure(card: DemoCard, measure: Callable[[], Result]) -> Result:
    return measure()


def run_demo(*, cards: list[DemoCard] | None = None, factor: float = SPEED_FACTOR, file_bytes: int | None = None,
             runs: int = RUNS, progress: ProgressReporter | None = None, keep: Keep | None = None,
             ceiling_mb_s: float | None = READER_CEILING_MB_S, evidence: bool = True,
             on_evidence=None) -> list[tuple[DemoCard, Result]]:
    """Emulate the drawer behind one reader (ceiling ``ceiling_mb_s`` at survey scale, None for
    none) and run the standard test on every card (``file_bytes`` files; None: each card's own,
    :func:`file_size`).

    Each card's test goes through ``keep(card, measure)``, which runs ``measure()`` and returns
    its Result: the CLI's stores and prints each as it goes, and stores what a card cut short
    measured (:func:`cardbench.measured.keep_measured`); by default the test is only run.
    With ``evidence``: first, when the ceiling hides some card, the known-fast card (the drawer's
    fastest reader) through another reader without a ceiling (``keep`` too; its result is the first of the list), and at the
    end two cards in the capped reader's slots read at once; ``on_evidence(finding)`` gets that
    :func:`cardbench.verdicts.readers.judge_shared` finding (with ``reader_identity``).
    """

    check_environment()
    cards = DRAWER if cards is None else cards
    keep = keep or _only_measure
    out: list[tuple[DemoCard, Result]] = []
    ceiling = ceiling_mb_s * MB * factor if ceiling_mb_s else None
    fastest = max(cards, key=lambda c: c.read_mb_s)
    if evidence and ceiling is not None and fastest.read_mb_s * MB * factor > ceiling:
        # the known-fast card is only worth fetching when the ceiling hides a card
        with EmulatedReader(ceiling=None) as fast:
            result = keep(fastest, lambda: _test_card(fast, fastest, "known-fast", FAST_READER_NAME, factor,
                                                      file_bytes, runs, progress))
        out.append((fastest, result))
    with EmulatedReader(ceiling=ceiling) as reader:
        for i, c in enumerate(cards):
            result = keep(c, partial(_test_card, reader, c, f"demo{i}", READER_NAME, factor, file_bytes, runs,
                                     progress))
            out.append((c, result))
        if evidence and ceiling is not None and len(cards) >= 2:
            two = sorted(cards, key=lambda c: c.read_mb_s)[-2:]
            slots = [reader.add_card(CardSpec(size=c.capacity_bytes, write_rate=c.write_mb_s * MB * factor,
                                              read_rate=c.read_mb_s * MB * factor, name=f"slot{i}"))
                     for i, c in enumerate(two)]
            finding = judge_shared(read_together(open_devices([s.device for s in slots]), seconds=PROBE_SECONDS))
            finding["reader_identity"] = Reader(name=READER_NAME, transport="usb").identity()
            finding["reader"] = READER_NAME
            finding["cards"] = [f"{c.brand} {c.capacity_bytes // MB}M" for c in two]
            for s in slots:
                reader.remove_card(s)
            if on_evidence:
                on_evidence(finding)
    return out


def reader_answer(done: list[tuple[DemoCard, Result]], probes: list[dict] | None = None) -> dict:
    """The answer to the survey's question from the demo's results: the capped reader's entry of
    :func:`cardbench.verdicts.readers.reader_ceilings` (``entry``), its ceiling, and the cards it
    hides: those whose set read rate is above it (``hidden``: [(card, set, measured)] in bytes/s)."""
    results = [r for _, r in done]
    identity = Reader(name=READER_NAME, transport="usb").identity()
    entry = next((e for e in reader_ceilings(results, probes=probes) if e["identity"] == identity), None)
    ceiling = entry["ceiling_bytes_per_s"] if entry else None
    hidden = []
    if ceiling:
        for c, r in done:
            if r.reader.identity() != identity:
                continue
            set_rate = r.target.get("emulated", {}).get("read_bytes_per_s")
            measured = r.test("cold_read").median_bytes_per_s if r.test("cold_read") else None
            if set_rate and set_rate > ceiling * 1.03:
                hidden.append((c, set_rate, measured))
    return {"entry": entry, "ceiling_bytes_per_s": ceiling, "hidden": hidden}
