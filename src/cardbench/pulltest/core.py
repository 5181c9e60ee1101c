"""The pull test itself: set up the card, write records until it is pulled, find it again by its
UUID, read everything back and judge each record (:func:`run_pulltest`, :func:`resume_pulltest`).

Every byte of the card moves through :class:`cardbench.engine.data.DataFile` (O_DIRECT, aligned
buffers); a record is made durable the way the kernel offers it: ``pwritev`` then ``fdatasync``
(a flush to the card where the kernel believes it has a write cache, ``queue/write_cache``).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cardbench.devices import BlockDevice, refind
from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile
from cardbench.engine.errors import IO_ERRORS, fault_errno, shown
from cardbench.errors import (
    DeviceFault,
    Interrupted,
    SafetyRefusal,
    TargetError,
    UsageError,
)
from cardbench.pulltest.doc import build_doc, pull_result
from cardbench.pulltest.hostlog import HostLog, Rec, State, log_dir, read_log
from cardbench.pulltest.layout import (
    BLOCK,
    LARGE,
    SMALL,
    Layout,
    make_label,
    make_record,
    read_block,
    read_label,
)
from cardbench.target import GONE_WAIT, DeviceTarget, Target, open_target

MIXES = ("both", "small", "large")
#: one record in this many is large (1 MiB, sequential) when ``mix="both"``
LARGE_EVERY = 8
#: how often the wait for the card looks at the block devices
POLL = 0.2


@dataclass
class PullOptions:
    """What a pull test does.

    cycles      pulls to make (write, pull, find, verify), each a unit kept in the log.
    after       seconds of writing after which the card is pulled: ``cut`` is called, or the person
                is asked then; None: the person is asked at once (``prompt``) or nobody is, and the
                test writes until the card goes away.
    prompt      False (``--no-prompt``): ask nothing; write until the card goes away.
    timeout     the longest to write waiting for the pull, and to wait for the card to come back.
    mix         "both" (small scattered, every 8th a large sequential one), "small" or "large".
    cut         called (in a thread) ``after`` seconds into each cycle to cut the power: a
                :class:`PowerSwitch` (uhubctl) or, in tests, an emulator's pull; an exception it
                raises ends the test (one line).
    restore     called once the card is seen gone, to give it its power back (PowerSwitch.restore).
    layout      where the records go (default :meth:`Layout.for_size`).
    log_dir     where the host's log goes (default the user state dir).
    say         where lines for the person go (the CLI's stderr).
    events      called with (event, details) as the test goes: "setup" (done), "cycle" (writing
                starts), "pulled", "back", "verified" (progress for a CLI or a station; tests use it
                to drive an emulated card).
    """

    cycles: int = 1
    after: float | None = None
    prompt: bool = True
    timeout: float = 600.0
    mix: str = "both"
    cut: Callable[[], None] | None = None
    restore: Callable[[], None] | None = None
    layout: Layout | None = None
    log_dir: str | os.PathLike | None = None
    say: Callable[[str], None] | None = None
    events: Callable[[str, dict[str, Any]], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if self.cycles < 1:
            raise UsageError(f"--cycles must be 1 or more, got {self.cycles}")
        if self.mix not in MIXES:
            raise UsageError(f"mix must be one of {', '.join(MIXES)}, got {self.mix!r}")
        if self.after is not None and self.after < 0:
            raise UsageError(f"--after must be 0 s or more, got {self.after}")
        if self.timeout <= 0:
            raise UsageError(f"--timeout must be more than 0 s, got {self.timeout}")
        if self.cut is not None and self.after is None:
            self.after = 5.0


def kernel_facts(dev: BlockDevice | None, path: str) -> dict[str, Any]:
    """What the kernel believes about the card's cache: ``queue/write_cache`` ("write back": a
    flush is sent; "write through": none is), ``queue/fua``, and for a SCSI disk (a USB stick or
    reader) its ``cache_type`` (usb-storage's "Assuming drive cache: write through" when the
    device has no caching mode page: then no SYNCHRONIZE CACHE ever reaches it)."""
    name = os.path.basename(dev.path if dev is not None else os.path.realpath(path))
    base = f"/sys/block/{name}"

    def read(p: str) -> str | None:
        try:
            with open(p) as f:
                return f.read().strip()
        except OSError:
            return None

    cache_type = None
    scsi = f"{base}/device/scsi_disk"
    try:
        for entry in os.listdir(scsi):
            cache_type = read(f"{scsi}/{entry}/cache_type")
    except OSError:
        pass
    write_cache = read(f"{base}/queue/write_cache")
    fua = read(f"{base}/queue/fua")
    return {"write_cache": write_cache, "fua": None if fua is None else fua == "1", "cache_type": cache_type,
            "flush_sent": None if write_cache is None else write_cache == "write back"}


class PowerSwitch:
    """A USB hub port whose power uhubctl switches (``HUB:PORT``, e.g. ``1-1:2``): :meth:`cut`
    (``uhubctl -l HUB -p PORT -a off``) and :meth:`restore` (``-a on``). A refusal (no such hub,
    a hub without per-port power switching) is one line (UsageError)."""

    def __init__(self, hub_port: str) -> None:
        hub, sep, port = hub_port.rpartition(":")
        if not sep or not hub or not port.isdigit():
            raise UsageError(f"--power-cut needs HUB:PORT (a uhubctl location and port, e.g. 1-1:2), "
                             f"got {hub_port!r}")
        exe = shutil.which("uhubctl")
        if exe is None:
            raise UsageError("--power-cut needs uhubctl (e.g. apt install uhubctl)")
        self.exe, self.hub, self.port = exe, hub, port

    def _switch(self, action: str) -> None:
        try:
            proc = subprocess.run([self.exe, "-l", self.hub, "-p", self.port, "-a", action], check=False,
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise UsageError(f"uhubctl could not switch {action} port {self.port} of hub {self.hub}: {e}") from None
        if proc.returncode != 0:
            why = next((ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()),
                       f"exit {proc.returncode}")
            raise UsageError(f"uhubctl could not switch {action} port {self.port} of hub {self.hub}: {why}")

    def cut(self) -> None:
        self._switch("off")

    def restore(self) -> None:
        self._switch("on")


def _open(path: str, *, write: bool) -> DataFile:
    return DataFile.open(path, write=write, direct=True)


class PullTest:
    """One pull test (see the module); made by :func:`run_pulltest` / :func:`resume_pulltest`."""

    def __init__(self, target: DeviceTarget, opts: PullOptions, log: HostLog, state: State) -> None:
        self.target = target
        self.opts = opts
        self.log = log
        self.state = state
        self.uuid = bytes.fromhex(state.start["uuid"])
        self.layout = Layout(**state.start["layout"])
        self.say = opts.say or (lambda line: None)
        self.event = opts.events or (lambda name, details: None)
        self._perm: tuple[int, list[int]] | None = None
        self._cut_error: BaseException | None = None
        self.read_only = False

    # -- writing ------------------------------------------------------------------------------
    def _next_slot(self) -> tuple[str, int, int]:
        """(kind, address, length) of the next record of the cycle."""
        st = self.state
        mix = self.state.start.get("mix", "both")
        large = mix == "large" or (mix == "both" and (st.small_count + st.large_count) % LARGE_EVERY
                                   == LARGE_EVERY - 1)
        if large:
            return "large", self.layout.large_addr(st.large_count % self.layout.large_slots), LARGE
        slots = self.layout.small_slots
        rnd, pos = divmod(st.small_count, slots)
        if self._perm is None or self._perm[0] != rnd:
            order = list(range(slots))
            random.Random(f"{self.state.start['uuid']}:{rnd}").shuffle(order)
            self._perm = (rnd, order)
        return "small", self.layout.small_addr(self._perm[1][pos]), SMALL

    def _log_rec(self, kind: str, addr: int, length: int, gen: int, *, sync: bool = True) -> Rec:
        rec = Rec(self.state.next_number, gen, addr, length, kind, time.time())
        self.log.add({"e": "rec", "n": rec.n, "gen": gen, "addr": addr, "len": length, "kind": kind,
                      "t": rec.submitted}, sync=sync)
        self.state.add_rec(rec)
        return rec

    def _ack(self, recs: list[Rec], *, sync: bool = False) -> None:
        now = time.time()
        for rec in recs:
            rec.acked = now
            self.log.add({"e": "ack", "n": rec.n, "t": now}, sync=False)
        if sync:
            self.log.sync()

    def setup(self) -> None:
        """Label, old region, every slot filled once (generation 0): written, flushed, read back."""
        lay = self.layout
        buf = aligned_buffer(LARGE)
        try:
            with _open(self.target.path, write=True) as f:
                label = memoryview(buf)[:BLOCK]
                make_label(label, self.uuid, {"layout": lay.to_json(), "tool": "cardbench pulltest"})
                f.write_exact(label, 0)
                recs: list[Rec] = []
                # the old region and the small slots, in 1 MiB writes of 4 KiB records
                addrs = lay.old_addrs() + [lay.small_addr(i) for i in range(lay.small_slots)]
                kinds = ["old"] * len(lay.old_addrs()) + ["fill"] * lay.small_slots
                i = 0
                while i < len(addrs):
                    j = i
                    while j < len(addrs) and addrs[j] - addrs[i] < LARGE and addrs[j] == addrs[i] + (j - i) * BLOCK:
                        rec = self._log_rec(kinds[j], addrs[j], SMALL, 0, sync=False)
                        make_record(memoryview(buf)[(j - i) * BLOCK:(j - i + 1) * BLOCK], self.uuid, rec.n, 0,
                                    addrs[j])
                        recs.append(rec)
                        j += 1
                    f.write_exact(memoryview(buf)[:(j - i) * BLOCK], addrs[i])
                    i = j
                for slot in range(lay.large_slots):
                    rec = self._log_rec("fill", lay.large_addr(slot), LARGE, 0, sync=False)
                    make_record(buf, self.uuid, rec.n, 0, rec.addr)
                    f.write_exact(buf, rec.addr)
                    recs.append(rec)
                f.datasync()
            self._ack(recs, sync=True)
        finally:
            release(buf)
        with _open(self.target.path, write=False) as f:
            found = self.read_all(f)
            bad = [r for r in recs if found[r.addr] != [r.n] * (r.length // BLOCK)]
            if _label_uuid(f) != self.uuid.hex():
                bad.append(None)  # type: ignore[arg-type]
        if bad:
            raise DeviceFault(f"{shown(self.target.path)}: {len(bad)} records read back wrong right after they "
                              "were written and flushed (no pull yet): the card does not keep data at all; "
                              "check it with `cardbench verify`")
        self.event("setup", {"records": len(recs)})

    def write_until_gone(self, cycle: int) -> dict[str, Any]:
        """Write records (each logged, written, flushed, logged as acknowledged) until the card
        goes away; returns the pull entry (logged)."""
        timer = None
        self._cut_error = None
        if self.opts.after is not None:
            timer = threading.Timer(self.opts.after, self._pull_now)
            timer.daemon = True
        elif self.opts.prompt:
            self.say("Writing; pull the card out (or cut its power) now, while it writes.")
        self._repair(cycle)
        self.event("cycle", {"cycle": cycle})
        buf = aligned_buffer(LARGE)
        err: int | None = None
        started = time.monotonic()
        acked = 0
        try:
            f = _open(self.target.path, write=True)
        except IO_ERRORS as e:
            f, err = None, fault_errno(e)
        try:
            if timer is not None:
                timer.start()
            while f is not None:
                if self._cut_error is not None:
                    raise self._cut_error
                if time.monotonic() - started > self.opts.timeout:
                    raise TargetError(f"{shown(self.target.path)} was not pulled within {self.opts.timeout:g} s "
                                      f"({acked} writes acknowledged); the log is kept: {shown(str(self.log.path))}")
                kind, addr, length = self._next_slot()
                rec = self._log_rec(kind, addr, length, cycle)
                view = memoryview(buf)[:length]
                make_record(view, self.uuid, rec.n, cycle, addr)
                try:
                    f.write_exact(view, addr)
                    f.datasync()
                except IO_ERRORS as e:
                    err = fault_errno(e)
                    break
                self._ack([rec])
                acked += 1
        except KeyboardInterrupt:
            self.log.sync()
            raise Interrupted(f"interrupted while writing (cycle {cycle}, {acked} writes acknowledged); the log "
                              f"is kept ({shown(str(self.log.path))}): `cardbench pulltest DEVICE --resume` "
                              "verifies what the card kept") from None
        finally:
            if timer is not None:
                timer.cancel()
            if f is not None:
                f.close()
            release(buf)
        pulled = time.time()
        entry = {"e": "pull", "cycle": cycle, "t": pulled, "error": os.strerror(err) if err else None,
                 "acknowledged": acked}
        self.log.add(entry)
        self.state.apply(entry)
        self.event("pulled", {"cycle": cycle, "acknowledged": acked})
        if not self.target.gone(err, wait=GONE_WAIT):
            # still listed: it failed without going away, or was back (same name) before we looked;
            # either way what it kept is judged once it answers with its UUID
            self.say(f"{shown(self.target.path)}: a write failed ({os.strerror(err or errno.EIO)}) and the device "
                     "is still there (back already, or failing): judging what it kept.")
        if self.opts.restore is not None:
            self.opts.restore()
        if acked == 0:
            self.say("The card went away before the first write of this cycle was acknowledged: "
                     "nothing written in this cycle can be judged (old data still is).")
        return entry

    def _pull_now(self) -> None:
        """``after`` seconds into a cycle: cut the power (``cut``) or ask the person to pull."""
        if self.opts.cut is None:
            self.say("Pull the card out now.")
            return
        try:
            self.opts.cut()
        except BaseException as e:  # noqa: BLE001 - raised in the writing thread
            self._cut_error = e

    def _repair(self, cycle: int) -> None:
        """Rewrite the slots the last verify found not intact (fresh records of this cycle, flushed)."""
        last = self.state.verified.get(cycle - 1)
        addrs = (last or {}).get("repair") or []
        if not addrs:
            return
        buf = aligned_buffer(LARGE)
        try:
            with _open(self.target.path, write=True) as f:
                recs = []
                for addr in addrs:
                    length = LARGE if addr >= self.layout.large_start else SMALL
                    rec = self._log_rec("repair", addr, length, cycle, sync=False)
                    view = memoryview(buf)[:length]
                    make_record(view, self.uuid, rec.n, cycle, addr)
                    f.write_exact(view, addr)
                    recs.append(rec)
                self.log.sync()
                f.datasync()
                self._ack(recs, sync=True)
        finally:
            release(buf)

    # -- finding the card again ------------------------------------------------------------------
    def _identify(self, path: str) -> str | None:
        """The pull test UUID on the device at ``path`` (None: no label)."""
        with _open(path, write=False) as f:
            return _label_uuid(f)

    def wait_for_card(self) -> DeviceTarget:
        """Wait (up to ``timeout``) for the card to come back on any device name; find it by the
        UUID on it (:func:`cardbench.devices.refind.wait_for_card`). A card that appears with
        another UUID (or none) is refused."""
        me = self.uuid.hex()

        def refused(path: str, found: str | None) -> None:
            other = f"pull test card {found[:8]}" if found else "no pull test label"
            raise SafetyRefusal(f"{path} came back, but it is not the card that was pulled ({other}, not "
                                f"{me[:8]}): refused, nothing written; put back card {me[:8]} and run "
                                "`cardbench pulltest DEVICE --resume`")

        self.say("Put the card back in (any slot or reader).")
        try:
            path = refind.wait_for_card(self.layout.size, self._identify, me, timeout=self.opts.timeout,
                                        refused=refused, poll=POLL)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted while waiting for the card; the log is kept "
                              f"({shown(str(self.log.path))}): `cardbench pulltest DEVICE --resume` verifies it "
                              "when it is back") from None
        if path is None:
            raise TargetError(f"the card did not come back within {self.opts.timeout:g} s; the log is kept "
                              f"({shown(str(self.log.path))}): `cardbench pulltest DEVICE --resume` "
                              "verifies it when it is back")
        self.event("back", {"device": path})
        return self._reopen(path)

    def _reopen(self, path: str) -> DeviceTarget:
        target = open_target(path, kinds=("device",))
        assert isinstance(target, DeviceTarget)
        self.target = target
        dev = target.block_device()
        self.read_only = bool(dev is not None and dev.read_only)
        return target

    # -- verifying -------------------------------------------------------------------------------
    def _read_slot(self, f: DataFile, addr: int, length: int, buf=None) -> list[int | None]:
        own = buf is None
        buf = aligned_buffer(length) if own else buf
        try:
            view = memoryview(buf)[:length]
            f.read_exact(view, addr)
            return [read_block(view[i:i + BLOCK], self.uuid, addr, i // BLOCK) for i in range(0, length, BLOCK)]
        finally:
            if own:
                release(buf)

    def read_all(self, f: DataFile) -> dict[int, list[int | None]]:
        """What every slot holds (address -> record number per 4 KiB block, None where not
        intact): the old region and the small area in 1 MiB reads, each large slot in one."""
        lay = self.layout
        found: dict[int, list[int | None]] = {}
        buf = aligned_buffer(LARGE)
        try:
            view = memoryview(buf)
            pos, end = lay.old_start, lay.small_start + lay.small_slots * SMALL
            while pos < end:
                n = min(LARGE, end - pos)
                f.read_exact(view[:n], pos)
                for i in range(0, n, BLOCK):
                    found[pos + i] = [read_block(view[i:i + BLOCK], self.uuid, pos + i, 0)]
                pos += n
            for slot in range(lay.large_slots):
                addr = lay.large_addr(slot)
                found[addr] = self._read_slot(f, addr, LARGE, buf)
        finally:
            release(buf)
        return found

    def verify(self, cycle: int) -> dict[str, Any]:
        """Read every slot back and judge the records (see :func:`cardbench.pulltest.doc.pull_result`)."""
        pull = next(p for p in self.state.pulls if p["cycle"] == cycle)
        with _open(self.target.path, write=False) as f:
            if _label_uuid(f) != self.uuid.hex():
                raise SafetyRefusal(f"{shown(self.target.path)} is not the card of this pull test; refused")
            found = self.read_all(f)
        result, repair = pull_result(self.state, cycle, pull["t"], found)
        entry = {"e": "verified", "cycle": cycle, "result": result, "repair": repair, "t": time.time()}
        self.log.add(entry)
        self.state.apply(entry)
        self.event("verified", {"cycle": cycle, "result": result})
        return result

    # -- the whole test --------------------------------------------------------------------------
    def cycles(self, total: int) -> None:
        while len(self.state.verified) < total:
            cycle = self.state.cycle
            if cycle in self.state.verified:
                break
            if len(self.state.pulls) < cycle:
                self.write_until_gone(cycle)
            self.wait_for_card()
            self.verify(cycle)
            if self.read_only:
                raise _ReadOnly(f"{shown(self.target.path)} came back read-only: what it kept was verified "
                                f"(pull {cycle}), but no more cycles can be written")

    def document(self, error: str | None = None) -> dict[str, Any]:
        return build_doc(self.state, self.target, error=error)


class _ReadOnly(TargetError):
    """The card came back read-only (verified, not written again)."""


def _label_uuid(f: DataFile) -> str | None:
    buf = aligned_buffer(BLOCK)
    try:
        f.read_exact(buf, 0)
        label = read_label(buf)
    except IO_ERRORS:
        return None
    finally:
        release(buf)
    return label[0] if label else None


def run_pulltest(target: Target, opts: PullOptions) -> dict[str, Any]:
    """A pull test of ``target`` (a whole block device, destroyed; the caller confirmed it):
    returns the ``cardbench.pulltest/1`` document (``complete`` False and ``error`` set when it
    stopped early after at least the setup; errors before that are raised)."""
    if not isinstance(target, DeviceTarget):
        raise UsageError(f"{shown(target.path)}: a pull test needs a whole block device")
    opts.validate()
    layout = opts.layout or Layout.for_size(target.size())
    why = layout.check()
    if why:
        raise TargetError(f"{shown(target.path)}: {why}")
    card_id = uuidlib.uuid4().hex
    dev = target.block_device()
    log = HostLog(Path(opts.log_dir or log_dir()) / f"{card_id}.log")
    start = {"e": "start", "uuid": card_id, "layout": layout.to_json(), "cycles": opts.cycles, "mix": opts.mix,
             "device": target.path, "kernel": kernel_facts(dev, target.path), "t": time.time(),
             "options": {"after": opts.after, "prompt": opts.prompt, "timeout": opts.timeout, **opts.extra}}
    log.add(start)
    test = PullTest(target, opts, log, State(start))
    try:
        test.setup()
        return _finish(test, opts.cycles)
    finally:
        log.close()


def resume_pulltest(target: Target, opts: PullOptions, *, cycles: int | None = None) -> dict[str, Any]:
    """Go on with the pull test whose card is ``target`` (found by the UUID on it, its log read
    from the host): verify a pull not verified yet, then the cycles left."""
    if not isinstance(target, DeviceTarget):
        raise UsageError(f"{shown(target.path)}: a pull test needs a whole block device")
    opts.validate()
    try:
        with _open(target.path, write=False) as f:
            card_id = _label_uuid(f)
    except IO_ERRORS as e:
        raise TargetError(f"{shown(target.path)}: cannot read it ({e})") from None
    if card_id is None:
        raise UsageError(f"{shown(target.path)} holds no pull test (no label): nothing to resume")
    path = Path(opts.log_dir or log_dir()) / f"{card_id}.log"
    if not path.exists():
        raise UsageError(f"{shown(target.path)} holds pull test {card_id[:8]}, but its log is not on this host "
                         f"({shown(str(path))})")
    state = State.replay(read_log(path))
    log = HostLog(path)
    test = PullTest(target, opts, log, state)
    test._reopen(target.path)
    try:
        last = state.cycle - 1
        written_after = any(r.gen == state.cycle for r in state.records.values())
        if written_after and len(state.pulls) < state.cycle:
            # killed while writing: the pull is when the log stops
            t = max(r.acked or r.submitted for r in state.records.values())
            entry = {"e": "pull", "cycle": state.cycle, "t": t, "error": "the test stopped (log ends here)",
                     "acknowledged": sum(1 for r in state.records.values() if r.gen == state.cycle and r.acked)}
            log.add(entry)
            state.apply(entry)
            last = state.cycle - 1
        if last >= 1 and last not in state.verified:
            test.verify(last)
        return _finish(test, cycles or int(state.start.get("cycles") or 1), resumed=True)
    finally:
        log.close()


def _finish(test: PullTest, total: int, *, resumed: bool = False) -> dict[str, Any]:
    try:
        if test.read_only:
            raise _ReadOnly(f"{shown(test.target.path)} is read-only: what it kept was verified, but no more "
                            "cycles can be written")
        test.cycles(total)
    except _ReadOnly as e:
        return test.document(error=e.message)
    test.log.add({"e": "end", "t": time.time()})
    return test.document()
