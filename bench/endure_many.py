#!/usr/bin/env python3
"""Threads or processes for many cards at once? Four emulated cards (real loop devices behind FUSE
servers) paced at RATE MB/s write and twice that read, `ROUNDS` rounds each, three ways:

- alone: one `cardbench endure DEV` at a time (each card's rate on its own);
- threads: one `cardbench endure DEV DEV DEV DEV` (cardbench.endure.many: a thread per card);
- processes: four `cardbench endure DEV` at once, one process per card.

Prints each way's per-card write and read rates (the median of the cards' last rounds) and the
wall time. Usage: sudo python3 bench/endure_many.py [RATE_MB_S] [ROUNDS]   (0: not paced)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from cardbench.emulate import CardSpec, EmulatedCard  # noqa: E402

SIZE = 16 << 20
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def endure(devices: list[str], rounds: int, home: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=SRC, XDG_DATA_HOME=home, XDG_STATE_HOME=home)
    return subprocess.Popen([sys.executable, "-m", "cardbench", "endure", *devices, "--rounds", str(rounds),
                             "--confirm", str(SIZE), "--json", "--no-save"], stdout=subprocess.PIPE, text=True,
                            env=env, stdin=subprocess.DEVNULL)


def docs_of(proc: subprocess.Popen) -> list[dict]:
    out, _ = proc.communicate()
    assert proc.returncode == 0, out
    doc = json.loads(out)
    return doc if isinstance(doc, list) else [doc]


def line(way: str, docs: list[dict], seconds: float) -> str:
    w = statistics.median(d["rounds"][-1]["write_bytes_per_s"] for d in docs) / 1e6
    r = statistics.median(d["rounds"][-1]["read_bytes_per_s"] for d in docs) / 1e6
    return f"{way:<10} write {w:7.1f} MB/s  read {r:7.1f} MB/s per card  ({len(docs)} cards, {seconds:.1f} s wall)"


def main() -> None:
    rate = float(sys.argv[1]) * 1e6 if len(sys.argv) > 1 and float(sys.argv[1]) > 0 else 10e9
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with ExitStack() as stack, tempfile.TemporaryDirectory() as home:
        cards = [stack.enter_context(EmulatedCard(CardSpec(size=SIZE, write_rate=rate, read_rate=2 * rate,
                                                           name=f"bench{i}"))) for i in range(4)]
        devs = [c.device for c in cards]
        t0 = time.monotonic()
        alone = [d for dev in devs for d in docs_of(endure([dev], rounds, home))]
        t1 = time.monotonic()
        threads = docs_of(endure(devs, rounds, home))
        t2 = time.monotonic()
        procs = [endure([dev], rounds, home) for dev in devs]
        processes = [d for p in procs for d in docs_of(p)]
        t3 = time.monotonic()
    print(f"four {SIZE >> 20} MiB cards, {'not paced' if rate >= 1e9 else f'{rate / 1e6:g}/{2 * rate / 1e6:g} MB/s'}"
          f", {rounds} rounds (load {os.getloadavg()[0]:.1f})")
    print(line("alone", alone, t1 - t0))
    print(line("threads", threads, t2 - t1))
    print(line("processes", processes, t3 - t2))


if __name__ == "__main__":
    main()
