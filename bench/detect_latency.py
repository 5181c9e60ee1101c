#!/usr/bin/env python3
"""How `cardbench drawer` should notice a card: kernel uevents over netlink, or sysfs polling.

For each method (cardbench.devices.watch.Watcher with method="netlink" and method="poll", 0.5 s
interval), ROUNDS times: attach a loop device to a sparse file (`losetup`: size 0 -> N, the
same "change" uevent a card pushed into a reader slot gives), and time from `losetup`
returning to the watcher reporting the change; then detach. Then CPU: the watcher waits IDLE
seconds with nothing happening, and the process's user+system CPU time over that wait is
printed as a share of one core.
Usage: sudo python3 bench/detect_latency.py [ROUNDS] [IDLE]
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from cardbench.devices.watch import Watcher  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(method: str, rounds: int, idle: float, directory: str) -> tuple[list[float], float]:
    img = os.path.join(directory, "card.img")
    with open(img, "wb") as f:
        f.truncate(8 << 20)
    lat: list[float] = []
    with Watcher(include_loop=True, loop_under=directory, method=method) as w:
        for _ in range(rounds):
            dev = subprocess.run(["losetup", "-f", "--show", img], check=True, capture_output=True,
                                 text=True).stdout.strip()
            t0 = time.monotonic()
            try:
                while True:
                    changes = w.wait(5.0)
                    if any(c.path == dev and c.inserted for c in changes):
                        lat.append(time.monotonic() - t0)
                        break
                    if not changes:
                        raise SystemExit(f"{method}: {dev} not noticed within 5 s")
            finally:
                subprocess.run(["losetup", "-d", dev], check=False)
            w.wait(0.6)   # let the detach be seen
            time.sleep(0.1 + (hash(dev) % 7) / 100)  # attach at no fixed phase of the poll
        c0, t0 = cpu(), time.monotonic()
        end = t0 + idle
        while time.monotonic() < end:
            w.wait(end - time.monotonic())
        share = (cpu() - c0) / (time.monotonic() - t0)
    os.unlink(img)
    return lat, share


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("needs root (losetup)")
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    idle = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    with tempfile.TemporaryDirectory(prefix="cardbench-detect-") as d:
        for method in ("netlink", "poll"):
            lat, share = measure(method, rounds, idle, d)
            print(f"{method:8s} noticed after: median {statistics.median(lat) * 1e3:.2f} ms, "
                  f"max {max(lat) * 1e3:.2f} ms ({rounds} insertions); "
                  f"idle CPU {share * 100:.3f}% of one core over {idle:g} s")


if __name__ == "__main__":
    main()
