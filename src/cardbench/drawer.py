"""The drawer session: a whole drawer of cards in one sitting (``cardbench drawer``).

:class:`DrawerSession` watches for cards (:mod:`cardbench.devices.watch`) until it is stopped
(Ctrl-C, SIGTERM, or ``stop()`` returning True). For each card that goes in, one after the other:

1. wait ``settle`` seconds for an automounter (udisks mounts within a few seconds);
2. identify it (:func:`cardbench.devices.identity.identify`: CID/CSD on a native slot, the
   reader's USB ids and serial, the size) and recall by that identity the name, brand, capacity
   and label it was stored with before (:func:`recall`); a new card is asked for them once
   (``ask``; never with ``ask=None``, the CLI's ``--no-prompt``);
3. test it: a mounted card gets ``run`` on its mount (:func:`cardbench.runner.run_directory`
   with the ``profile``'s extra tests); an unmounted one the read-only ``run DEVICE``
   (:func:`cardbench.runner.run_device`, positions chosen so a slow card is done in time) and the
   quick ``verify`` (:func:`cardbench.verify.quick.verify_device`, which restores what it writes,
   within ``verify_budget`` seconds);
4. store the result and the verify document (:func:`cardbench.measured.keep_measured`, which
   every command's measurement ends through: signals held while they are stored and reported)
   and report the card's row; the card can then be swapped.

A card pulled mid-test (or one that cannot be read at all) is stored as incomplete with its
error and the session goes on. Ctrl-C or SIGTERM while a card is under test: the test's own
cleanup runs (test files removed, verify's blocks written back), the partial result is stored
and :class:`Interrupted` ends the session; the caller then prints :meth:`DrawerSession.summary`.
Two cards behind the same reader (:func:`cardbench.devices.watch.reader_key`) are, once both
are tested, read at once (:func:`cardbench.workloads.shared.read_together`) for the reader's
shared ceiling; each such probe is stored (``cardbench.probe/1``, :mod:`cardbench.evidence`), and
:meth:`DrawerSession.save_session` stores the session itself (``cardbench.session/1``: which cards,
in what order, its probes and its reader verdict), both through :func:`cardbench.record.record`.

What happens is told to ``on_event`` as typed values (:data:`DrawerEvent`: :class:`Watching`,
:class:`CardDone`, ...); :func:`cardbench.report.session.event_lines` words them.

Pace: a 1 MB/s card is done within a minute with the default options (measured with
``bench/drawer_pace.py``, docs/benchmarks.md).
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from cardbench.devices.discovery import get_device
from cardbench.devices.identity import identify
from cardbench.devices.watch import Watcher, reader_key
from cardbench.errors import CardbenchError, Interrupted, StoreError
from cardbench.evidence import probe_document, probe_findings, probe_reader_identity, session_document
from cardbench.measured import keep_measured
from cardbench.progress import NullProgress, ProgressReporter
from cardbench.result import Card, Reader, Result, now_iso
from cardbench.runner import (
    PROFILES,
    DeviceOptions,
    RunOptions,
    run_device,
    run_directory,
)
from cardbench.store import open_store
from cardbench.target import DirTarget, open_device_target
from cardbench.verdicts.readers import judge_shared, reader_ceilings
from cardbench.verify.quick import verify_device
from cardbench.workloads import raw
from cardbench.workloads.shared import open_devices, read_together

SCHEMA = "cardbench.drawer/1"
#: seconds a card is given to be automounted before it is tested unmounted
SETTLE_SECONDS = 3.0
#: the quick verify's time budget per card (seconds)
VERIFY_BUDGET = 15.0
#: raw_read: a sweep should last about this long; at least MIN_POSITIONS samples of 1 MiB
SWEEP_SECONDS = 3.0
MIN_POSITIONS = 4
MAX_POSITIONS = 16
ACCESS_SECONDS = 1.0

Ask = Callable[[Card, Any], Card]


@dataclass
class DrawerOptions:
    """What the session does with each card (see the module docstring)."""

    profile: str = "classic"
    runs: int = 3
    include_loop: bool = False
    loop_under: str | None = None
    settle: float = SETTLE_SECONDS
    verify: bool = True
    verify_budget: float = VERIFY_BUDGET
    db: str | None = None
    save: bool = True
    reader_name: str | None = None
    ask: Ask | None = None
    progress: ProgressReporter = field(default_factory=NullProgress)
    on_event: Callable[[DrawerEvent], None] | None = None
    method: str = "auto"
    probe_shared: bool = True
    #: test the cards already in when the session starts (else they are named and left alone
    #: until their medium changes)
    test_present: bool = False


@dataclass
class CardOutcome:
    """One card of the session: its result, its verify document, and what went wrong."""

    device: str
    result: Result | None = None
    verify: dict[str, Any] | None = None
    mode: str = "device"          # "directory" (mounted) | "device"
    mountpoint: str | None = None
    recalled: bool = False
    error: str | None = None
    skipped: list[str] = field(default_factory=list)
    saved: bool = False

    @property
    def complete(self) -> bool:
        return self.error is None and self.result is not None and self.result.complete and \
            (self.verify is None or bool(self.verify.get("complete")))

    def items(self) -> list[Any]:
        """What the card's test measured, to store: its result and its verify document (either may be None)."""
        return [self.result, self.verify]

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "device": self.device,
                "result": self.result.to_dict() if self.result is not None else None, "verify": self.verify}


# -- what the session tells (DrawerOptions.on_event), in the order it can happen ------------------

@dataclass(frozen=True)
class Watching:
    """The session watches ``what`` (in words) by ``method``; ``root``: unmounted cards can be read."""

    what: str
    method: str
    root: bool


@dataclass(frozen=True)
class Present:
    """Cards already in when the session started; ``tested``: they are tested first (else left alone)."""

    devices: tuple[str, ...]
    tested: bool


@dataclass(frozen=True)
class Inserted:
    """A card went in; ``queued`` cards wait (this one among them)."""

    device: str
    size: int | None
    queued: int


@dataclass(frozen=True)
class Removed:
    """A card that was waiting or tested came out."""

    device: str


@dataclass(frozen=True)
class Gone:
    """A card went before it could be tested."""

    device: str


@dataclass(frozen=True)
class Ignored:
    """A device that is not tested, and why (it holds the running system)."""

    device: str
    why: str


@dataclass(frozen=True)
class Testing:
    """Card ``number`` of the session is under test; ``recalled``: known from the store."""

    device: str
    card: Card
    recalled: bool
    number: int


@dataclass(frozen=True)
class Verifying:
    """The quick fake-capacity verify of an unmounted card began (``budget_s`` seconds at most)."""

    device: str
    budget_s: float


@dataclass(frozen=True)
class CardDone:
    """A card is done (stored, or said why not) and can be swapped; ``count`` cards so far."""

    outcome: CardOutcome
    count: int


@dataclass(frozen=True)
class SaveFailed:
    """``what`` (a device, the reader probe or this drawer session) was not stored, and why."""

    what: str
    error: str


@dataclass(frozen=True)
class Probing:
    """Two or more tested cards behind one reader are read at once."""

    devices: tuple[str, ...]


@dataclass(frozen=True)
class Probed:
    """The finding of reading them at once (:func:`cardbench.verdicts.readers.judge_shared`)."""

    finding: dict[str, Any]


@dataclass(frozen=True)
class ProbeFailed:
    """Reading them at once failed."""

    devices: tuple[str, ...]
    error: str


DrawerEvent = Union[Watching, Present, Inserted, Removed, Gone, Ignored, Testing, Verifying, CardDone, SaveFailed,
                    Probing, Probed, ProbeFailed]
#: every kind of event, for those who word them (cardbench.report.session.event_lines)
EVENT_TYPES: tuple[type, ...] = DrawerEvent.__args__   # type: ignore[attr-defined]


def recall(cards: list[dict], probe: Card) -> Card | None:
    """The card stored before with the identity the device gives (``probe``: serial, model and
    capacity as :func:`identify` fills them), newest first: same serial and capacity; without
    a serial, the same model and capacity when exactly one stored card has them. None if new."""
    def same(c: dict, key: str) -> bool:
        return (c.get(key) or None) == (getattr(probe, key) or None)

    if probe.serial:
        found = [c for c in cards if same(c, "serial") and same(c, "capacity_bytes")]
    else:
        found = [c for c in cards if not c.get("serial") and same(c, "model") and same(c, "capacity_bytes")]
        # two different cards of one model and size cannot be told apart: ask again
        if len({c.get("identity") for c in found}) > 1:
            return None
    if not found:
        return None
    return Card.from_dict(found[-1])


def save_card(outcome: CardOutcome, db: str | None):
    """Store a card's result (also a partial one) and verify document through
    :func:`cardbench.measured.keep_measured` (the one save: the stored results of its reader are
    judged again, and what the store cannot take is kept in the outbox). Returns the ``Recorded``."""
    return keep_measured(lambda: outcome.items(), db=db).recorded


def raw_positions(path: str) -> int:
    """How many 1 MiB-or-larger samples a raw_read sweep takes so it lasts ~SWEEP_SECONDS on this
    card (at least MIN_POSITIONS): a 1 MB/s card gets 4, a fast one 16."""
    per_second = raw.auto_sample(path, 1, target_seconds=1.0)   # ~ bytes read in one second
    return max(MIN_POSITIONS, min(MAX_POSITIONS, int(per_second * SWEEP_SECONDS) // raw.BLOCK))


class _Prefixed:
    """A progress reporter that names the card and the count before each task."""

    def __init__(self, inner: ProgressReporter, prefix: Callable[[], str]) -> None:
        self.inner, self.prefix = inner, prefix

    def task(self, description: str, total: int | None):
        return self.inner.task(f"{self.prefix()} {description}", total)


class DrawerSession:
    """Watch, test, store, report; see the module docstring. ``outcomes`` holds every card."""

    def __init__(self, opts: DrawerOptions | None = None) -> None:
        self.opts = opts or DrawerOptions()
        self.outcomes: list[CardOutcome] = []
        self.probes: list[dict[str, Any]] = []
        self.queue: list[str] = []
        self.current: str | None = None
        #: the device whose test Ctrl-C/SIGTERM cut short (None when it came between cards)
        self.cut_short: str | None = None
        self._probed: set[str] = set()
        #: this session's id and start, and the cardbench.probe/1 documents of its probes
        self.session_id = uuid.uuid4().hex
        self.started_at = now_iso()
        self.probe_docs: list[dict[str, Any]] = []
        #: why this session's probes or the session itself were not stored (kept in the outbox, or lost)
        self.evidence_not_stored: list[CardbenchError] = []
        self._watcher: Watcher | None = None
        #: why cards were not stored (NotStored: kept in the outbox; StoreError: lost)
        self.not_stored: list[CardbenchError] = []

    # -- reporting ----------------------------------------------------------------------------
    def _event(self, event: DrawerEvent) -> None:
        if self.opts.on_event is not None:
            self.opts.on_event(event)

    def watching(self) -> str:
        """What the session watches, in words."""
        what = "USB mass storage, mmc (SD/MMC) and removable block devices"
        if self.opts.include_loop:
            what += " and loop devices" + (f" backed under {self.opts.loop_under}" if self.opts.loop_under else "")
        return what

    # -- the loop -----------------------------------------------------------------------------
    def run(self, stop: Callable[[], bool] | None = None, *, max_cards: int | None = None) -> list[CardOutcome]:
        """Watch and test until ``stop()`` is true, ``max_cards`` are done, or Ctrl-C/SIGTERM
        (Interrupted or KeyboardInterrupt propagates after the card under test is stored)."""
        try:
            return self._watch(stop, max_cards)
        finally:
            self.save_session()      # also on Ctrl-C/SIGTERM: which cards, in what order, its verdict

    def _watch(self, stop: Callable[[], bool] | None, max_cards: int | None) -> list[CardOutcome]:
        o = self.opts
        with Watcher(include_loop=o.include_loop, loop_under=o.loop_under, method=o.method) as watcher:
            self._watcher = watcher
            self._event(Watching(what=self.watching(), method=watcher.method, root=os.geteuid() == 0))
            present = [p for p in watcher.present() if p.startswith("/dev/loop") or not self._holds_system(p)]
            if present:
                self._event(Present(devices=tuple(present), tested=o.test_present))
                if o.test_present:
                    self.queue.extend(present)
            while not (stop and stop()) and (max_cards is None or len(self.outcomes) < max_cards):
                for change in watcher.wait(0.5 if not self.queue else 0.0):
                    if change.inserted and change.path not in self.queue:
                        self.queue.append(change.path)
                        self._event(Inserted(device=change.path, size=change.size, queued=len(self.queue)))
                    elif not change.inserted and (change.path in self.queue or
                                                  any(o.device == change.path for o in self.outcomes)):
                        if change.path in self.queue:
                            self.queue.remove(change.path)
                        self._event(Removed(device=change.path))
                if self.queue:
                    path = self.queue.pop(0)
                    outcome = self.test_card(path)
                    if outcome is not None:
                        self._maybe_probe(outcome)
        return self.outcomes

    @staticmethod
    def _holds_system(path: str) -> bool:
        try:
            return get_device(path, whole_device=True).system
        except CardbenchError:
            return True

    def _hint(self, path: str):
        """What the watcher saw of the device (the identity rule's session evidence), or None."""
        return self._watcher.hint(path) if self._watcher is not None else None

    # -- one card -----------------------------------------------------------------------------
    def _settle(self, path: str):
        """Wait up to ``settle`` s for a mount; the device as then found (None if it went)."""
        deadline = time.monotonic() + self.opts.settle
        while True:
            try:
                dev = get_device(path, whole_device=True)
            except CardbenchError:
                return None
            if not dev.medium_present:
                return None
            if dev.all_mountpoints() or time.monotonic() >= deadline:
                return dev
            time.sleep(0.25)

    def test_card(self, path: str) -> CardOutcome | None:
        """Identify, recall or ask, test, store and report one card; None when it is not one
        to test (gone before the test, the system disk)."""
        dev = self._settle(path)
        if dev is None:
            self._event(Gone(device=path))
            return None
        if dev.system:
            self._event(Ignored(device=path, why=f"it holds the running system ({dev.system_reason})"))
            return None
        probe, reader = Card(), Reader(name=self.opts.reader_name)
        identify(dev, probe, reader, hint=self._hint(path))
        card = self._recall(probe)
        outcome = CardOutcome(device=dev.path, recalled=card is not None)
        if card is None:
            card = probe
            if self.opts.ask is not None:
                card = self.opts.ask(probe, dev)
        # what the device says of the card is the device's, whatever was recalled or typed
        card.serial, card.model = probe.serial or card.serial, probe.model or card.model
        card.serial_source = probe.serial_source if probe.serial else card.serial_source
        card.sd, card.ata = probe.sd or card.sd, probe.ata or card.ata
        self.current = dev.path
        number = len(self.outcomes) + 1
        progress = _Prefixed(self.opts.progress, lambda: f"[card {number}, {len(self.outcomes)} done]")
        self._event(Testing(device=dev.path, card=card, recalled=outcome.recalled, number=number))

        def measure() -> list[Any]:
            try:
                mnt = next((m for m in dev.all_mountpoints() if os.access(m, os.W_OK)), None)
                if mnt is not None:
                    outcome.mode, outcome.mountpoint = "directory", mnt
                    self._run_directory(outcome, mnt, card, reader, progress)
                else:
                    self._run_device(outcome, dev, card, reader, progress)
            except (Interrupted, KeyboardInterrupt) as e:
                self.cut_short = dev.path
                self._take_partial(outcome, e)
                self._note_skipped(outcome)
                err = e if isinstance(e, Interrupted) else Interrupted("interrupted; cleanup has run")
                err.partial = outcome.items()     # stored by keep_measured, then the session ends
                raise err from None
            self._note_skipped(outcome)
            return outcome.items()

        try:
            keep_measured(measure, db=self.opts.db, save=self.opts.save,
                          tell=lambda kept: self._finish(outcome, kept.recorded))
        finally:
            self.current = None
        return outcome

    def _recall(self, probe: Card) -> Card | None:
        if not self.opts.save and not self.opts.db:
            return None
        try:
            with open_store(self.opts.db) as store:
                return recall(store.cards(), probe)
        except StoreError:
            return None

    def _run_directory(self, outcome: CardOutcome, mnt: str, card: Card, reader: Reader, progress) -> None:
        opts = RunOptions(runs=self.opts.runs, card=card, reader=reader, label=card.label, progress=progress,
                          extra_tests=list(PROFILES[self.opts.profile]))
        try:
            outcome.result = run_directory(DirTarget.open(mnt), opts)
        except CardbenchError as e:
            if isinstance(e, Interrupted):
                raise
            self._take_partial(outcome, e)

    def _run_device(self, outcome: CardOutcome, dev, card: Card, reader: Reader, progress) -> None:
        path = dev.path
        if not os.access(path, os.R_OK):
            outcome.skipped.append("raw_read, raw_access and verify: reading the raw device needs root "
                                   "(or mount the card where you can write)")
            return
        try:
            positions = raw_positions(path)
            outcome.result = run_device(open_device_target(path, whole_device=True), DeviceOptions(runs=self.opts.runs, positions=positions,
                                                            access_seconds=ACCESS_SECONDS, card=card,
                                                            reader=reader, label=card.label, progress=progress))
        except CardbenchError as e:
            if isinstance(e, Interrupted):
                raise
            self._take_partial(outcome, e)
            if outcome.result is None:
                outcome.result = self._damaged(dev, card, reader, e)
            return   # a card that failed its reads is not probed for capacity
        if not self.opts.verify:
            outcome.skipped.append("verify (off)")
            return
        if not os.access(path, os.W_OK) or os.geteuid() != 0:
            outcome.skipped.append("verify: writing (and restoring) blocks of the raw device needs root")
            return
        self._event(Verifying(device=path, budget_s=self.opts.verify_budget))
        try:
            outcome.verify = verify_device(open_device_target(path, whole_device=True), time_budget=self.opts.verify_budget, progress=progress)
        except CardbenchError as e:
            if isinstance(e, Interrupted):
                raise
            outcome.verify = getattr(e, "doc", None)
            outcome.error = outcome.error or e.message
        finally:
            self._same_identity(outcome)

    @staticmethod
    def _same_identity(outcome: CardOutcome) -> None:
        """The verify document names the card and reader as the run's result does (one card per
        drawer line: the session's evidence, such as a medium swapped in a reader, counts for both)."""
        if outcome.verify is not None and outcome.result is not None:
            outcome.verify["card"] = outcome.result.card.to_dict()
            outcome.verify["reader"] = outcome.result.reader.to_dict()

    def _damaged(self, dev, card: Card, reader: Reader, err: CardbenchError) -> Result:
        """A result for a card that could not be read at all: incomplete, with the error."""
        result = Result(target={"kind": "device", "path": dev.path, "size_bytes": dev.size,
                                "transport": dev.transport, "model": dev.model}, card=card, reader=reader)
        identify(dev, result.card, result.reader, result.target, hint=self._hint(dev.path))
        result.complete, result.error, result.finished_at = False, err.message, now_iso()
        return result

    @staticmethod
    def _take_partial(outcome: CardOutcome, e: BaseException) -> None:
        partial = getattr(e, "result", None)
        if partial is not None:
            outcome.result = partial
        doc = getattr(e, "doc", None)
        if doc is not None:
            outcome.verify = doc
        outcome.error = outcome.error or (e.message if isinstance(e, CardbenchError) else "interrupted")

    @staticmethod
    def _note_skipped(outcome: CardOutcome) -> None:
        """What was not run goes into the result's warnings (before it is stored)."""
        if outcome.result is not None:
            outcome.result.warnings.extend(f"not run: {s}" for s in outcome.skipped
                                           if f"not run: {s}" not in outcome.result.warnings)

    def _finish(self, outcome: CardOutcome, rec) -> None:
        """The card is measured and recorded (``rec``: None when nothing was stored): say so."""
        if rec is not None:
            outcome.saved = rec.stored
            problem = rec.problem()
            if problem is not None:
                self.not_stored.append(problem)
                self._event(SaveFailed(what=outcome.device, error=problem.message))
        self.outcomes.append(outcome)
        self._event(CardDone(outcome=outcome, count=len(self.outcomes)))

    # -- the reader ---------------------------------------------------------------------------
    def _maybe_probe(self, outcome: CardOutcome) -> None:
        """Two tested cards still in, behind one reader: read them at once, once per reader."""
        if not self.opts.probe_shared or outcome.mode != "device" or outcome.result is None:
            return
        name = os.path.basename(outcome.device)
        key = reader_key(name)
        if key is None or key in self._probed:
            return
        mates = []
        for o in self.outcomes:
            if o.mode != "device" or o.device in mates or reader_key(os.path.basename(o.device)) != key:
                continue
            try:
                if get_device(o.device, whole_device=True).medium_present:
                    mates.append(o.device)
            except CardbenchError:
                continue
        if len(mates) < 2:
            return
        self._probed.add(key)
        self._event(Probing(devices=tuple(mates)))
        try:
            finding = judge_shared(read_together(open_devices(mates)))
        except CardbenchError as e:
            self._event(ProbeFailed(devices=tuple(mates), error=e.message))
            return
        self.add_probe(finding, outcome.result.reader, {o.device: o.result.card for o in self.outcomes
                                                        if o.device in mates and o.result is not None})

    def add_probe(self, finding: dict[str, Any], reader: Reader, cards: dict[str, Card]) -> dict[str, Any]:
        """Keep a :func:`judge_shared` finding of this session: it joins the session's reader
        verdict and is stored as a ``cardbench.probe/1`` document (returned)."""
        finding["reader"] = reader.name or reader.identity()
        finding["reader_identity"] = reader.identity()
        doc = probe_document(finding, reader=reader, session_id=self.session_id, cards=cards)
        finding["probe_id"] = doc["id"]
        self.probes.append(finding)
        self.probe_docs.append(doc)
        self._save_record(doc, ", ".join(cards) or "probe")
        self._event(Probed(finding=finding))
        return doc

    def _save_record(self, doc: dict[str, Any], device: str | None) -> bool:
        """Store a probe or session document (the one save path); a failure is said, as a card's is."""
        if not self.opts.save:
            return False
        what = "the reader probe" if device is not None else "this drawer session"
        rec = keep_measured(lambda: doc, db=self.opts.db).recorded
        problem = rec.problem() if rec is not None else None
        if problem is not None:
            self.evidence_not_stored.append(problem)
            self._event(SaveFailed(what=what, error=problem.message))
        return rec is not None and rec.stored

    def session_document(self) -> dict[str, Any]:
        """This session as a ``cardbench.session/1`` document (:mod:`cardbench.evidence`)."""
        return session_document(self.outcomes, self.probe_docs, self.reader_verdict(), started_at=self.started_at,
                                session_id=self.session_id)

    def save_session(self) -> dict[str, Any] | None:
        """Store the session (once at least one card was tested), so its cards, their order, its
        probes and its reader verdict can be read again later; returns the document."""
        if not self.outcomes:
            return None
        doc = self.session_document()
        self._save_record(doc, None)
        return doc

    def results(self) -> list[Result]:
        return [o.result for o in self.outcomes if o.result is not None]

    def reader_verdict(self) -> list[dict[str, Any]]:
        """The readers of this session's cards, judged over everything stored of those readers
        (this session's results when nothing is stored), plus the shared-ceiling probes: this
        session's and those stored before of the same readers."""
        results = self.results()
        probes = list(self.probes)
        if self.opts.save:
            try:
                ids = {r.reader.identity() for r in results}
                with open_store(self.opts.db) as store:
                    results = [r for r in store.results() if r.reader.identity() in ids] or results
                    mine = {p.get("probe_id") for p in probes}
                    probes += probe_findings(d for d in store.probes()
                                             if probe_reader_identity(d) in ids and d.get("id") not in mine)
            except CardbenchError:
                pass
        return reader_ceilings(results, probes=probes)
