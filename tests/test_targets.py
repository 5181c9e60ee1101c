"""What a path is, asked once (cardbench.target.open_target): one wording per bad target, the same
for every command that takes one (run, verify, readers --probe, identify), one line, the
documented exit code (2 bad arguments, 3 the target cannot be tested)."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile

import pytest

from cardbench.engine.errors import cannot_use, io_error, shown
from cardbench.errors import TargetError, UsageError
from cardbench.session import say_gone
from cardbench.target import DeviceTarget, DirTarget, open_target
from realparts import run_cli, sh


def one_line(p) -> str:
    assert "Traceback" not in p.stderr, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def _commands(path: str) -> list[list[str]]:
    """Each command that takes a target, given ``path``."""
    return [["run", path, "--no-save"], ["verify", path, "--no-save"],
            ["readers", "--probe", path, "/dev/null-other"], ["identify", path]]


# -- the errno table's words, in milliseconds ---------------------------------------------------

@pytest.mark.parametrize("err,words", [
    (errno.ENOENT, "no such file or directory"),
    (errno.ENOMEDIUM, "no medium (the card was removed?)"),
    (errno.EACCES, "permission denied"),
    (errno.EROFS, "the filesystem is read-only"),
    (errno.ENOSPC, "the filesystem is full"),
    (errno.ENXIO, "the device is gone (removed?)"),
])
def test_what_stops_a_target_is_worded_by_the_one_errno_table(err, words):
    e = cannot_use(OSError(err, os.strerror(err)), "/dev/sdz")
    assert isinstance(e, TargetError) and e.exit_code == 3
    assert e.message == f"/dev/sdz: {words}"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a loop device")
def test_a_device_that_went_away_is_gone_by_the_one_rule(tmp_path):
    """Target.gone, the one rule for "the device went away" (issue 24), on a real loop device:
    there, not gone (whatever EIO or ENOSPC its requests met); detached (size 0, as a pulled
    stick's disk), gone; an errno of engine.errors.GONE is gone whatever sysfs says; a directory
    on a filesystem without a device, or an image, is never gone by sysfs."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(8 << 20)
    dev = sh("losetup", "-f", "--show", str(img)).stdout.strip()
    try:
        t = open_target(dev, kinds=("device",))
        assert isinstance(t, DeviceTarget)
        assert not t.gone() and not t.gone(errno.EIO) and not t.gone(errno.ENOSPC, wait=0.2)
        assert t.gone(errno.ENODEV) and t.gone(errno.ENOMEDIUM)
        fault = io_error(OSError(errno.EIO, "EIO"), f"{dev} at byte 4096", op="read", offset=4096)
        say_gone(fault, t)                # a card still there: its EIO stays an I/O error
        assert fault.message == f"{dev} at byte 4096: I/O error (the card failed or was removed)"
    finally:
        sh("losetup", "-d", dev)          # once only: a freed number may be a parallel test's at once
    assert t.gone(errno.EIO)
    say_gone(fault, t)                    # what `run` says of a device that went away
    assert fault.message == f"{dev} at byte 4096: the device is gone (removed?)"
    assert not open_target(str(tmp_path), write=True).gone(errno.EIO)
    assert open_target(str(img)).gone() is False


def test_a_path_is_shown_as_given_and_bytes_that_are_not_utf8_escaped():
    assert shown("/media/my card") == "/media/my card"
    assert shown(os.fsdecode(b"/media/caf\xe9")) == "/media/caf\\xe9"


def test_open_target_resolves_once(tmp_path):
    t = open_target(str(tmp_path), write=True)
    assert isinstance(t, DirTarget) and t.kind == "directory" and t.filesystem.type == t.fstype
    assert t.space().total > 0 and t.lock_key
    assert os.listdir(tmp_path) == []                        # the probe file is gone
    f = tmp_path / "image.bin"
    f.write_bytes(b"\0" * 8192)
    img = open_target(str(f))
    assert img.kind == "image" and img.space().total == 8192 and img.filesystem is None
    with pytest.raises(TargetError, match="is a regular file, not a directory on the mounted card$"):
        open_target(str(f), kinds=("directory",))
    with pytest.raises(UsageError, match="no target given"):
        open_target("")


# -- one line, the same on every command --------------------------------------------------------

@pytest.mark.parametrize("name", ["no-such-card", "my card", os.fsdecode(b"caf\xe9-card")])
def test_a_missing_target_is_one_line_on_every_command(tmp_path, name):
    path = str(tmp_path / name)
    for args in _commands(path):
        p = run_cli(*args)
        assert p.returncode == 3, (args, p.stderr)
        assert one_line(p) == f"cardbench: {shown(path)}: no such file or directory", args


def test_a_regular_file_where_a_directory_or_device_is_needed(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    for args in _commands(str(f))[:3]:
        p = run_cli(*args)
        assert p.returncode == 3, (args, p.stderr)
        line = one_line(p)
        assert line.startswith(f"cardbench: {f} is a regular file, not a "), line


@contextlib.contextmanager
def tmpfs(options: str):
    mnt = tempfile.mkdtemp(prefix="cardbench-test-tmpfs-")
    try:
        sh("mount", "-t", "tmpfs", "-o", options, "tmpfs", mnt)
        try:
            yield mnt
        finally:
            sh("umount", mnt, check=False)
    finally:
        os.rmdir(mnt)


def test_a_read_only_directory():
    with tmpfs("ro,size=8m") as mnt:
        for args in _commands(mnt)[:2]:
            p = run_cli(*args)
            assert p.returncode == 3 and one_line(p) == f"cardbench: {mnt}: the filesystem is read-only", args


def test_a_full_filesystem():
    with tmpfs("size=4m") as mnt:
        sh("dd", "if=/dev/zero", f"of={mnt}/fill", "bs=64k", check=False)
        p = run_cli("run", mnt, "--no-save")
        assert p.returncode == 3 and "too little free space" in one_line(p)
        p = run_cli("run", mnt, "--no-save", "--size", "1MB")
        assert p.returncode == 3 and "too little free space for a 1.0 MB test file" in one_line(p)
        assert os.listdir(mnt) == ["fill"]


@contextlib.contextmanager
def partitioned_loop():
    """(whole device, its partition): devices_helpers' loop device with an MBR (partx where the
    kernel does not scan the table itself); skips where no partition appears."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "devices_helpers", os.path.join(os.path.dirname(__file__), "devices", "devices_helpers.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    with helpers.loop_device(32 << 20, partitioned=True) as (dev, _img):
        yield dev, dev + "p1"


def test_a_partition_where_a_whole_device_is_needed():
    with partitioned_loop() as (dev, part):
        t = open_target(part)
        assert isinstance(t, DeviceTarget) and t.partition_of == dev
        assert open_target(dev).partition_of is None
        want = f"cardbench: {part} is a partition of {dev}; give the whole device"
        for args in (["run", part, "--no-save"], ["verify", part, "--no-save"], ["readers", "--probe", part, dev]):
            p = run_cli(*args)
            assert p.returncode == 2 and one_line(p) == want, (args, p.stderr)


def test_a_partition_is_refused_with_one_wording_by_every_library_call(monkeypatch):
    """The kernel here may not scan partition tables (then the test above skips): the rule is
    open_target's (the library functions take the target it opened), so a loop device said to be
    a partition shows it for run, verify and probe, from the command line and from Python."""
    from cardbench.workloads.shared import open_devices
    from realparts import loop_device
    from test_exit_codes import _main
    with loop_device(16 << 20) as dev, loop_device(16 << 20) as other:
        monkeypatch.setattr(DeviceTarget, "partition_of", property(lambda self: "/dev/sdz"))
        want = f"{dev} is a partition of /dev/sdz; give the whole device"
        for argv in (["run", dev], ["verify", dev], ["verify", "--full", "--destructive", dev]):
            code, err = _main(argv)
            assert code == 2 and err.strip() == f"cardbench: {want}", (argv, err)
        for call in (lambda: open_target(dev, kinds=("device",), whole_device=True),
                     lambda: open_devices([dev, other])):
            with pytest.raises(UsageError) as e:
                call()
            assert e.value.message == want and e.value.exit_code == 2


def test_a_directory_named_with_spaces_and_bytes_that_are_not_utf8_is_tested_and_stored(tmp_path):
    """The lock file, the result document and the store take the path as text (\\xNN for such bytes)."""
    with tmpfs("size=32m") as mnt:
        d = os.path.join(mnt, os.fsdecode(b"caf\xe9 card"))
        os.mkdir(d)
        db = str(tmp_path / "r.sqlite3")
        p = run_cli("run", d, "--size", "1MB", "--runs", "1", "--db", db, "--json")
        assert p.returncode == 0, p.stderr
        assert '"path": "' + mnt + '/caf\\\\xe9 card"' in p.stdout
        assert os.listdir(d) == []


def test_a_target_knows_when_its_filesystem_went_away(tmp_path):
    """Unmounted midway, a card's mount point is a directory of the filesystem below: the target
    says so (a directory fill or a test file must not land on the host's disk)."""
    from cardbench.verify.full import verify_full
    with tmpfs("size=16m") as mnt:
        t = open_target(mnt, write=True)
        assert t.moved() is None
        sh("umount", mnt)
        assert "no longer on the filesystem that was opened" in t.moved()
        doc = verify_full(t, state_dir=str(tmp_path / "state"))
        assert doc["complete"] is False and "no longer on the filesystem" in doc["error"]
        assert os.listdir(mnt) == []                       # nothing written below the mount point
