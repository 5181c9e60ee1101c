"""Every write a pattern run makes carries data unique to it, on every engine and backend: a loop
device is written by a sequential time-based job (which wraps) and a random job (which hits
blocks more than once), read back and checked sector by sector.

(Before each write was given its own data, a job wrote the same queue of buffers over and over:
the device then held thousands of equal sectors, and a rewritten block the same bytes as before.)
"""

from __future__ import annotations

import os
from collections import defaultdict

import numpy as np
import pytest

from cardbench.engine.jobs import DATA, Job, _offsets, run_job
from cardbench.engine.queued import io_uring_available
from cardbench.patterns import SECTOR, FreshWrites, Pattern
from cardbench.workloads.random import TestArea, measure_pattern
from engine_helpers import needs_root
from realparts import loop_device

KiB = 1 << 10
MiB = 1 << 20
DEV_SIZE = 1 * MiB
#: the sequential run's area: 64 blocks, more than the deepest queue holds
SEQ_AREA = 256 * KiB
BS = 4 * KiB

# (engine, backend, depth): every way a pattern run moves its writes
WAYS = [
    ("sync", "auto", 1),
    ("queued", "direct", 1),
    ("queued", "io_uring", 1),
    ("queued", "io_uring", 8),
    ("queued", "io_uring", 32),
    ("queued", "threads", 8),
]
IDS = [f"{e}/{b}-q{d}" for e, b, d in WAYS]


@pytest.fixture(scope="module")
def device():
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices)")
    with loop_device(DEV_SIZE, directory="/var/tmp", direct_io=True) as dev:
        yield dev


def _skip_without_ring(backend: str) -> None:
    if backend == "io_uring":
        ok, why = io_uring_available()
        if not ok:
            pytest.skip(f"io_uring not usable here: {why}")


def read_back(dev: str, size: int) -> np.ndarray:
    """The device's first ``size`` bytes as rows of 512 (read through the page cache after a
    flush of it: the writes were O_DIRECT)."""
    fd = os.open(dev, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        data = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    assert len(data) == size
    return np.frombuffer(data, dtype=np.uint8).reshape(-1, SECTOR)


def assert_all_distinct(rows: np.ndarray) -> None:
    """No two sectors are equal (whatever they hold)."""
    distinct = np.unique(rows.view(np.dtype((np.void, SECTOR))).ravel()).size
    assert distinct == rows.shape[0], f"{rows.shape[0] - distinct} of {rows.shape[0]} sectors repeat another"


def job(dev: str, backend: str, depth: int, **kw) -> Job:
    return Job(path=dev, op="write", block_size=BS, queue_depth=depth, backend=backend, sync_end=True, **kw)


def check_blocks(rows: np.ndarray, tag: int, hits: dict[int, list[int]], depth: int, *,
                 other_tag: int | None = None) -> None:
    """Each block of ``rows`` holds, whole, one write of the run ``tag`` that was aimed at it (its
    own position in every sector), and the last one (``hits[block]``: the sequence numbers of the
    writes aimed at it, in order): always at depth 1; deeper, two writes of a block can be in
    flight at once and land in either order (a request can also stall in the kernel or a worker
    thread while dozens of later ones pass it, on a busy machine), so there 90% of the blocks
    whose last two writes were more than ``depth`` apart must hold the last one. A block no
    write reached holds the run ``other_tag``'s data."""
    tags, where, seqs, intact = Pattern(tag).headers(rows)
    per = BS // SECTOR
    apart = last = 0
    for b, got in enumerate(seqs.reshape(-1, per)):
        sectors = slice(b * per, (b + 1) * per)
        if b not in hits:
            assert other_tag is not None and (tags[sectors] == np.uint64(other_tag)).all()
            continue
        assert intact[sectors].all(), f"block {b} does not hold this run's data whole"
        assert (where[sectors] == np.arange(b * BS, (b + 1) * BS, SECTOR, dtype=np.uint64)).all()
        assert len(set(got.tolist())) == 1, f"block {b} holds parts of several writes"
        mine = hits[b]
        seq = int(got[0])
        assert seq in mine
        if depth == 1:
            assert seq == mine[-1], f"block {b}: writes {mine}, holds {seq}"
        elif len(mine) == 1 or mine[-1] - mine[-2] > depth:
            apart += 1
            last += seq == mine[-1]
    assert last >= 0.9 * apart, f"only {last} of {apart} blocks hold their last write"


@needs_root
@pytest.mark.parametrize(("engine", "backend", "depth"), WAYS, ids=IDS)
def test_a_wrapping_sequential_run_writes_each_block_anew(device, engine, backend, depth):
    _skip_without_ring(backend)
    seed = 0x5EED_0001 + depth
    area = SEQ_AREA
    nblocks = area // BS
    # three laps of the area (as a time-based run wraps it: the same offsets, a count instead of a
    # clock, so a slow disk cannot make it stop before it wrapped)
    run = run_job(engine, job(device, backend, depth, area=area, sequential=True, size=3 * area, duration=60,
                              seed=seed))
    assert run.ops == 3 * nblocks
    assert run.extra["data"] == DATA
    rows = read_back(device, area)
    assert_all_distinct(rows)
    # write k (from 0) went to block k mod nblocks with the sequence number k + 1
    hits: dict[int, list[int]] = defaultdict(list)
    for k in range(run.ops):
        hits[k % nblocks].append(k + 1)
    check_blocks(rows, seed, hits, depth)


@needs_root
@pytest.mark.parametrize(("engine", "backend", "depth"), WAYS, ids=IDS)
def test_a_random_run_rewrites_blocks_with_new_data(device, engine, backend, depth):
    _skip_without_ring(backend)
    nblocks = DEV_SIZE // BS
    seed = 0x5EED_0100 + depth
    # first a sequential pass of another run, so every block was written before
    run_job(engine, job(device, backend, depth, area=DEV_SIZE, sequential=True, size=DEV_SIZE, seed=seed + 1))
    before = read_back(device, DEV_SIZE).copy()
    j = job(device, backend, depth, area=DEV_SIZE, sequential=False, size=3 * DEV_SIZE, seed=seed)
    run = run_job(engine, j)
    assert run.ops == 3 * nblocks
    offs = _offsets(j, seed)
    hits: dict[int, list[int]] = defaultdict(list)
    for k in range(run.ops):
        hits[next(offs) // BS].append(k + 1)
    assert sum(len(v) > 1 for v in hits.values()) > nblocks // 2, "too few blocks were hit twice"
    rows = read_back(device, DEV_SIZE)
    # no sector repeats another, nor one of the blocks the random run overwrote
    overwritten = before[rows.view(np.uint64)[:, 0] == np.uint64(seed)]
    assert_all_distinct(np.concatenate([rows, overwritten]))
    check_blocks(rows, seed, hits, depth, other_tag=seed + 1)


@needs_root
def test_a_pattern_tests_method_says_what_its_data_is(device):
    area = TestArea(path=device, offset=0, size=DEV_SIZE, kind="device")
    res = measure_pattern(area, "rand_write_4k_q8t1", "queued", runs=1, warmup=0, duration=0.2, allow_write=True)
    assert res.method["data"].startswith("unique per write")
    read = measure_pattern(area, "rand_read_4k_q8t1", "queued", runs=1, warmup=0, duration=0.2)
    assert "data" not in read.method


class _InterruptAt:
    """A list that raises KeyboardInterrupt (Ctrl-C) on its n-th use, inside FreshWrites.fill."""

    def __init__(self, real, n: int) -> None:
        self.real, self.left = real, n

    def __getitem__(self, key):
        self.left -= 1
        if self.left == 0:
            self.real = []      # (this frame stays in the traceback too: it must not hold the views)
            raise KeyboardInterrupt
        return self.real[key]

    def __iter__(self):
        return iter(self.real)


class _InterruptingView:
    """A buffer's memory view that raises KeyboardInterrupt on the n-th store into it (counted
    over all of them: ``left`` is shared), in the middle of FreshWrites' small-write path."""

    def __init__(self, real: memoryview, left: list[int]) -> None:
        self.real, self.left = real, left

    def __setitem__(self, key, value) -> None:
        self.left[0] -= 1
        if self.left[0] == 0:
            raise KeyboardInterrupt
        self.real[key] = value

    def release(self) -> None:
        self.real.release()


@needs_root
@pytest.mark.parametrize("block", [BS, 256 * KiB], ids=["4KiB", "256KiB"])
@pytest.mark.parametrize(("engine", "backend", "depth"), WAYS, ids=IDS)
def test_ctrl_c_inside_the_data_maker_is_an_interruption(device, engine, backend, depth, block, monkeypatch):
    # the buffers' views are alive in the interrupted frames: closing the buffers must not turn
    # the Ctrl-C into a BufferError ("cannot close exported pointers exist")
    _skip_without_ring(backend)
    real_init = FreshWrites.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        if self._words is not None:
            self._words = _InterruptAt(self._words, 3)
        else:       # in place: the small-write path holds this very list
            left = [3 * 16 + 5]
            self._q[:] = [_InterruptingView(v, left) for v in self._q]
    monkeypatch.setattr(FreshWrites, "__init__", init)
    with pytest.raises(KeyboardInterrupt):
        run_job(engine, Job(path=device, op="write", block_size=block, queue_depth=depth, backend=backend,
                            area=DEV_SIZE, sequential=False, size=DEV_SIZE, seed=7))
