"""devices.watch on a model sysfs tree (no root, no devices): the kernel is asked to poll a
reader's removable LUNs (a guest without udisks never noticed a card swapped in a reader), and
what the session saw tells a stick (arrived with its medium) from a reader (medium changed while
the USB device stayed). Issue 24."""

from __future__ import annotations

import os

from cardbench.devices.watch import KERNEL_POLL_MSECS, Watcher

USB = "devices/pci0000:00/0000:00:05.0/usb2/2-{port}/2-{port}:1.0/host{h}/target{h}:0:0/{h}:0:0:{lun}/block/{name}"


def put(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def read(path):
    with open(path) as f:
        return f.read().strip()


def disk(root, name, *, port=1, lun=0, size=262144, removable=1, events="media_change", poll=-1, diskseq=None):
    real = os.path.join(root, USB.format(port=port, h=port + 5, lun=lun, name=name))
    for attr, value in (("size", size), ("removable", removable), ("events", events),
                        ("events_poll_msecs", poll), ("dev", f"8:{16 * port + lun}"), ("diskseq", diskseq)):
        if value is not None:
            put(os.path.join(real, attr), str(value))
    os.makedirs(os.path.join(root, "block"), exist_ok=True)
    link = os.path.join(root, "block", name)
    if not os.path.islink(link):
        os.symlink(os.path.relpath(real, os.path.join(root, "block")), link)
    return real


def unplug(root, name):
    os.unlink(os.path.join(root, "block", name))


def tree(tmp_path, dfl=0):
    root = str(tmp_path / "sys")
    put(os.path.join(root, "module/block/parameters/events_dfl_poll_msecs"), str(dfl))
    return root


def test_the_kernel_is_asked_to_poll_a_removable_lun(tmp_path):
    root = tree(tmp_path)
    real = disk(root, "sdb", size=0)                       # an empty reader slot
    fixed = disk(root, "sdc", port=2, removable=0)         # a stick: nothing to poll
    with Watcher(method="poll", sysfs_root=root) as w:
        assert w.kernel_polled == ["sdb"] and w.self_polled == []
    assert read(os.path.join(real, "events_poll_msecs")) == str(KERNEL_POLL_MSECS)
    assert read(os.path.join(fixed, "events_poll_msecs")) == "-1"


def test_polling_already_on_is_left_alone(tmp_path):
    root = tree(tmp_path, dfl=2000)                        # udisks or the module default polls
    real = disk(root, "sdb")
    with Watcher(method="poll", sysfs_root=root) as w:
        assert w.kernel_polled == ["sdb"]
    assert read(os.path.join(real, "events_poll_msecs")) == "-1"


def test_a_lun_without_media_events_is_opened_by_the_watcher(tmp_path):
    root = tree(tmp_path)
    disk(root, "sdb", events="")
    with Watcher(method="poll", sysfs_root=root) as w:
        assert w.self_polled == ["sdb"] and w.kernel_polled == []


def test_cards_present_at_start_are_named(tmp_path):
    root = tree(tmp_path)
    disk(root, "sdb")
    disk(root, "sdc", port=2, size=0)
    with Watcher(method="poll", sysfs_root=root) as w:
        assert w.present() == ["/dev/sdb"]


def test_a_stick_arrives_with_its_medium_a_reader_changes_it(tmp_path):
    root = tree(tmp_path)
    disk(root, "sdb", size=0)                              # a reader, empty at start
    with Watcher(method="poll", sysfs_root=root) as w:
        disk(root, "sdc", port=2, removable=0)             # a stick plugged in
        disk(root, "sdb", size=131072)                     # a card pushed into the reader
        changes = {c.name: c for c in w.scan()}
        assert changes["sdc"].inserted and changes["sdb"].inserted
        assert w.hint("sdc").arrived_with_medium and not w.hint("sdc").medium_changed
        assert w.hint("/dev/sdb").medium_changed and not w.hint("sdb").arrived_with_medium
        # the stick pulled and another plugged in under the same name: arrived again, no reader
        unplug(root, "sdc")
        assert [c.inserted for c in w.scan() if c.name == "sdc"] == [False]
        disk(root, "sdc", port=2, removable=0, size=65536)
        assert [c.inserted for c in w.scan() if c.name == "sdc"] == [True]
        assert w.hint("sdc").arrived_with_medium and not w.hint("sdc").medium_changed


def test_a_stick_in_the_port_a_reader_left_is_a_stick(tmp_path):
    root = tree(tmp_path)
    disk(root, "sdb", size=0)                              # a reader on port 1, empty
    with Watcher(method="poll", sysfs_root=root) as w:
        disk(root, "sdb", size=131072)                     # a card pushed in: a reader
        w.scan()
        assert w.hint("sdb").medium_changed
        unplug(root, "sdb")                                # the reader unplugged
        w.scan()
        disk(root, "sdb", removable=0, size=65536)         # a stick in the same port
        assert [c.inserted for c in w.scan() if c.name == "sdb"] == [True]
        assert w.hint("sdb").arrived_with_medium and not w.hint("sdb").medium_changed


def test_a_card_swapped_in_a_reader_is_seen_at_its_own_size(tmp_path):
    """What a 6.1 kernel did under QEMU (a usb-bot reader, its card swapped over QMP): at its next
    poll it raised diskseq and said DISK_MEDIA_CHANGE, but sysfs kept the old card's size until the
    device was opened. A drawer that read the size then tested a 48 MiB "card" that was the
    32 MiB one. The watcher opens the device (revalidate) on a new diskseq before it reads."""
    root = tree(tmp_path)
    real = disk(root, "sda", size=98304, diskseq=1)          # 48 MiB in the reader at start
    opened = []

    def kernel_open(name):                                   # sd_open reads the new medium's capacity
        opened.append(name)
        put(os.path.join(real, "size"), "65536")

    with Watcher(method="poll", sysfs_root=root, revalidate=kernel_open) as w:
        assert w.scan() == [] and opened == []
        put(os.path.join(real, "diskseq"), "2")              # the poll saw the swap; size still 98304
        (change,) = w.scan()
        assert opened == ["sda"] and change.inserted and change.size == 65536 * 512
        assert w.scan() == [] and opened == ["sda"]          # that medium is known now: no second card
        put(os.path.join(real, "diskseq"), "3")              # another card of the same size
        (change,) = w.scan()
        assert change.size == 65536 * 512 and opened == ["sda", "sda"]
        assert w.hint("sda").medium_changed
