"""Emulated cards of known speed: real block devices whose every I/O is paced in userspace.

Used by cardbench's own tests and by the demo, so that a benchmark can be checked against a
card whose true behaviour is known: rates, latency, a reader's ceiling, fake capacity
(wraparound or dropped writes), an SLC-like write cache, I/O errors, yanking, and wear (blocks
that fail after a known number of writes, :mod:`cardbench.emulate.wear`).

Design
------
An emulated card is a loop device (``/dev/loopN``) attached with ``--direct-io=on`` to a file on
a FUSE filesystem served by a Python process (mfusepy on libfuse3). The FUSE file is opened
``direct_io``, so neither the loop device nor FUSE keep a page cache in between: every request
that leaves the loop device reaches the server, which books it on the card's timeline and
answers when it is done. That covers every path a benchmark uses: O_DIRECT on the device,
buffered reads (read-ahead), buffered writes + fsync through a filesystem on the device (the
kernel's flusher threads), and cold reads after unmount/mount.

Why not cgroup blkio throttling (io.max / blkio.throttle) on a plain loop device or ramdisk?
It throttles only I/O charged to the throttled cgroup: cgroup v1 misses buffered writeback
(issued by the kernel's flusher threads) entirely, and v2 depends on the filesystem's writeback
attribution and on every process touching the card living in that cgroup; read-ahead and
metadata can slip past too. A buffered benchmark would then see ramdisk speed. It also cannot
model latency, a write cache, fake capacity or errors. device-mapper (delay/dust/flakey) and
nbd need kernel modules this project cannot assume. Pacing at the FUSE layer sees exactly the
requests the "card" would see.

Pacing (:mod:`cardbench.emulate.pacing`): reads and writes of a card share one timeline (like
a card's bus); a request of n bytes starts at max(now, bus_free) and takes latency + n/rate.
A reader's ceiling is a second timeline shared by all cards behind it. The server answers at
the finish time. The host's own per-request overhead between back-to-back requests (and a late
wake-up of the server) is credited (see ``turnaround`` in :mod:`cardbench.emulate.pacing`), so
fio with 1 MiB O_DIRECT requests measures the set rates to ~0.1% (1 to 40 MB/s); 4 KiB
requests without latency come within ~2% (the Python server does ~20k requests/s at most).

Processes: one server process per reader (``python -m cardbench.emulate.server WORKDIR``), in
its own session, so pacing does not compete with the caller's GIL and a Ctrl-C in the caller's
terminal does not kill it mid-I/O. The card's data lives in a sparse backing file of the kept
size (pread/pwrite), so memory stays flat for big cards.

Control channel: a unix socket ``WORKDIR/control.sock`` speaking one JSON line per request
(:mod:`cardbench.emulate.control`); the library (``card.set(...)``) and the CLI
(``cardbench emulate set NAME ...``) use it.

Cleanup is the top rule: :class:`EmulatedCard` / :class:`EmulatedReader` as context managers
unmount filesystems on the card, detach the loop devices, stop the server, unmount FUSE and
remove temporary directories on normal exit, exception, Ctrl-C, SIGTERM (turned into
:class:`cardbench.errors.Interrupted` while an emulator is open, if nothing else handles
SIGTERM) and failed starts. If the server dies, teardown still detaches and unmounts (aborting
the FUSE connection if needed). If the caller is SIGKILLed, the server sees its owner die and
cleans up by itself.

Example::

    from cardbench.emulate import EmulatedCard, EmulatedReader, CardSpec
    from cardbench.units import MB, MiB

    with EmulatedCard(CardSpec(size=64 * MiB, write_rate=4.9 * MB, read_rate=4.9 * MB)) as card:
        card.device                       # "/dev/loopN"
        card.set(write_rate=2 * MB)       # live
        with card.filesystem("ext4") as mnt:
            ...
            card.remount()                # cold cache

    with EmulatedReader(ceiling=20 * MB) as reader:
        a = reader.add_card(CardSpec(size=64 * MiB, write_rate=15 * MB, read_rate=15 * MB, name="a"))
        b = reader.add_card(CardSpec(size=64 * MiB, write_rate=15 * MB, read_rate=15 * MB, name="b"))

Named, detached emulators for people (the ``cardbench emulate`` CLI) are in
:mod:`cardbench.emulate.manage`.

Requires root, /dev/fuse, loop devices, losetup and fusermount3; otherwise
:class:`cardbench.errors.EnvironmentMissing` is raised.
"""

from cardbench.emulate.device import EmulatedCard, EmulatedReader
from cardbench.emulate.pacing import DEFAULT_TURNAROUND
from cardbench.emulate.spec import CardSpec, ErrorRange
from cardbench.emulate.system import check_environment

__all__ = ["CardSpec", "DEFAULT_TURNAROUND", "EmulatedCard", "EmulatedReader", "ErrorRange", "check_environment"]
