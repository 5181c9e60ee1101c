"""Host plumbing for emulated cards: commands, loop devices, mounts, FUSE connections, cleanup.

Everything here is best-effort-but-bounded: every command has a timeout, and the teardown
functions keep going after a failure so that as much as possible is released.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cardbench.errors import CardbenchError, EnvironmentMissing

#: Seconds a single umount / losetup / fusermount may take before we escalate.
COMMAND_TIMEOUT = 20.0


class CommandFailed(CardbenchError):
    """A host command (losetup, mount, mkfs ...) failed."""


def run(args: list[str], *, timeout: float = COMMAND_TIMEOUT, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command quietly; raise CommandFailed with its stderr on failure (if ``check``)."""
    try:
        proc = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise EnvironmentMissing(f"{args[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"{' '.join(args)} did not finish within {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise CommandFailed(f"{' '.join(args)} failed: {msg[-1] if msg else f'exit code {proc.returncode}'}")
    return proc


def check_environment() -> None:
    """Raise EnvironmentMissing (one line) unless we can run emulated cards here."""
    if os.geteuid() != 0:
        raise EnvironmentMissing("emulated cards need root (loop devices and FUSE mounts)")
    if not os.path.exists("/dev/fuse"):
        raise EnvironmentMissing("emulated cards need FUSE: /dev/fuse is missing (modprobe fuse?)")
    if not os.path.exists("/dev/loop-control") and not os.path.exists("/dev/loop0"):
        raise EnvironmentMissing("emulated cards need loop devices: /dev/loop-control is missing (modprobe loop?)")
    for tool, package in (("losetup", "util-linux"), ("fusermount3", "fuse3"), ("mount", "util-linux"),
                          ("umount", "util-linux")):
        if shutil.which(tool) is None:
            raise EnvironmentMissing(f"emulated cards need {tool} (install {package})")
    if ctypes.util.find_library("fuse3") is None:
        raise EnvironmentMissing("emulated cards need libfuse3 (install libfuse3-3 / fuse3)")


def load_mfusepy():
    """mfusepy bound to libfuse3, whatever else is installed.

    mfusepy looks for ``libfuse.so.2`` before ``libfuse3`` (``find_library('fuse')`` first), and
    exfat-fuse, ntfs-3g or any AppImage runtime bring libfuse2 beside libfuse3 on most desktops;
    the emulator is written for libfuse3's API (``fuse_conn_info.max_read``, ``init_with_config``),
    so it names the library explicitly (mfusepy reads ``FUSE_LIBRARY_PATH``) before the import."""
    if not os.environ.get("FUSE_LIBRARY_PATH"):
        path = ctypes.util.find_library("fuse3")
        if path is None:
            raise EnvironmentMissing("emulated cards need libfuse3 (install libfuse3-3 / fuse3)")
        os.environ["FUSE_LIBRARY_PATH"] = path
    import mfusepy  # function-level: it loads libfuse when imported, after FUSE_LIBRARY_PATH is set above
    return mfusepy


# -- mounts -------------------------------------------------------------------------------

def canon(path: str | os.PathLike) -> str:
    """An absolute, symlink-free path *without touching its last component*: calling
    realpath on a hung FUSE mountpoint would stat it and block forever."""
    path = os.path.abspath(os.fspath(path)).rstrip("/") or "/"
    head, tail = os.path.split(path)
    return os.path.join(os.path.realpath(head), tail) if tail else head


@dataclass(frozen=True)
class MountEntry:
    major: int
    minor: int
    mountpoint: str
    fstype: str
    source: str

    @property
    def kernel_dev(self) -> int:
        """The kernel's dev_t encoding (MKDEV), as used in /sys/fs/fuse/connections."""
        return (self.major << 20) | self.minor


def _unescape(field: str) -> str:
    out, i = [], 0
    while i < len(field):
        code = field[i + 1:i + 4]
        if field[i] == "\\" and len(code) == 3 and all(c in "01234567" for c in code):
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts() -> list[MountEntry]:
    """Parse /proc/self/mountinfo."""
    entries = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            major, minor = (int(x) for x in parts[2].split(":"))
            entries.append(MountEntry(major, minor, _unescape(parts[4]), parts[sep + 1], _unescape(parts[sep + 2])))
    return entries


def is_mounted(path: str | os.PathLike) -> bool:
    path = canon(path)
    return any(m.mountpoint == path for m in mounts())


def fuse_mount(mountpoint: str | os.PathLike) -> MountEntry | None:
    path = canon(mountpoint)
    for m in reversed(mounts()):
        if m.mountpoint == path and m.fstype.startswith("fuse"):
            return m
    return None


#: where the kernel's FUSE control filesystem shows each connection (Documentation/filesystems/fuse.rst)
FUSECTL = "/sys/fs/fuse/connections"


def abort_fuse(mountpoint: str | os.PathLike) -> bool:
    """Abort the FUSE connection of a mount: every pending and future request fails (ENOTCONN).

    The last resort when the server is hung (stopped, deadlocked): it unblocks umount and losetup.
    """
    m = fuse_mount(mountpoint)
    if m is None:
        return False
    # fusectl is mounted by systemd, not by the kernel: without it (a container, a minimal VM:
    # seen on the CI machines) there is no connection to abort, so mount it for the abort and
    # leave the machine as it was found
    ours = not os.path.ismount(FUSECTL) and run(["mount", "-t", "fusectl", "fusectl", FUSECTL],
                                                 check=False).returncode == 0
    try:
        Path(f"{FUSECTL}/{m.kernel_dev}/abort").write_text("1")
        return True
    except OSError:
        return False
    finally:
        if ours:
            run(["umount", FUSECTL], check=False)


def umount(path: str | os.PathLike, *, timeout: float = COMMAND_TIMEOUT, lazy_fallback: bool = True) -> None:
    """Unmount ``path`` (all stacked mounts on it); lazily if it stays busy."""
    path = canon(path)
    for _ in range(8):
        if not is_mounted(path):
            return
        proc = None
        try:
            proc = run(["umount", path], timeout=timeout, check=False)
        except CommandFailed:
            pass
        if proc is not None and proc.returncode == 0:
            continue
        if not is_mounted(path):
            return
        if lazy_fallback:
            run(["umount", "-l", path], timeout=timeout, check=False)
        else:
            raise CommandFailed(f"cannot unmount {path}: {(proc.stderr.strip() if proc else 'timeout')}")


# -- loop devices ----------------------------------------------------------------------------

@dataclass(frozen=True)
class LoopInfo:
    device: str
    backing_file: str
    major: int
    minor: int
    dio: bool


def loops() -> list[LoopInfo]:
    """All attached loop devices (from sysfs)."""
    out = []
    base = Path("/sys/block")
    for d in sorted(base.glob("loop*")):
        try:
            backing = (d / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue  # not attached
        try:
            major, minor = (int(x) for x in (d / "dev").read_text().split(":"))
            dio = (d / "loop" / "dio").read_text().strip() == "1"
        except OSError:
            continue
        out.append(LoopInfo(f"/dev/{d.name}", backing, major, minor, dio))
    return out


def loops_under(directory: str | os.PathLike) -> list[LoopInfo]:
    """Loop devices whose backing file lies under ``directory`` (e.g. our FUSE mountpoint)."""
    prefix = canon(directory).rstrip("/") + "/"
    return [lo for lo in loops() if lo.backing_file.startswith(prefix)]


def loop_info(device: str) -> LoopInfo | None:
    for lo in loops():
        if lo.device == device:
            return lo
    return None


def still_ours(devices, directory: str | os.PathLike) -> list[str]:
    """Those of ``devices`` still backed by a file under ``directory``. A loop device number is
    freed when it is detached and another process (a parallel test) may get it at once: a device
    known only by its number may be someone else's by now, and is never detached by that alone."""
    prefix = canon(directory).rstrip("/") + "/"
    out = []
    for d in devices:
        lo = loop_info(d)
        if lo is not None and lo.backing_file.startswith(prefix):
            out.append(d)
    return out


def attach_loop(path: str | os.PathLike) -> str:
    """``losetup -f --show --direct-io=on path``; checks direct I/O is really on."""
    proc = run(["losetup", "-f", "--show", "--direct-io=on", str(path)])
    device = proc.stdout.strip()
    if not device.startswith("/dev/loop"):
        raise CommandFailed(f"losetup printed no loop device for {path}: {proc.stdout!r}")
    info = loop_info(device)
    if info is None or not info.dio:
        detach_loop(device)
        raise EnvironmentMissing(f"{device} refused direct I/O on {path}: emulated card would not be paced")
    return device


def detach_loop(device: str, *, timeout: float = COMMAND_TIMEOUT) -> None:
    """Unmount everything mounted from ``device`` and detach it (deferred if still in use)."""
    info = loop_info(device)
    if info is None:
        return
    for m in reversed(mounts()):
        if (m.major, m.minor) == (info.major, info.minor):
            try:
                umount(m.mountpoint, timeout=timeout)
            except CardbenchError:
                pass
    run(["losetup", "-d", device], timeout=timeout, check=False)
    # a device still held for a moment (udev probing it after the umount) is only marked for
    # autoclear by losetup -d: wait until it is really free (or holds another backing file)
    deadline = time.monotonic() + min(timeout, 5.0)
    while time.monotonic() < deadline:
        now = loop_info(device)
        if now is None or now.backing_file != info.backing_file:
            return
        time.sleep(0.05)


def release_mountpoint(mountpoint: str | os.PathLike, *, devices: Sequence[str] = (), grace: float = COMMAND_TIMEOUT) -> list[str]:
    """Detach every loop device backed by files under a FUSE ``mountpoint`` (plus ``devices``),
    unmounting filesystems on them first. If the FUSE server does not answer within ``grace``
    seconds, abort its connection so I/O fails fast, and retry. Returns problems (empty if clean).
    """
    problems: list[str] = []
    targets = {lo.device for lo in loops_under(mountpoint)} | set(still_ours(devices, mountpoint))
    for device in sorted(targets):
        try:
            detach_loop(device, timeout=grace)
        except CardbenchError:
            if abort_fuse(mountpoint):
                try:
                    detach_loop(device, timeout=grace)
                except CardbenchError as e:
                    problems.append(e.message)
    still = sorted({lo.device for lo in loops_under(mountpoint)} | set(still_ours(devices, mountpoint)))
    if still:
        # Still attached: perhaps a hung server. Abort and retry once.
        abort_fuse(mountpoint)
        for device in still:
            try:
                detach_loop(device, timeout=grace)
            except CardbenchError as e:
                problems.append(e.message)
    return problems


def unmount_fuse(mountpoint: str | os.PathLike, *, timeout: float = COMMAND_TIMEOUT) -> None:
    """``fusermount3 -u`` (lazy if busy; abort the connection if it still hangs)."""
    for attempt in ("-u", "-uz", "abort"):
        if fuse_mount(mountpoint) is None:
            return
        if attempt == "abort":
            abort_fuse(mountpoint)
            run(["umount", "-l", canon(mountpoint)], timeout=timeout, check=False)
            return
        try:
            run(["fusermount3", attempt, str(mountpoint)], timeout=timeout, check=False)
        except CardbenchError:
            abort_fuse(mountpoint)


def remove_tree(path: str | os.PathLike) -> None:
    """Remove a work directory, never descending into something still mounted (a hung FUSE
    mount would block, a live one would be emptied)."""
    path = canon(path)
    mounted = {m.mountpoint for m in mounts()}

    def remove(d: str) -> bool:
        """Remove ``d`` recursively; False if something had to stay."""
        if d in mounted:
            return False
        clean = True
        try:
            entries = list(os.scandir(d))
        except OSError:
            return False
        for e in entries:
            if e.path in mounted:
                clean = False
            elif e.is_dir(follow_symlinks=False):  # d_type from readdir: no stat
                clean = remove(e.path) and clean
            else:
                try:
                    os.unlink(e.path)
                except OSError:
                    clean = False
        if clean:
            try:
                os.rmdir(d)
            except OSError:
                clean = False
        return clean

    if any(m == path or m.startswith(path + "/") for m in mounted) or os.path.isdir(path):
        remove(path)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def is_server_process(pid: int, workdir: str) -> bool:
    """True if ``pid`` is a live emulator server for ``workdir`` (guards against reused pids)."""
    if not process_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return b"cardbench.emulate.server" in args and os.fsencode(os.path.realpath(workdir)) in args


def wait_pid_gone(pid: int, timeout: float, popen: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if popen is not None:
            if popen.poll() is not None:
                return True
        elif not process_alive(pid):
            return True
        time.sleep(0.02)
    return False


def stop_process(pid: int, popen: subprocess.Popen | None = None, *, timeout: float = 5.0) -> None:
    """Wait for ``pid`` to exit; SIGTERM then SIGKILL if it does not."""
    if wait_pid_gone(pid, timeout, popen):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if wait_pid_gone(pid, timeout, popen):
            return
