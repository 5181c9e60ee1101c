"""The demo drawer: nine emulated CompactFlash cards like a classic 2006 survey done by hand
through one USB 2.0 reader, each tested with the standard `cardbench run`.

The survey's figures (write / read, MB/s) are the emulated cards' set rates, scaled up by
``SPEED_FACTOR`` so the demo is quick; each card gets ext4 and the standard test with
``FILE_BYTES`` files so the demo is quick (the survey used one 41.99 MB file, which `cardbench run`
takes on the 48 MB card too: each run needs one file's room).
Every figure set is printed beside every figure measured, and the results go to a demo
database, so `cardbench results --db <demo db>` and `cardbench readers` work on them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from cardbench.errors import EnvironmentMissing
from cardbench.progress import NullProgress, ProgressReporter
from cardbench.result import Card, Reader, Result
from cardbench.units import MB

SPEED_FACTOR = 3
FILE_BYTES = 6 * MB
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
        from .emulate.system import load_mfusepy
        load_mfusepy()
    except (ImportError, OSError, EnvironmentMissing):
        raise EnvironmentMissing("the demo needs libfuse3 (apt-get install fuse3); "
                                 "try `cardbench run DIRECTORY` instead") from None


def run_demo(*, cards: list[DemoCard] | None = None, factor: float = SPEED_FACTOR, file_bytes: int = FILE_BYTES,
             runs: int = RUNS, progress: ProgressReporter | None = None, on_result=None) -> list[tuple[DemoCard, Result]]:
    """Emulate the drawer behind one reader and run the standard test on every card.

    ``on_result(card, result)`` is called after each card (to store and print as it goes).
    """
    from cardbench.emulate import CardSpec, EmulatedReader
    from cardbench.runner import RunOptions, run_directory

    check_environment()
    cards = DRAWER if cards is None else cards
    out: list[tuple[DemoCard, Result]] = []
    with EmulatedReader(ceiling=None) as reader:
        for i, c in enumerate(cards):
            spec = CardSpec(size=c.capacity_bytes, write_rate=c.write_mb_s * MB * factor,
                            read_rate=c.read_mb_s * MB * factor, name=f"demo{i}")
            card = reader.add_card(spec)
            with card.filesystem("ext4") as mnt:
                opts = RunOptions(size=file_bytes, runs=runs, progress=progress or NullProgress(),
                                  card=Card(brand=c.brand, capacity_bytes=c.capacity_bytes, label=c.label),
                                  reader=Reader(name=READER_NAME, transport="usb"))
                result = run_directory(mnt, opts)
            result.source = "demo"
            result.target["emulated"] = {"write_bytes_per_s": spec.write_rate, "read_bytes_per_s": spec.read_rate,
                                         "speed_factor": factor}
            out.append((c, result))
            if on_result:
                on_result(c, result)
            reader.remove_card(card)
    return out
