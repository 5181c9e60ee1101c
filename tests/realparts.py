"""Real parts for tests: loop devices, filesystems and the CLI in a child process, always cleaned up.

A module with a unique name (not conftest) so test directories can import it without clashing."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile

ROOT = os.geteuid() == 0


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


@contextlib.contextmanager
def loop_device(size: int, directory: str | None = None, direct_io: bool = False):
    """A loop device over a sparse file; detached and removed afterwards, whatever happens."""
    d = tempfile.mkdtemp(prefix="cardbench-test-loop-", dir=directory)
    img = os.path.join(d, "disk.img")
    with open(img, "wb") as f:
        f.truncate(size)
    dev = None
    try:
        args = ["losetup", "-f", "--show"] + (["--direct-io=on"] if direct_io else []) + [img]
        dev = sh(*args).stdout.strip()
        yield dev
    finally:
        if dev:
            sh("losetup", "-d", dev, check=False)
        os.unlink(img)
        os.rmdir(d)


@contextlib.contextmanager
def mounted(dev: str, fstype: str = "ext4", options: str | None = None):
    """mkfs + mount in a temporary directory; unmounted afterwards, whatever happens."""
    mkfs = {"ext4": ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]}[fstype]
    sh(*mkfs, dev)
    mnt = tempfile.mkdtemp(prefix="cardbench-test-mnt-")
    mounted_ok = False
    try:
        sh("mount", *(["-o", options] if options else []), dev, mnt)
        mounted_ok = True
        yield mnt
    finally:
        if mounted_ok:
            if sh("umount", mnt, check=False).returncode != 0:
                sh("umount", "-l", mnt, check=False)
        os.rmdir(mnt)



def run_cli(*args: str, input: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real command line in a child process (as a user would)."""
    env = dict(os.environ)
    env.pop("CARDBENCH_DEBUG", None)
    # the child runs the same cardbench as the tests: this checkout's src/
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "cardbench", *args], capture_output=True, text=True,
                          input=input, timeout=timeout, env=env)


def sha256_device(dev: str, card=None) -> str:
    """sha256 of a whole device, page cache dropped first; read unpaced when ``card`` (an emulated
    card) is given, so a slow card is hashed quickly."""
    def read() -> str:
        h = hashlib.sha256()
        fd = os.open(dev, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while True:
                b = os.read(fd, 8 << 20)
                if not b:
                    break
                h.update(b)
        finally:
            os.close(fd)
        return h.hexdigest()
    if card is None:
        return read()
    with card.unpaced():
        return read()


def emulator_leftovers(prefix: str | os.PathLike) -> list[str]:
    """Loop devices, mounts and emulator server processes under ``prefix`` (ours only: others may
    run their own emulators on this machine at the same time)."""
    from cardbench.emulate import system
    prefix = os.path.realpath(prefix).rstrip("/") + "/"
    found = [f"loop {lo.device} -> {lo.backing_file}" for lo in system.loops()
             if lo.backing_file.startswith(prefix)]
    found += [f"mount {m.mountpoint} ({m.fstype})" for m in system.mounts()
              if (m.mountpoint + "/").startswith(prefix)]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"cardbench.emulate.server" in args and any(a.startswith(os.fsencode(prefix)) for a in args) \
                and system.process_alive(int(pid)):
            found.append(f"server process {pid}")
    return found


def can_emulate() -> bool:
    """Root, FUSE, loop devices and libfuse3: what emulated cards need."""
    import shutil
    if not ROOT or not os.path.exists("/dev/fuse") or not shutil.which("losetup"):
        return False
    try:
        from cardbench.emulate import check_environment
        check_environment()
    except Exception:  # noqa: BLE001 - any reason means: skip
        return False
    return True


@contextlib.contextmanager
def emulators_under(directory: str | os.PathLike):
    """Emulators started inside live under ``directory`` ($CARDBENCH_EMULATE_TMPDIR); afterwards
    none of theirs may be left (loop devices, mounts, server processes)."""
    old = os.environ.get("CARDBENCH_EMULATE_TMPDIR")
    os.environ["CARDBENCH_EMULATE_TMPDIR"] = str(directory)
    try:
        yield directory
    finally:
        if old is None:
            os.environ.pop("CARDBENCH_EMULATE_TMPDIR", None)
        else:
            os.environ["CARDBENCH_EMULATE_TMPDIR"] = old
    assert emulator_leftovers(directory) == [], "emulator leftovers (loop devices, mounts or servers)"
