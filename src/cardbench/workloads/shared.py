"""Cards read at once: does the path they share (one multi-slot reader, one hub) carry their sum?

:func:`read_together` reads each device alone, then all of them at the same time, read-only,
with the raw workload's own sampled sweep (:func:`cardbench.workloads.raw.sampled_sweep`,
O_DIRECT, 1 MiB requests). Each device's sample is sized so its sweep lasts about ``seconds``
alone; together, every sweep starts at one barrier and the aggregate is all bytes over the wall
time until the last one ends (a conservative figure: a card that finishes first leaves the
others alone for a moment, never more than the path carried). :func:`cardbench.verdicts.readers.judge_shared`
judges the figures.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from cardbench.devices.lock import target_lock
from cardbench.errors import CardbenchError, UsageError
from cardbench.signals import start_thread
from cardbench.target import DeviceTarget, open_device_target
from cardbench.workloads import raw

SECONDS = 2.0
COUNT = 4


def open_devices(paths: list[str]) -> list[DeviceTarget]:
    """The whole devices at ``paths`` (each once, in order), opened for :func:`read_together`."""
    return [open_device_target(p, whole_device=True) for p in dict.fromkeys(paths)]


def read_together(targets: list[DeviceTarget], *, seconds: float = SECONDS, count: int = COUNT) -> dict[str, Any]:
    """Read the whole devices ``targets`` (:func:`open_devices` opens them from paths) alone,
    then at once. ``{"devices": [{"device", "alone_bytes_per_s", "together_bytes_per_s", "sample_bytes"}],
    "alone_sum_bytes_per_s", "together_bytes_per_s", "together_seconds", "method"}`` (bytes/s)."""

    targets = list({t.path: t for t in targets}.values())
    if len(targets) < 2:
        raise UsageError("--probe needs two or more different devices (cards in one reader or behind one hub)")
    devices = [t.block_device() for t in targets]
    for dev in devices:
        if not dev.medium_present:
            raise UsageError(f"{dev.path} has no medium (size 0): is the card inserted?")
    with contextlib.ExitStack() as locks:
        for t in targets:
            locks.enter_context(target_lock(t.lock_key, wait=False, label=t.path))
        samples = [raw.auto_sample(t, count, target_seconds=seconds) for t in targets]
        alone = [raw.sampled_sweep(t, "read", count=count, sample=s) for t, s in zip(targets, samples, strict=True)]
        barrier = threading.Barrier(len(devices) + 1)
        runs: list[Any] = [None] * len(devices)
        ends: list[float] = [0.0] * len(devices)
        errors: list[BaseException] = []

        def one(i: int) -> None:
            try:
                barrier.wait()
                runs[i] = raw.sampled_sweep(targets[i], "read", count=count, sample=samples[i])
                ends[i] = time.perf_counter()
            except BaseException as e:   # noqa: BLE001 - handed to the caller's thread
                errors.append(e)

        threads = [threading.Thread(target=one, args=(i,), name=f"cardbench-probe-{i}", daemon=True)
                   for i in range(len(devices))]
        for th in threads:
            start_thread(th)
        barrier.wait()
        start = time.perf_counter()
        for th in threads:
            th.join()
    if errors:
        e = errors[0]
        if isinstance(e, CardbenchError):
            raise e
        raise CardbenchError(f"reading the cards at once failed: {type(e).__name__}: {e}")
    wall = max(ends) - start
    together_bytes = sum(r.bytes for r in runs)
    rows = [{"device": d.path, "sample_bytes": s, "alone_bytes_per_s": a.bytes_per_s,
             "together_bytes_per_s": r.bytes_per_s} for d, s, a, r in zip(devices, samples, alone, runs, strict=True)]
    return {"devices": rows, "alone_sum_bytes_per_s": sum(a.bytes_per_s for a in alone),
            "alone_max_bytes_per_s": max(a.bytes_per_s for a in alone),
            "together_bytes_per_s": together_bytes / wall if wall > 0 else None, "together_seconds": wall,
            "method": {"engine": "sync", "io": "O_DIRECT", "block_size": raw.BLOCK, "positions": count,
                       "read_only": True, "seconds_alone": seconds}}
