"""Helpers for the verify tests (a unique module name: pytest imports test helpers by basename)."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

import pytest

from cardbench.units import MB
from realparts import can_emulate, sha256_device  # noqa: F401

ROOT = os.geteuid() == 0


needs_emulator = pytest.mark.skipif(not can_emulate(), reason="needs root, FUSE and loop devices")

FAST = dict(write_rate=400 * MB, read_rate=800 * MB)


@contextmanager
def card(size: int, real: int | None = None, mode: str = "wraparound", **kw):
    from cardbench.emulate import CardSpec, EmulatedCard
    spec = CardSpec(size=size, real_size=real, fake_mode=mode, **{**FAST, **kw})
    with EmulatedCard(spec) as c:
        yield c


def scribble(dev: str, c, seed: int = 1) -> None:
    """Put recognisable data on a card (a fake partition table, some files' worth of noise)."""
    import random
    rng = random.Random(seed)
    with c.unpaced():
        fd = os.open(dev, os.O_WRONLY)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
            for off in [0, 1 << 20, size // 3, size // 2, size - (1 << 20)]:
                off = off // 4096 * 4096
                os.pwrite(fd, rng.randbytes(1 << 20 if off + (1 << 20) <= size else 4096), off)
            os.fsync(fd)
        finally:
            os.close(fd)


class Trigger:
    """A progress reporter that calls ``action`` once ``after`` bytes were reported."""

    def __init__(self, after: int, action):
        self.after = after
        self.action = action
        self.seen = 0
        self.fired = False

    @contextmanager
    def task(self, description, total):
        def advance(n):
            self.seen += n
            if not self.fired and self.seen >= self.after:
                self.fired = True
                self.action()
        yield advance


CLI = os.path.join(os.path.dirname(__file__), "verify_cli_entry.py")


def run_cli(*args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CARDBENCH_DEBUG", None)
    # the child runs the same cardbench as the tests: this checkout's src/ (not an installed one)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, CLI, *args], capture_output=True, text=True, input=input,
                          timeout=timeout, env=env)
