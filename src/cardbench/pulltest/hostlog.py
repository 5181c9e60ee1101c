"""The host's log of a pull test: append-only JSON lines, fsync'd on the host's own disk
(``platformdirs.user_state_dir("cardbench")/pulltest/<uuid>.log``), and the state rebuilt from it.

Lines (``e`` is the event; times ``t`` are wall-clock seconds, ``time.time()``)::

    {"e": "start", "uuid", "layout", "cycles", "mix", "device", "kernel", "card", "reader", "t"}
    {"e": "rec", "n", "gen", "addr", "len", "kind", "t"}       before the write is submitted
    {"e": "ack", "n", "t"}                                     after write + fdatasync returned
    {"e": "pull", "cycle", "t", "error"}                       the card went away
    {"e": "verified", "cycle", "result", "repair", "t"}        the card came back and was read
    {"e": "end", "t"}

A ``rec`` line is on the host's disk before its write is submitted (one fsync per record; the
``ack`` goes with the next fsync). A partly written last line (the host's disk filled, a crash)
is skipped when read. The log is the whole state of a test: ``--resume`` replays it.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from cardbench.engine.errors import shown
from cardbench.errors import CardbenchError

#: the errnos of a full host disk
_FULL = (errno.ENOSPC, errno.EDQUOT)


class HostLogError(CardbenchError):
    """The host could not write its log (its disk is full, or it failed): nothing more is written
    to the card, since a write the log does not hold could not be judged."""


def log_dir() -> Path:
    return Path(platformdirs.user_state_dir("cardbench")) / "pulltest"


class HostLog:
    """Append to ``path`` (created 0600); :meth:`add` writes one line, fsync'd unless ``sync=False``."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise self._error(e) from None

    def _error(self, e: OSError) -> HostLogError:
        if e.errno in _FULL:
            return HostLogError(f"the host's disk is full: cannot add to the pull test log {shown(str(self.path))}; "
                                "stopped writing to the card (the log so far is kept)")
        return HostLogError(f"cannot write the pull test log {shown(str(self.path))}: {e.strerror}; stopped "
                            "writing to the card (the log so far is kept)")

    def add(self, entry: dict[str, Any], *, sync: bool = True) -> None:
        data = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        try:
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
            if sync:
                os.fsync(self.fd)
        except OSError as e:
            raise self._error(e) from None

    def sync(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError as e:
            raise self._error(e) from None

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


def read_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The entries of a log; lines that do not parse (a torn last line) are skipped."""
    out = []
    with open(path, "rb") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and "e" in entry:
                out.append(entry)
    return out


@dataclass
class Rec:
    """One record as the host logged it."""

    n: int
    gen: int
    addr: int
    length: int
    kind: str
    submitted: float
    acked: float | None = None


@dataclass
class State:
    """A pull test as its log tells it."""

    start: dict[str, Any]
    records: dict[int, Rec] = field(default_factory=dict)
    slots: dict[int, list[int]] = field(default_factory=dict)   # address -> record numbers, in order
    pulls: list[dict[str, Any]] = field(default_factory=list)
    verified: dict[int, dict[str, Any]] = field(default_factory=dict)
    ended: bool = False
    small_count: int = 0
    large_count: int = 0

    @property
    def next_number(self) -> int:
        return max(self.records, default=0) + 1

    @property
    def cycle(self) -> int:
        """The cycle being written now (1 after the setup)."""
        return len(self.pulls) + 1

    def add_rec(self, rec: Rec) -> None:
        self.records[rec.n] = rec
        self.slots.setdefault(rec.addr, []).append(rec.n)
        if rec.kind == "small":
            self.small_count += 1
        elif rec.kind == "large":
            self.large_count += 1

    def apply(self, entry: dict[str, Any]) -> None:
        e = entry["e"]
        if e == "rec":
            self.add_rec(Rec(entry["n"], entry["gen"], entry["addr"], entry["len"], entry["kind"], entry["t"]))
        elif e == "ack":
            rec = self.records.get(entry["n"])
            if rec is not None:
                rec.acked = entry["t"]
        elif e == "pull":
            self.pulls.append(entry)
        elif e == "verified":
            self.verified[entry["cycle"]] = entry
        elif e == "end":
            self.ended = True

    @classmethod
    def replay(cls, entries: list[dict[str, Any]]) -> State:
        if not entries or entries[0].get("e") != "start":
            raise CardbenchError("the pull test log does not begin with its start line")
        state = cls(entries[0])
        for entry in entries[1:]:
            state.apply(entry)
        return state
