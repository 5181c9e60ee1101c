"""Fake capacity: wraparound and drop, checked by hand and by f3probe."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.units import MB, MiB
from emulate_helpers import dio_read, dio_write, needs_emulator

pytestmark = needs_emulator


def tag(text: str, n: int = 4096) -> bytes:
    return text.encode().ljust(n, b"\xa5")


def fake(mode: str, size: int = 16 * MiB, real: int = 4 * MiB) -> CardSpec:
    return CardSpec(size=size, write_rate=200 * MB, read_rate=200 * MB, real_size=real, fake_mode=mode,
                    name=f"fake-{mode}")


def test_wraparound_overwrites_earlier_data():
    with EmulatedCard(fake("wraparound")) as card:
        dev = card.device
        dio_write(dev, 8192, tag("low"))
        dio_write(dev, 4 * MiB + 8192, tag("high"))    # past M: lands on offset 8192
        assert dio_read(dev, 8192, 4096) == tag("high")
        assert dio_read(dev, 4 * MiB + 8192, 4096) == tag("high")
        assert dio_read(dev, 12 * MiB + 8192, 4096) == tag("high")  # every alias shows it
        # A write straddling M continues at offset 0.
        dio_write(dev, 4 * MiB - 4096, tag("A") + tag("B"))
        assert dio_read(dev, 4 * MiB - 4096, 4096) == tag("A")
        assert dio_read(dev, 0, 4096) == tag("B")
        st = card.status()
        assert st["counters"]["bytes_wrapped"] == 2 * 4096
        assert st["real_size"] == 4 * MiB


def test_drop_discards_writes_past_real_size():
    with EmulatedCard(fake("drop")) as card:
        dev = card.device
        dio_write(dev, 8192, tag("low"))
        dio_write(dev, 4 * MiB + 8192, tag("high"))
        assert dio_read(dev, 4 * MiB + 8192, 4096) == bytes(4096)  # reads back zeros
        assert dio_read(dev, 8192, 4096) == tag("low")              # kept data untouched
        dio_write(dev, 4 * MiB - 4096, tag("A") + tag("B"))
        assert dio_read(dev, 4 * MiB - 4096, 8192) == tag("A") + bytes(4096)
        assert card.status()["counters"]["bytes_dropped"] == 2 * 4096


def _f3probe(device: str) -> tuple[str, float]:
    proc = subprocess.run(["f3probe", "--destructive", "--time-ops", device], capture_output=True, text=True,
                          timeout=120)
    out = proc.stdout + proc.stderr
    m = re.search(r"\*Usable\* size:\s*([\d.]+)\s*(\w+)", out)
    assert m, out
    factor = {"Byte": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[m.group(2)]  # f3 prints binary units
    return out, float(m.group(1)) * factor


@pytest.mark.skipif(shutil.which("f3probe") is None, reason="needs f3probe (f3)")
@pytest.mark.parametrize("mode, size, real, kind", [
    # f3probe finds a wraparound when the kept size is at least half the advertised size (or
    # above its 1 GiB cache probe); smaller wraparounds alias inside its probe and it says "damaged".
    ("wraparound", 256 * MiB, 128 * MiB, "wraparound"),
    ("drop", 256 * MiB, 64 * MiB, "limbo"),
])
@pytest.mark.slow
def test_f3probe_sees_the_fake(mode, size, real, kind):
    with EmulatedCard(fake(mode, size, real)) as card, card.unpaced():
        out, usable = _f3probe(card.device)
        print(f"\nf3probe on {mode} {size // MiB} MiB keeping {real // MiB} MiB: usable {usable / MiB:.2f} MiB")
        assert f"counterfeit of type {kind}" in out, out
        assert usable == pytest.approx(real, rel=0.01)


@pytest.mark.skipif(shutil.which("f3probe") is None, reason="needs f3probe (f3)")
def test_f3probe_calls_a_genuine_card_genuine():
    spec = CardSpec(size=256 * MiB, write_rate=200 * MB, read_rate=200 * MB, name="genuine")
    with EmulatedCard(spec) as card, card.unpaced():
        out, usable = _f3probe(card.device)
        assert "is the real thing" in out, out
        assert usable == 256 * MiB
