#!/usr/bin/env python3
"""`cardbench geometry` side by side with flashbench (Debian's `flashbench`, Arnd Bergmann's tool).

Same emulated cards (cardbench.emulate: real loop devices paced in userspace) with a set flash
geometry, each tool on the same card in turn: a page of 16 KiB (+150 us to read across it), an AU
(+300 us across it: flashbench README's figures), 20 MB/s, and a garbage collection of 20 ms
per AU opened past the open-AU count:

* AU 4 MiB, 2 open AUs, 2 FAT-tuned AUs;
* AU 12 MiB, 6 open AUs (not a power of two: flashbench tries only powers of two);
* no geometry at all.

Read side: `flashbench -a --blocksize=1024 -o FILE DEVICE` (its `diff` column per power-of-two
alignment; its reading, as its README explains it: where `diff` drops, taken here as the alignment
with the widest gap between the `diff`s at and above it and those below it) against `cardbench geometry DEVICE --json` (a library call).
With --write: `flashbench --open-au --open-au-nr=N --erasesize=AU` for N = open and open + 1
(its MB/s per chunk size: it collapses past the open count) against `geometry --write`; only
where flashbench can (its erase size divided by its block size must be a power of two).

Prints, per card: the truth, what each tool reads, and how long each took.
Note: flashbench writes its report through `-o` (without it, it opens fd 0 for writing and
fails with "Invalid argument" when stdin is not writable); its `-a` report goes to stdout.

Usage: sudo python3 bench/geometry_vs_flashbench.py [--write] [--size GB]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from cardbench.emulate import CardSpec, EmulatedCard  # noqa: E402
from cardbench.geometry import GeometryOptions, find_geometry  # noqa: E402
from cardbench.geometry.doc import size_text  # noqa: E402
from cardbench.target import open_device_target  # noqa: E402
from cardbench.units import MB  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
FLASH = dict(write_rate=20 * MB, read_rate=20 * MB, page_bytes=16 * KiB, au_cross=0.3e-3, page_cross=0.15e-3,
             gc_seconds=0.02)
CARDS = [
    ("AU 4 MiB, 2 open, 2 FAT", dict(au_bytes=4 * MiB, open_aus=2, fat_aus=2, **FLASH)),
    ("AU 12 MiB, 6 open", dict(au_bytes=12 * MiB, open_aus=6, **FLASH)),
    ("no geometry", dict(write_rate=20 * MB, read_rate=20 * MB)),
]
UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def seconds(text: str) -> float:
    m = re.match(r"(-?[\d.]+(?:e[+-]?\d+)?)(ns|µs|ms|s)$", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else float("nan")


def flashbench_align(device: str, out: str) -> tuple[list[tuple[int, float]], float]:
    t = time.monotonic()
    p = subprocess.run(["flashbench", "-a", "--blocksize=1024", "-o", out, device], capture_output=True,
                       text=True, timeout=1200)
    took = time.monotonic() - t
    if p.returncode:
        raise SystemExit(f"flashbench -a failed: {p.stderr.strip()}")
    rows = []
    for line in p.stdout.splitlines():
        m = re.match(r"align (\d+)\s+pre \S+\s+on \S+\s+post \S+\s+diff (\S+)", line)
        if m:
            rows.append((int(m.group(1)), seconds(m.group(2))))
    return rows, took


def flashbench_reading(rows: list[tuple[int, float]]) -> str:
    """Where `diff` drops (the README's reading): the alignment with the widest gap between the
    lowest `diff` at and above it and the highest below it; "no step" without a gap."""
    best = None
    for i in range(1, len(rows)):          # rows: largest alignment first
        above = [d for _, d in rows[:i]]
        below = [d for a, d in rows[i:] if a >= 16 * KiB]     # the page step below is another story
        if not below:
            break
        gap = min(above) - max(below)
        if best is None or gap > best[0]:
            best = (gap, rows[i - 1][0], min(above), max(below))
    if best is None or best[0] <= 0:
        return "no step"
    gap, align, low, high = best
    return f"step at {size_text(align)} (diff >= {low * 1e6:.0f} us above, <= {high * 1e6:.0f} us below)"


def flashbench_open_au(device: str, out: str, au: int, n: int) -> tuple[float, float]:
    """(MB/s at the smallest chunk, seconds) of `flashbench --open-au --open-au-nr=n`."""
    t = time.monotonic()
    p = subprocess.run(["flashbench", "--open-au", f"--open-au-nr={n}", f"--erasesize={au}", "--blocksize=65536",
                        "-o", out, device], capture_output=True, text=True, timeout=3600)
    took = time.monotonic() - t
    text = open(out).read() + p.stdout
    rates = [float(x) for x in re.findall(r"([\d.]+)M/s", text)]
    return (rates[-1] if rates else float("nan")), took


def main() -> None:
    write = "--write" in sys.argv
    size = 32 * 10**9
    if "--size" in sys.argv:
        size = int(float(sys.argv[sys.argv.index("--size") + 1]) * 10**9)
    size = size // 512 * 512
    print(f"cards of {size / 1e9:.0f} GB, 20 MB/s; page 16 KiB +150 us, AU +300 us, GC 20 ms "
          f"({'read and write' if write else 'read-only'})\n")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "flashbench.out")
        for i, (name, kw) in enumerate(CARDS):
            spec = CardSpec(size=size, name=f"card{i}", **kw)
            with EmulatedCard(spec) as card:
                t = time.monotonic()
                doc = find_geometry(open_device_target(card.device, whole_device=True), GeometryOptions(write=write, confirm=str(size) if write else None, seed=1))
                ours = time.monotonic() - t
                rows, theirs = flashbench_align(card.device, out)
                print(f"{name}:")
                print(f"  cardbench geometry{' --write' if write else ''}: {doc['message']}  [{ours:.1f} s; read pass "
                      f"{doc['method']['read_seconds']:.1f} s]")
                print(f"  flashbench -a:          {flashbench_reading(rows)}  [{theirs:.1f} s]")
                print("     diff per alignment: " + ", ".join(f"{size_text(a)} {d * 1e6:.0f}" for a, d in rows
                                                              if a <= 64 * MiB))
                au, n_open = kw.get("au_bytes"), kw.get("open_aus")
                if write and au and n_open and (au // 65536) & (au // 65536 - 1) == 0:
                    for n in (n_open, n_open + 1):
                        rate, took = flashbench_open_au(card.device, out, au, n)
                        print(f"  flashbench --open-au --open-au-nr={n}: {rate:.2f} MB/s at 64 KiB chunks  "
                              f"[{took:.1f} s]")
                elif write and au:
                    print(f"  flashbench --open-au: cannot run ({size_text(au)} / 64 KiB is not a power of two)")
                print()


if __name__ == "__main__":
    main()
