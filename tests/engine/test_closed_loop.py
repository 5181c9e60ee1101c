"""closed_loop, the hot loop of every pattern run, on every engine: a real loop device, real
data, the stops, I/O errors and interrupts (nothing may stay in flight afterwards)."""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import time
from array import array

import pytest

from cardbench.engine.base import closed_loop, submit_reap_loop
from cardbench.engine.buffers import AlignedBuffers, aligned_buffer
from cardbench.engine.queued import QueuedEngine, io_uring_available
from cardbench.engine.sync import SyncEngine
from cardbench.errors import DeviceFault
from engine_helpers import emulated_card, fill_random, needs_emulator, needs_root
from realparts import loop_device

MB = 1_000_000
MiB = 1 << 20
DEV_SIZE = 8 * MiB

# (name, depth, factory): every engine and backend that has a loop of its own, and the thread
# pool, which goes through submit/reap
ENGINES = [
    ("sync", 1, lambda d: SyncEngine()),
    ("queued/direct", 1, lambda d: QueuedEngine(d, backend="direct")),
    ("queued/io_uring", 1, lambda d: QueuedEngine(d, backend="io_uring")),
    ("queued/io_uring", 8, lambda d: QueuedEngine(d, backend="io_uring")),
    ("queued/io_uring", 32, lambda d: QueuedEngine(d, backend="io_uring")),
    ("queued/threads", 8, lambda d: QueuedEngine(d, backend="threads")),
]
IDS = [f"{n}-q{d}" for n, d, _ in ENGINES]


def _make(name, depth, factory):
    if "io_uring" in name:
        ok, why = io_uring_available()
        if not ok:
            pytest.skip(f"io_uring not usable here: {why}")
    return factory(depth)


@pytest.fixture(scope="module")
def device():
    """A loop device holding random data (module-wide: the tests restore what they change)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices)")
    with loop_device(DEV_SIZE, directory="/var/tmp", direct_io=True) as dev:
        yield dev, fill_random(dev, DEV_SIZE)


@contextlib.contextmanager
def opened(name, depth, factory, path, *, write=False, size=4096):
    """The engine open on ``path`` and ``depth`` buffers of ``size`` bytes; both closed after."""
    eng = _make(name, depth, factory)
    eng.open(path, write=write)
    bufs = AlignedBuffers(depth, size)
    try:
        yield eng, bufs
    finally:
        eng.close()
        bufs.close()


@needs_root
@pytest.mark.parametrize("name,depth,factory", ENGINES, ids=IDS)
def test_each_buffer_reads_the_offset_it_was_given(device, name, depth, factory):
    dev, data = device
    with opened(name, depth, factory, dev, write=False, size=4096) as (eng, bufs):
        offsets = [i * 4096 for i in random.Random(depth).sample(range(DEV_SIZE // 4096), depth)]
        lat = array("d")
        res = closed_loop(eng, "read", bufs, 4096, iter(offsets).__next__, max_ops=depth, duration=30,
                          latencies=lat)
        assert (res.ops, res.bytes, res.stopped) == (depth, depth * 4096, "size")
        assert len(lat) == depth and all(0 < x < 30 for x in lat)
        assert res.t1 >= res.t0
        for b, off in zip(bufs, offsets, strict=True):      # buffer i went out with the i-th offset
            assert bytes(b[:4096]) == data[off:off + 4096]
        assert eng.pending() == 0


@needs_root
@pytest.mark.parametrize("name,depth,factory", ENGINES, ids=IDS)
def test_writes_cover_every_offset_once(device, name, depth, factory):
    """Every block of a 1 MiB range written exactly once, in a shuffled order, through reused
    buffers: afterwards each block holds the content of one of the buffers, none is untouched."""
    dev, data = device
    base = 2 * MiB
    bs = 4096
    nblocks = MiB // bs
    offsets = [base + i * bs for i in range(nblocks)]
    random.Random(7).shuffle(offsets)
    try:
        with opened(name, depth, factory, dev, write=True, size=bs) as (eng, bufs):
            for i, b in enumerate(bufs):
                b[:] = ((b"cardbench buffer %03d " % i) * bs)[:bs]
            contents = {bytes(b[:bs]) for b in bufs}
            lat = array("d")
            res = closed_loop(eng, "write", bufs, bs, iter(offsets).__next__, max_ops=nblocks, duration=60,
                              latencies=lat)
            eng.sync()
            assert (res.ops, res.bytes, res.stopped) == (nblocks, MiB, "size")
            assert len(lat) == nblocks
            fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
            check = aligned_buffer(MiB)
            try:
                os.preadv(fd, [check], base)
            finally:
                os.close(fd)
            got = bytes(check)
            check.close()
            blocks = [got[i:i + bs] for i in range(0, MiB, bs)]
            assert all(blk in contents for blk in blocks)
            if depth > 1:
                assert len(set(blocks)) > 1           # the buffers took turns
    finally:
        with open(dev, "r+b") as f:              # put the random data back for the other tests
            f.seek(base)
            f.write(data[base:base + MiB])
            f.flush()
            os.fsync(f.fileno())


@needs_root
@pytest.mark.parametrize("name,depth,factory", ENGINES, ids=IDS)
def test_a_short_transfer_stops_the_loop(device, name, depth, factory):
    """Reading on past the device's end comes back short (0 bytes): stopped "end of target",
    every operation still counted and nothing left in flight."""
    dev, _ = device
    offsets = [DEV_SIZE - 8 * 4096 + i * 4096 for i in range(64)]   # 8 good, then past the end
    with opened(name, depth, factory, dev, write=False, size=4096) as (eng, bufs):
        lat = array("d")
        res = closed_loop(eng, "read", bufs, 4096, iter(offsets).__next__, max_ops=64, duration=30, latencies=lat)
        assert res.stopped == "end of target"
        assert res.bytes == 8 * 4096
        assert 9 <= res.ops <= 8 + depth and len(lat) == res.ops
        assert eng.pending() == 0


@needs_root
@pytest.mark.parametrize("name,depth,factory", ENGINES, ids=IDS)
def test_an_interrupt_leaves_nothing_in_flight(device, name, depth, factory):
    """Ctrl-C inside the loop (here: from the offset source after 100 operations) propagates,
    waits for what is in flight, and the engine runs the next loop normally."""
    dev, data = device
    with opened(name, depth, factory, dev, write=False, size=4096) as (eng, bufs):
        calls = 0

        def offsets():
            nonlocal calls
            calls += 1
            if calls > 100:
                raise KeyboardInterrupt
            return (calls % 512) * 4096

        with pytest.raises(KeyboardInterrupt):
            closed_loop(eng, "read", bufs, 4096, offsets, max_ops=10_000, duration=30, latencies=array("d"))
        assert eng.pending() == 0
        again = iter(range(0, 64 * 4096, 4096))
        res = closed_loop(eng, "read", bufs, 4096, again.__next__, max_ops=64, duration=30, latencies=array("d"))
        assert (res.ops, res.stopped) == (64, "size")
        assert bytes(bufs[0][:4096]) in {data[o:o + 4096] for o in range(0, 64 * 4096, 4096)}


@needs_emulator
@pytest.mark.parametrize("name,depth,factory", [e for e in ENGINES if e[1] > 1], ids=[i for i in IDS if "q1" != i[-2:]])
def test_io_error_raises_after_the_rest_finished(name, depth, factory):
    with emulated_card(size=16 * MiB, write_rate=200 * MB, read_rate=200 * MB,
                       errors=[(4 * MiB, 5 * MiB, "read")]) as card:
        with opened(name, depth, factory, card.device, write=False, size=4096) as (eng, bufs):
            offsets = iter([i * 256 * 1024 for i in range(64)])     # the 17th to 20th are in the bad MiB
            with pytest.raises(DeviceFault, match="I/O error"):
                closed_loop(eng, "read", bufs, 4096, offsets.__next__, max_ops=64, duration=30,
                            latencies=array("d"))
            assert eng.pending() == 0
            res = closed_loop(eng, "read", bufs, 4096, iter([0] * 16).__next__, max_ops=16, duration=30,
                              latencies=array("d"))
            assert (res.ops, res.stopped) == (16, "size")


@pytest.mark.timing
@needs_emulator
@pytest.mark.parametrize("name,depth,factory", ENGINES, ids=IDS)
def test_the_deadline_stops_a_slow_card_and_the_queue_stays_full(name, depth, factory):
    """A card that serves one request per 10 ms: the loop stops at the deadline (not at
    max_ops) and finishes what is in flight; at depth 8 an operation waits behind the others,
    so its latency is several service times (the queue was kept full), at depth 1 one."""
    with emulated_card(size=16 * MiB, write_rate=100 * MB, read_rate=100 * MB, latency=0.01) as card:
        with opened(name, depth, factory, card.device, write=False, size=4096) as (eng, bufs):
            rng = random.Random(3)
            lat = array("d")
            t = time.perf_counter()
            res = closed_loop(eng, "read", bufs, 4096, lambda: rng.randrange(4096) * 4096, max_ops=10**9,
                              duration=0.5, latencies=lat)
            took = time.perf_counter() - t
    assert res.stopped == "duration"
    assert 0.5 <= took < 0.5 + 0.01 * depth + 1.0
    assert res.ops == len(lat) >= 10
    p50 = statistics.median(lat)
    assert 0.009 < p50 < 0.01 * depth * 1.5 + 0.02
    if depth >= 8:
        assert p50 > 0.01 * depth * 0.6


@needs_root
def test_the_generic_loop_and_the_lean_ones_agree(device):
    """submit_reap_loop (what an engine without a loop of its own gets) and io_uring's lean loop
    read the same offsets into the same buffers."""
    ok, why = io_uring_available()
    if not ok:
        pytest.skip(f"io_uring not usable here: {why}")
    dev, data = device
    offsets = [i * 8192 for i in range(16)]
    out = []
    for lean in (True, False):
        with opened("queued/io_uring", 16, lambda d: QueuedEngine(d, backend="io_uring"), dev,
                    size=8192) as (eng, bufs):
            loop = closed_loop if lean else submit_reap_loop
            res = loop(eng, "read", bufs, 8192, iter(offsets).__next__, max_ops=16, duration=30,
                       latencies=array("d"))
            out.append((res.ops, res.bytes, res.stopped, [bytes(b) for b in bufs]))
    assert out[0] == out[1]
    assert out[0][3][5] == data[5 * 8192:6 * 8192]


@needs_root
def test_the_ring_loop_uses_registered_buffers_and_lets_them_go(device):
    """io_uring's loop runs on a registered file and registered buffers (READ/WRITE_FIXED) and
    unregisters the buffers when it ends: a second loop on other buffers registers its own
    (the kernel refuses a second table while one is registered) and reads the right data."""
    dev, data = device
    eng = _make("queued/io_uring", 8, lambda d: QueuedEngine(d, backend="io_uring"))
    sets = [AlignedBuffers(8, 4096), AlignedBuffers(8, 4096)]
    eng.open(dev, write=False)
    try:
        impl = eng._impl
        assert impl.fixed_file
        seen = []
        register = impl.ring.register_buffers
        impl.ring.register_buffers = lambda spans: seen.append(register(spans)) or seen[-1]
        for round_, bufs in enumerate(sets):
            offsets = [(round_ * 8 + i) * 4096 for i in range(8)]
            res = closed_loop(eng, "read", bufs, 4096, iter(offsets).__next__, max_ops=8, duration=30,
                              latencies=array("d"))
            assert res.ops == 8
            for b, off in zip(bufs, offsets, strict=True):
                assert bytes(b) == data[off:off + 4096]
        assert seen == [True, True]
        assert register([(0, 4096)]) is False        # NULL is no buffer: the kernel says no
    finally:
        eng.close()
        for bufs in sets:
            bufs.close()
