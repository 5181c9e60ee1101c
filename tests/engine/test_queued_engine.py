"""The queued engine on real files and devices: data, depth, errors, both backends."""

from __future__ import annotations

import random

import pytest

from cardbench.engine import IoOp, aligned_buffer, get_engine
from cardbench.engine.queued import MAX_QUEUE_DEPTH, QueuedEngine, io_uring_available
from cardbench.errors import DeviceFault, UsageError
from engine_helpers import (
    data_file,
    emulated_card,
    max_overlap,
    needs_emulator,
    odirect_dir,
)

BACKENDS = ["io_uring", "threads"]
MB = 1_000_000
MiB = 1 << 20


def _backend_or_skip(backend: str) -> None:
    if backend == "io_uring":
        ok, why = io_uring_available()
        if not ok:
            pytest.skip(f"io_uring not usable here: {why}")


@pytest.fixture
def ddir(tmp_path):
    with odirect_dir(str(tmp_path)) as d:
        yield d


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("depth", [1, 16])
def test_random_reads_return_the_right_bytes(ddir, backend, depth):
    _backend_or_skip(backend)
    path, data = data_file(ddir, 4 * MiB)
    eng = QueuedEngine(depth, backend=backend)
    eng.open(path, write=False)
    assert eng.backend == backend
    bufs = [aligned_buffer(4096) for _ in range(16)]
    rng = random.Random(5)
    seen = 0
    try:
        for _round in range(8):
            for i, b in enumerate(bufs):
                eng.submit(IoOp("read", rng.randrange(1024) * 4096, b, 4096, tag=i))
            assert eng.pending() == 16
            got = []
            while eng.pending():
                got += eng.reap(1)
            assert len(got) == 16
            for c in got:
                assert c.result == 4096
                assert c.completed >= c.submitted
                assert bytes(c.op.buf[:4096]) == data[c.op.offset:c.op.offset + 4096]
                seen += 1
    finally:
        eng.close()
        for b in bufs:
            b.close()
    assert seen == 128


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_land_where_asked(ddir, backend):
    _backend_or_skip(backend)
    path, _ = data_file(ddir, 1 * MiB)
    eng = QueuedEngine(8, backend=backend)
    eng.open(path, write=True)
    bufs = [aligned_buffer(64 * 1024) for _ in range(8)]
    try:
        for i, b in enumerate(bufs):
            b[:] = bytes([i + 1]) * len(b)
            eng.submit(IoOp("write", (7 - i) * 65536, b, 65536))
        done = eng.drain()
        assert sorted(c.result for c in done) == [65536] * 8
        eng.sync()
    finally:
        eng.close()
        for b in bufs:
            b.close()
    with open(path, "rb") as f:
        content = f.read()
    for i in range(8):
        assert content[(7 - i) * 65536:(8 - i) * 65536] == bytes([i + 1]) * 65536


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_past_the_end_is_a_short_completion(ddir, backend):
    _backend_or_skip(backend)
    path, _ = data_file(ddir, 64 * 1024)
    with QueuedEngine(2, backend=backend) as eng:
        eng.open(path, write=False)
        b = aligned_buffer(8192)
        eng.submit(IoOp("read", 60 * 1024, b, 8192))
        eng.submit(IoOp("read", 64 * 1024, b, 8192))
        res = sorted(c.result for c in eng.drain())
        assert res == [0, 4096]


@pytest.mark.parametrize("backend", BACKENDS)
def test_more_submits_than_the_depth_are_all_completed(ddir, backend):
    _backend_or_skip(backend)
    path, data = data_file(ddir, 1 * MiB)
    bufs = [aligned_buffer(4096) for _ in range(40)]
    with QueuedEngine(4, backend=backend) as eng:
        eng.open(path, write=False)
        for i, b in enumerate(bufs):
            eng.submit(IoOp("read", i * 4096, b, 4096, tag=i))
        done = eng.drain()
    assert sorted(c.op.tag for c in done) == list(range(40))
    for c in done:
        assert bytes(c.op.buf[:4096]) == data[c.op.tag * 4096:(c.op.tag + 1) * 4096]


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_with_operations_in_flight(ddir, backend):
    _backend_or_skip(backend)
    path, _ = data_file(ddir, 1 * MiB)
    eng = QueuedEngine(8, backend=backend)
    eng.open(path, write=False)
    bufs = [aligned_buffer(65536) for _ in range(8)]
    for i, b in enumerate(bufs):
        eng.submit(IoOp("read", i * 65536, b, 65536))
    eng.close()            # waits for the kernel to finish with the buffers
    eng.close()            # idempotent
    for b in bufs:
        b.close()          # no buffer is still exported to the engine


def test_bad_arguments():
    with pytest.raises(UsageError):
        QueuedEngine(0)
    with pytest.raises(UsageError):
        QueuedEngine(MAX_QUEUE_DEPTH + 1)
    with pytest.raises(UsageError):
        QueuedEngine(4, backend="nope")
    assert isinstance(get_engine("queued", 8), QueuedEngine)
    assert get_engine("queued", 8).queue_depth == 8


def test_operation_longer_than_its_buffer_is_refused(ddir):
    ok, _ = io_uring_available()
    if not ok:
        pytest.skip("io_uring not usable")
    path, _ = data_file(ddir, 64 * 1024)
    with QueuedEngine(2, backend="io_uring") as eng:
        eng.open(path, write=False)
        with pytest.raises(ValueError):
            eng.submit(IoOp("read", 0, aligned_buffer(4096), 8192))
        assert eng.pending() == 0


@needs_emulator
@pytest.mark.parametrize("backend", BACKENDS)
def test_queue_keeps_several_operations_in_flight(backend):
    """On a card with 20 ms per request, QD8 has 8 requests open at once (a sync engine has 1)."""
    _backend_or_skip(backend)
    with emulated_card(size=16 * MiB, write_rate=50 * MB, read_rate=50 * MB, latency=0.02) as card:
        with QueuedEngine(8, backend=backend) as eng:
            eng.open(card.device, write=False)
            bufs = [aligned_buffer(4096) for _ in range(8)]
            for i, b in enumerate(bufs):
                eng.submit(IoOp("read", i * 1 * MiB, b, 4096))
            done = eng.drain()
        assert len(done) == 8
        assert max_overlap(done) >= 4
        # served one after the other by the card's bus: the last waited for the others
        lat = sorted(c.latency for c in done)
        assert lat[0] >= 0.015 and lat[-1] >= 0.1

        sync = get_engine("sync")
        sync.open(card.device, write=False)
        try:
            b = aligned_buffer(4096)
            for i in range(3):
                sync.submit(IoOp("read", i * MiB, b, 4096))
            assert max_overlap(sync.reap()) == 1
        finally:
            sync.close()


@needs_emulator
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("depth", [1, 4])
def test_io_error_is_a_device_fault(backend, depth):
    _backend_or_skip(backend)
    with emulated_card(size=16 * MiB, write_rate=200 * MB, read_rate=200 * MB,
                       errors=[(4 * MiB, 5 * MiB, "read")]) as card:
        with QueuedEngine(depth, backend=backend) as eng:
            eng.open(card.device, write=False)
            bufs = [aligned_buffer(4096) for _ in range(4)]
            for i, b in enumerate(bufs):
                eng.submit(IoOp("read", (3 + i) * MiB, b, 4096))   # the 2nd touches the bad range
            good = []
            with pytest.raises(DeviceFault, match="I/O error"):
                while eng.pending():
                    good += eng.reap(1)
            good += eng.drain()       # the good completions are not lost
            assert sorted(c.op.offset for c in good) == [3 * MiB, 5 * MiB, 6 * MiB]
            # still usable: a good read afterwards
            eng.submit(IoOp("read", 0, bufs[0], 4096))
            assert [c.result for c in eng.drain()] == [4096]
