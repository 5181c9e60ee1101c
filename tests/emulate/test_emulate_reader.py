"""Cards behind one reader share its ceiling."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from cardbench.emulate import CardSpec, EmulatedReader
from cardbench.units import MB, MiB
from emulate_helpers import needs_emulator

pytestmark = [needs_emulator, pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio"), pytest.mark.timing]


def fio_parallel(devices: list[str], seconds: float) -> list[float]:
    """Sequential O_DIRECT reads on all devices at once for ``seconds``; bytes/s per device."""
    args = ["fio", "--direct=1", "--bs=1M", "--ioengine=psync", "--rw=read", "--time_based",
            f"--runtime={seconds}", "--output-format=json"]
    for i, dev in enumerate(devices):
        args += [f"--name=j{i}", f"--filename={dev}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    jobs = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"]
    return [j["read"]["bw_bytes"] for j in jobs]


@pytest.mark.slow
def test_two_cards_share_the_reader_ceiling():
    ceiling = 20 * MB
    with EmulatedReader(ceiling=ceiling) as reader:
        a = reader.add_card(CardSpec(size=128 * MiB, write_rate=15 * MB, read_rate=15 * MB, name="a"))
        b = reader.add_card(CardSpec(size=128 * MiB, write_rate=15 * MB, read_rate=15 * MB, name="b"))
        alone = fio_parallel([a.device], 1.5)[0]
        both = fio_parallel([a.device, b.device], 3)
        print(f"\nceiling 20 MB/s: one card {alone / MB:.3f} MB/s, two cards {both[0] / MB:.3f} + "
              f"{both[1] / MB:.3f} = {sum(both) / MB:.3f} MB/s")
        assert alone == pytest.approx(15 * MB, rel=0.02)       # below the ceiling: the card's rate
        assert sum(both) == pytest.approx(ceiling, rel=0.03)   # together: the ceiling
        assert both[0] == pytest.approx(both[1], rel=0.15)     # shared fairly
        reader.set_ceiling(None)                               # live: no ceiling any more
        assert reader.status()["ceiling"] is None
        both = fio_parallel([a.device, b.device], 1.5)
        assert sum(both) == pytest.approx(30 * MB, rel=0.03)
