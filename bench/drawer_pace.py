#!/usr/bin/env python3
"""How long `cardbench drawer` takes per card, on emulated cards from 1 to 100 MB/s.

For each rate, an emulated card (cardbench.emulate, read and write at that rate, SIZE bytes) is
tested the way the drawer tests an unmounted card, with the default options
(cardbench.drawer.DrawerSession.test_card: identify, read-only `run DEVICE` with 1 warm-up + 3
runs, the quick verify within its budget; nothing stored), and the wall time is printed with
what the time went to. The goal (issue 17): within a minute per card, even at 1 MB/s.
Usage: sudo python3 bench/drawer_pace.py [RATE_MB_S ...]   (default: 1 3 10 30 100)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from cardbench.drawer import DrawerOptions, DrawerSession  # noqa: E402
from cardbench.emulate import CardSpec, EmulatedCard  # noqa: E402
from cardbench.units import MB, MiB  # noqa: E402

SIZE = 256 * MiB


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("needs root (emulated cards)")
    rates = [float(a) for a in sys.argv[1:]] or [1, 3, 10, 30, 100]
    with tempfile.TemporaryDirectory(prefix="cardbench-pace-") as d:
        os.environ["CARDBENCH_EMULATE_TMPDIR"] = d
        for rate in rates:
            spec = CardSpec(size=SIZE, write_rate=rate * MB, read_rate=rate * MB, name="pace")
            with EmulatedCard(spec) as card:
                session = DrawerSession(DrawerOptions(settle=0.0, save=False))
                t = time.monotonic()
                outcome = session.test_card(card.device)
                wall = time.monotonic() - t
            r = outcome.result
            raw = r.test("raw_read") if r else None
            v = outcome.verify or {}
            vt = (v.get("timings") or {}).get("seconds")
            print(f"{rate:6g} MB/s: {wall:5.1f} s per card (raw_read {raw.median_bytes_per_s / MB:.3g} MB/s "
                  f"at {raw.method.get('positions')} positions; verify {v.get('verdict')} in "
                  f"{vt if vt is None else round(vt, 1)} s){'' if wall <= 60 else '  OVER A MINUTE'}")


if __name__ == "__main__":
    main()
