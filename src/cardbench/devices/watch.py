"""Noticing cards as they go in and out: the kernel's uevents over netlink, else sysfs polling.

A card is a whole block device that *gets its medium*: a new ``mmcblkN``, a USB stick's ``sdX``
appearing, a card pushed into a reader slot (its ``sdX`` going from size 0 to N), or, with
``include_loop``, a loop device getting a backing file (``losetup``: size 0 -> N). Devices that
already hold a medium when watching starts are left alone until their medium changes (goes, or
comes back with another size).

How it notices (measured with ``bench/detect_latency.py``, docs/benchmarks.md): the kernel
sends a ``change``/``add``/``remove`` uevent for every block device on the netlink socket
``NETLINK_KOBJECT_UEVENT``, multicast group 1 (the kernel's own group; udevd re-broadcasts on
group 2, so no udevd is needed). On that event the device's ``/sys/block/<name>/size`` is read
again. Measured here: noticed 0.1-0.3 ms after ``losetup`` returned, and no CPU while nothing
happens (the process sleeps in ``select``). Polling sysfs every 0.5 s notices 250 ms late on
average (up to 500 ms) and costs a little CPU all the time, so it is only the fallback: when the
socket cannot be opened (a sandbox without netlink), and, as a safety net for dropped events
(ENOBUFS when the socket's buffer overflows), a full rescan every ``rescan`` seconds.

A card swapped in a reader is a media change the kernel only sees when someone looks: without
udisks (which polls), a kernel with ``block.events_dfl_poll_msecs`` 0 never checks a removable
LUN, so no uevent comes. The watcher asks the kernel to poll each removable LUN it watches
(``/sys/block/sdX/events_poll_msecs`` = ``KERNEL_POLL_MSECS``, root only, where the disk
reports ``media_change`` in ``events``); where it cannot, it opens those LUNs itself every
``SELF_POLL_INTERVAL`` seconds (an open makes the SCSI disk driver check its medium).

What the session saw of a device is kept for the identity rule (:meth:`Watcher.hint`, a
:class:`cardbench.devices.holder.SessionHint`): a block device that appeared holding its
medium arrived with it (a stick); a medium that went or came on a device that stayed marks its
USB device as a reader.

Which devices are watched (:func:`watched`): USB mass storage, mmc, anything sysfs marks
removable, and loop devices only with ``include_loop`` (and, with ``loop_under``, only those whose
backing file lies under that directory: on a shared machine other people's loop devices are not
cards to test). Partitions, RAM disks, zram, device-mapper, md, nbd and optical drives never are;
nor is the system disk (:attr:`cardbench.devices.BlockDevice.system`, checked by the caller
before a card is tested).
"""

from __future__ import annotations

import errno
import os
import select
import socket
import time
from dataclasses import dataclass
from typing import Callable

from cardbench.devices.holder import SessionHint
from cardbench.devices.sysfs import read_int, read_text
from cardbench.errors import EnvironmentMissing

#: ``NETLINK_KOBJECT_UEVENT`` (linux/netlink.h); group 1 carries the kernel's own uevents
NETLINK_KOBJECT_UEVENT = 15
KERNEL_GROUP = 1
SECTOR = 512
#: seconds between full sysfs scans: the fallback's pace, and the safety net behind netlink
POLL_INTERVAL = 0.5
RESCAN_INTERVAL = 5.0
#: how often the kernel is asked to check a removable LUN for a new medium (ms), and how often
#: the watcher opens such LUNs itself where it cannot ask (s)
KERNEL_POLL_MSECS = 1000
SELF_POLL_INTERVAL = 1.0
_NEVER = ("ram", "zram", "dm-", "md", "nbd", "sr", "fd", "nvme", "vd", "xvd")


@dataclass(frozen=True)
class MediumChange:
    """A watched device whose medium came (``size`` > 0) or went (``size`` == 0)."""

    name: str
    path: str
    size: int
    before: int

    @property
    def inserted(self) -> bool:
        return self.size > 0


def _size(sysfs_root: str, name: str) -> int:
    sectors = read_int(os.path.join(sysfs_root, "block", name, "size"))
    return (sectors or 0) * SECTOR


def _revalidate(name: str) -> None:
    """Open and close ``/dev/<name>``: the SCSI disk driver reads a new medium's size on open.
    Until then sysfs shows the old one: measured on a 6.1 kernel under QEMU, a card swapped in a
    ``usb-bot`` reader raised ``diskseq`` and sent DISK_MEDIA_CHANGE at the kernel's next poll,
    and ``size`` stayed the old card's until a ``dd`` opened the device 5 s later."""
    try:
        os.close(os.open(f"/dev/{name}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError:
        pass


def loop_backing_file(name: str, sysfs_root: str = "/sys") -> str | None:
    """The file behind loop device ``name`` (None when unbound or not a loop device)."""
    return read_text(os.path.join(sysfs_root, "block", name, "loop", "backing_file")) or None


def reader_key(name: str, sysfs_root: str = "/sys") -> str | None:
    """What a card shares with other cards behind the same reader: the USB device of a
    multi-slot reader (its LUNs) or hub port, the mmc host, or for a loop device the directory
    of its backing file (the emulator puts the cards of one emulated reader in one directory).
    None when nothing is known."""
    if name.startswith("loop"):
        backing = loop_backing_file(name, sysfs_root)
        return f"loop:{os.path.dirname(backing)}" if backing else None
    real = os.path.realpath(os.path.join(sysfs_root, "block", name))
    parts = real.split("/")
    usb = [i for i, p in enumerate(parts) if p.startswith("usb")]
    if usb:
        # /devices/pci.../usb1/1-1/1-1:1.0/host6/...: the USB device is the part after usbN
        i = usb[-1] + 1
        return "usb:" + "/".join(parts[:i + 1]) if i < len(parts) else None
    if name.startswith("mmcblk"):
        host = next((p for p in parts if p.startswith("mmc") and ":" not in p and not p.startswith("mmcblk")), None)
        return f"mmc:{host}" if host else None
    return None


def watched(name: str, *, include_loop: bool = False, loop_under: str | None = None,
            sysfs_root: str = "/sys") -> bool:
    """True for a whole block device that may hold a card (see the module docstring)."""
    base = os.path.join(sysfs_root, "block", name)
    if not os.path.isdir(base) or os.path.exists(os.path.join(base, "partition")):
        return False
    if name.startswith("loop"):
        if not include_loop:
            return False
        if loop_under is None:
            return True
        backing = loop_backing_file(name, sysfs_root)
        root = os.path.realpath(loop_under).rstrip("/") + "/"
        return backing is not None and os.path.realpath(backing).startswith(root)
    if name.startswith(_NEVER) or "boot" in name or "rpmb" in name:
        return False
    if name.startswith("mmcblk"):
        return True
    if read_int(os.path.join(base, "removable")) == 1:
        return True
    return "/usb" in os.path.realpath(base)


def open_uevent_socket() -> socket.socket | None:
    """The kernel's uevent multicast socket, or None when this system does not allow it."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT)
    except (OSError, AttributeError):
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.bind((0, KERNEL_GROUP))
        sock.setblocking(False)
    except OSError:
        sock.close()
        return None
    return sock


def parse_uevent(data: bytes) -> dict[str, str]:
    """A kernel uevent (``action@devpath\\0KEY=value\\0...``) as a dict of its keys."""
    out: dict[str, str] = {}
    for field in data.split(b"\0")[1:]:
        key, sep, value = field.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


class Watcher:
    """Reports :class:`MediumChange` events for watched devices (see the module docstring).

    ``method``: "auto" (netlink, else polling), "netlink" or "poll". Use as a context manager
    (closes the socket). :meth:`wait` returns the changes seen within ``timeout`` seconds.
    """

    def __init__(self, *, include_loop: bool = False, loop_under: str | None = None, method: str = "auto",
                 poll_interval: float = POLL_INTERVAL, rescan: float = RESCAN_INTERVAL,
                 sysfs_root: str = "/sys", revalidate: Callable[[str], None] = _revalidate) -> None:
        self.include_loop = include_loop
        #: makes the kernel read device ``name``'s medium again (a model tree replaces it)
        self.revalidate = revalidate
        self.loop_under = loop_under
        self.sysfs_root = sysfs_root
        self.poll_interval = poll_interval
        self.rescan_interval = rescan
        self.sock = open_uevent_socket() if method in ("auto", "netlink") else None
        if method == "netlink" and self.sock is None:
            raise EnvironmentMissing("cannot open the kernel's uevent socket (netlink); use polling")
        self.method = "netlink" if self.sock is not None else "poll"
        # every device with a medium at start is known: only a change of its medium counts.
        # A medium is its size and the kernel's disk sequence number (``diskseq``, Linux >= 5.15:
        # raised at every media change and loop attach), so two cards of one size swapped while
        # nobody looked are two cards; without diskseq, a loop device's backing file
        self.media: dict[str, tuple[int, str | None]] = {n: self._medium(n) for n in self._names()}
        self._last_scan = time.monotonic()
        #: devices that appeared holding their medium; reader keys whose medium changed in place
        self.arrived: set[str] = set()
        self.changed_in_place: set[str] = set()
        self._keys: dict[str, str] = {}
        #: watched removable LUNs the kernel now polls for us; those we open ourselves
        self.kernel_polled: list[str] = []
        self.self_polled: list[str] = []
        self._last_self_poll = 0.0
        for n in self.media:
            self._arrange_polling(n)

    def present(self) -> list[str]:
        """Watched devices that held a medium when watching started (``/dev/...``): the drawer
        says so rather than skip them without a word."""
        return [f"/dev/{n}" for n, (size, _) in sorted(self.media.items()) if size and self._watched(n)]

    def hint(self, name: str):
        """What this session saw of device ``name`` (a :class:`SessionHint` for the identity rule)."""
        name = os.path.basename(name)
        key = reader_key(name, self.sysfs_root)
        return SessionHint(arrived_with_medium=name in self.arrived,
                           medium_changed=key is not None and key in self.changed_in_place)

    def _arrange_polling(self, name: str) -> None:
        """A watched removable LUN (not a loop device, not mmc: the mmc host notices cards itself)
        gets polled for media changes: by the kernel where it can be asked, else by us."""
        if name.startswith(("loop", "mmcblk")) or name in self.kernel_polled or name in self.self_polled:
            return
        base = os.path.join(self.sysfs_root, "block", name)
        if read_int(os.path.join(base, "removable")) != 1 or not self._watched(name):
            return
        events = read_text(os.path.join(base, "events")) or ""
        current = read_int(os.path.join(base, "events_poll_msecs"))
        if "media_change" in events:
            default = read_int(os.path.join(self.sysfs_root, "module", "block", "parameters",
                                            "events_dfl_poll_msecs"))
            if current is not None and (current > 0 or (current == -1 and default)):
                self.kernel_polled.append(name)      # someone (udisks, the default) polls already
                return
            try:
                with open(os.path.join(base, "events_poll_msecs"), "w") as f:
                    f.write(str(KERNEL_POLL_MSECS))
                self.kernel_polled.append(name)
                return
            except OSError:
                pass
        self.self_polled.append(name)

    def _self_poll(self) -> None:
        """Open each LUN we poll ourselves (the SCSI disk driver checks its medium on open)."""
        self._last_self_poll = time.monotonic()
        for name in list(self.self_polled):
            try:
                fd = os.open(f"/dev/{name}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                os.close(fd)
            except FileNotFoundError:
                self.self_polled.remove(name)
            except OSError:
                pass

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _names(self) -> list[str]:
        try:
            return sorted(os.listdir(os.path.join(self.sysfs_root, "block")))
        except OSError:
            return []

    def _watched(self, name: str) -> bool:
        return watched(name, include_loop=self.include_loop, loop_under=self.loop_under, sysfs_root=self.sysfs_root)

    def _medium(self, name: str) -> tuple[int, str | None]:
        if not os.path.isdir(os.path.join(self.sysfs_root, "block", name)):
            return 0, None
        size = _size(self.sysfs_root, name)
        if not size:
            return 0, None
        seq = read_text(os.path.join(self.sysfs_root, "block", name, "diskseq"))
        if seq:
            return size, "diskseq:" + seq
        return size, (loop_backing_file(name, self.sysfs_root) if name.startswith("loop") else None)

    def _check(self, name: str, media_change: bool = False) -> MediumChange | None:
        """A change of the device's medium since last seen; ``media_change``: the kernel said
        the medium changed (DISK_MEDIA_CHANGE), which counts where there is no diskseq to tell
        a card swapped for one of the same size."""
        medium = self._medium(name)
        new = name not in self.media
        before = self.media.get(name, (0, None))
        known_seq = (medium[1] or "").startswith("diskseq:")
        exists = os.path.isdir(os.path.join(self.sysfs_root, "block", name))
        if exists and not new and not name.startswith("loop") and (
                media_change or (known_seq and medium[1] != before[1])):
            # the kernel saw a media change (DISK_MEDIA_CHANGE, or a new diskseq found by a scan):
            # the size is the new medium's only once the device has been opened
            self.revalidate(name)
            medium = self._medium(name)
        size = medium[0]
        if not exists:
            self.media.pop(name, None)
            self.arrived.discard(name)
            key = self._keys.pop(name, None)
            if key is not None and key not in self._keys.values():
                self.changed_in_place.discard(key)   # that USB device is gone: its port may get a stick
            if name in self.self_polled:
                self.self_polled.remove(name)
            if name in self.kernel_polled:
                self.kernel_polled.remove(name)
        if medium == before and not (media_change and size and not known_seq):
            return None
        if exists:
            self.media[name] = medium
            self._arrange_polling(name)
            if new and size:
                self.arrived.add(name)
            elif not new and (size or before[0]) and not name.startswith("loop"):
                # the medium came, went or changed on a device that stayed: a reader's slot
                self.arrived.discard(name)
                key = reader_key(name, self.sysfs_root)
                if key is not None:
                    self.changed_in_place.add(key)
                    self._keys[name] = key
        before_size = before[0] if medium != before else 0
        if size and not self._watched(name):
            return None
        if not size and before[0] and name.startswith("loop") and not self.include_loop:
            return None
        return MediumChange(name=name, path=f"/dev/{name}", size=size, before=before_size)

    def scan(self) -> list[MediumChange]:
        """Read every device's size again; the changes since the last look."""
        self._last_scan = time.monotonic()
        names = set(self._names()) | set(self.media)
        return [c for n in sorted(names) if (c := self._check(n)) is not None]

    def _drain(self) -> tuple[list[MediumChange], bool]:
        """Read every queued uevent; (changes, whether events were lost)."""
        changes: list[MediumChange] = []
        lost = False
        while self.sock is not None:
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    lost = True
                    continue
                raise
            ev = parse_uevent(data)
            if ev.get("SUBSYSTEM") != "block" or ev.get("DEVTYPE", "disk") != "disk":
                continue
            name = ev.get("DEVNAME") or os.path.basename(ev.get("DEVPATH", ""))
            if name and (c := self._check(name, ev.get("DISK_MEDIA_CHANGE") == "1")) is not None:
                changes.append(c)
        return changes, lost

    def wait(self, timeout: float) -> list[MediumChange]:
        """Changes within ``timeout`` seconds (returns as soon as there is one)."""
        deadline = time.monotonic() + max(0.0, timeout)
        found: list[MediumChange]
        while True:
            now = time.monotonic()
            if self.self_polled and now - self._last_self_poll >= SELF_POLL_INTERVAL:
                self._self_poll()
                if self.sock is None:
                    found = self.scan()
                    if found:
                        return found
            if self.sock is None:
                if now - self._last_scan >= self.poll_interval:
                    found = self.scan()
                    if found:
                        return found
                pause = min(deadline - now, self.poll_interval - (time.monotonic() - self._last_scan))
                if deadline - now <= 0:
                    return []
                time.sleep(max(0.0, pause))
                continue
            pause = min(deadline - now, self.rescan_interval - (now - self._last_scan))
            if self.self_polled:
                pause = min(pause, SELF_POLL_INTERVAL)
            ready = select.select([self.sock], [], [], max(0.0, pause))[0] if pause > 0 else []
            found = []
            if ready:
                found, lost = self._drain()
                if lost:
                    found += self.scan()
            if time.monotonic() - self._last_scan >= self.rescan_interval:
                found += self.scan()
            if found:
                return found
            if time.monotonic() >= deadline:
                return []
