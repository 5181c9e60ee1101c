"""Emulated cards for pull tests, and a pull driven from the test's side."""

from __future__ import annotations

import math
import os
import threading
import time

import pytest

from cardbench.emulate import CardSpec
from cardbench.pulltest import Layout
from cardbench.units import MB, MiB

ROOT = os.geteuid() == 0
needs_emulator = pytest.mark.skipif(not (ROOT and os.path.exists("/dev/fuse")), reason="needs root and /dev/fuse")

#: an unusual size, so that the search for the card among block devices of its size meets no
#: other test's emulated card (those are 16/32/64 MiB)
SIZE = 27 * MiB
#: fast enough that the setup (every slot written once) does not wait for a slow drain
FAST_DRAIN = 200 * MB


def spec(flush: str = "honest", *, cache: int = 512 * 1024, name: str = "card0", **kw) -> CardSpec:
    return CardSpec(size=SIZE, write_rate=40 * MB, read_rate=80 * MB, volatile_bytes=cache, drain_rate=FAST_DRAIN,
                    flush=flush, name=name, **kw)


def layout(small: int = 64, large: int = 2, old: int = 64 * 1024) -> Layout:
    return Layout(SIZE, old, small, large)


class Puller:
    """Drives an emulated card through pulls: at each cycle's start the slow drain is set; the
    pull happens ``after`` s later, or once the cache holds ``when_held`` bytes (and ``then`` s
    more: a cache full for longer than it takes to empty holds only writes that waited); the card comes
    back ``back_after`` s after the pull (``back=False``: never)."""

    def __init__(self, card, *, drain: float, after: float = 0.3, when_held: int | None = None,
                 then: float = 0.0, back_after: float = 0.2, back: bool = True, read_only: bool = False) -> None:
        self.card = card
        self.drain = drain
        self.after = after
        self.when_held = when_held
        self.then = then
        self.back_after = back_after
        self.back = back
        self.read_only = read_only
        self.pulls: list[dict] = []
        self.errors: list[BaseException] = []

    def events(self, name: str, details: dict) -> None:
        if name == "cycle":
            self.card.set(drain_rate=self.drain)
            threading.Thread(target=self._pull_later, daemon=True).start()
        elif name == "verified":
            self.card.set(drain_rate=FAST_DRAIN)

    def _pull_later(self) -> None:
        try:
            time.sleep(self.after)
            if self.when_held is not None:
                deadline = time.monotonic() + 30
                while self.card.status()["volatile_held"] < self.when_held and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(self.then)
            self.pulls.append(self.card.pull())
            if self.back:
                time.sleep(self.back_after)
                self.card.reinsert(read_only=self.read_only)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)


def records_lost(status: dict) -> int:
    """4 KiB records the emulator's pull lost (whole or in part)."""
    return math.ceil(status["lost_now"] / 4096)
