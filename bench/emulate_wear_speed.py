#!/usr/bin/env python3
"""What the wear model of emulated cards costs: whole-card passes per second with and without it.

An endurance test is proved on small unpaced emulated cards running dozens of whole-card write +
read passes in seconds, so the wear bookkeeping (cardbench.emulate.wear: numpy slices per
request) must not slow the card down. Measured here:

* passes per second (write the whole card, then read it all back, 1 MiB O_DIRECT requests
  through cardbench.engine.data.DataFile) on a 32 MiB unpaced card: no wear; wear with no block
  worn yet; wear with every block worn (stale: every request is split block by block). The
  cards take turns, ROUNDS rounds of PASSES passes each, and the median is printed (the machine
  is shared);
* the model alone, in this process: microseconds per 1 MiB write and read, no block worn and
  every block worn;
* the model's memory and build time for a 64 GiB card (64 KiB blocks: 1 Mi blocks).

Usage: sudo python3 bench/emulate_wear_speed.py [ROUNDS] [PASSES]   (default 5 rounds of 10)
"""

from __future__ import annotations

import mmap
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from cardbench.emulate import CardSpec, EmulatedReader  # noqa: E402
from cardbench.emulate.wear import WearModel  # noqa: E402
from cardbench.engine.data import DataFile  # noqa: E402
from cardbench.units import MB, MiB  # noqa: E402

SIZE = 32 * MiB
REQ = 1 * MiB
GiB = 1 << 30


def passes_per_second(device: str, passes: int) -> float:
    buf = mmap.mmap(-1, REQ)
    start = time.perf_counter()
    with DataFile.open(device, write=True) as f:
        for _ in range(passes):
            for off in range(0, SIZE, REQ):
                f.write_exact(buf, off)
            for off in range(0, SIZE, REQ):
                f.read_exact(buf, off)
    return passes / (time.perf_counter() - start)


def model_us(worn: bool, n: int = 20000) -> tuple[float, float]:
    model = WearModel(SIZE, 0, cycles=1 if worn else 10**9)
    if worn:
        for off in range(0, SIZE, REQ):
            model.write([(off, REQ)])
            model.write([(off, REQ)])
    t = time.perf_counter()
    for i in range(n):
        model.write([((i * REQ) % SIZE, REQ)])
    w = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    for i in range(n):
        model.read([((i * REQ) % SIZE, REQ)])
    return w, (time.perf_counter() - t) / n * 1e6


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    passes = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    kinds = {"no wear": {}, "wear, none worn": {"wear_cycles": 10**9}, "wear, all worn": {"wear_cycles": 1}}
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    with EmulatedReader() as reader:
        cards = {}
        for i, (kind, fields) in enumerate(kinds.items()):
            card = reader.add_card(CardSpec(size=SIZE, write_rate=1000 * MB, read_rate=1000 * MB,
                                            name=f"speed{i}", **fields))
            card.set(paced=False)
            cards[kind] = card
        passes_per_second(cards["wear, all worn"].device, 2)     # wear it out
        assert cards["wear, all worn"].wear()["worn"] == SIZE // (64 * 1024)
        for _ in range(rounds):
            for kind, card in cards.items():
                rates[kind].append(passes_per_second(card.device, passes))
        load = os.getloadavg()[0]
        requests = cards["no wear"].status()["counters"]["writes"]
    print(f"32 MiB unpaced card, 1 MiB O_DIRECT requests (DataFile), {rounds} rounds of {passes} passes, "
          f"load average {load:.1f}; FUSE write requests per 1 MiB written: "
          f"{requests / (rounds * passes * SIZE / REQ):.2f}")
    print(f"{'card':18} {'passes/s (write+read)':>22} {'min':>6} {'max':>6}")
    for kind, got in rates.items():
        print(f"{kind:18} {statistics.median(got):22.1f} {min(got):6.1f} {max(got):6.1f}")
    for worn in (False, True):
        w, r = model_us(worn)
        print(f"model alone, {'all worn' if worn else 'none worn'}: {w:.1f} us per 1 MiB write, {r:.1f} us per read")
    t = time.perf_counter()
    big = WearModel(64 * GiB, 0, cycles=3000, spread=0.3)
    built = time.perf_counter() - t
    nbytes = big.written.nbytes + big.limits.nbytes + big.limit_bytes.nbytes + big.worn.nbytes
    t = time.perf_counter()
    big.report()
    print(f"64 GiB card: {big.blocks} blocks, {nbytes / MiB:.1f} MiB of arrays, built in {built * 1e3:.0f} ms, "
          f"wear() report in {(time.perf_counter() - t) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
