"""A booted Debian kernel under QEMU (TCG) with emulated card hardware, for the VM test tier.

Design: the guest boots the packaged kernel (``/boot/vmlinuz-*``, Debian's ``linux-image-amd64``)
with a small initramfs built here from that kernel's own modules and ``busybox-static``: it loads
virtio and 9p, mounts the *host's root filesystem read-only over 9p* (so the guest runs the
host's Python and this very checkout, nothing to install or copy), puts tmpfs on /tmp, /run,
/var/tmp, /mnt, /media and a tmpfs home, and starts ``guest_agent.py``. The agent answers
commands sent from the host on a virtio-serial port (one JSON line per command: argv, timeout ->
rc, stdout, stderr; each request carries an id its reply carries back, and the late reply of a
command the host gave up on is dropped), so one boot serves many checks. Hotplug is driven from
the host over QMP (``device_add``/``device_del``, ``eject``/``blockdev-change-medium``). The guest has no network
device. Device images are sparse files in a temporary directory removed on close; QEMU is killed
on close whatever happened (use as a context manager or a fixture with a finalizer).

Why not virtme-ng: it needs its own Python package and its init (virtme-ng-init, Rust) from
PyPI, and picks the devices and the root itself; what this tier needs (SDHCI, usb-storage,
uas, AHCI, throttle groups, QMP) is a handful of QEMU arguments, and the initramfs is 60 lines.
Why 9p and not virtiofs: 9p is built into QEMU (no virtiofsd daemon to start and kill).
"""

from __future__ import annotations

import glob
import io
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
QEMU = "qemu-system-x86_64"
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
#: modules the initramfs loads (with their dependencies) to mount the host root and reach the agent
INITRD_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "virtio_console")
#: what the guest loads once on the host's root: the drivers of the emulated hardware
GUEST_MODULES = ("sd_mod", "sg", "ahci", "ata_piix", "libata", "mmc_block", "sdhci_pci", "xhci_pci",
                 "ehci_pci", "usb_storage", "uas", "vfat", "exfat", "nls_cp437", "nls_iso8859_1", "nls_utf8")


def find_kernel() -> tuple[str | None, str | None]:
    """(vmlinuz path, kernel release) of the newest packaged kernel whose modules are installed."""
    found = []
    for path in glob.glob("/boot/vmlinuz-*"):
        release = os.path.basename(path)[len("vmlinuz-"):]
        if os.path.isfile(f"/lib/modules/{release}/modules.dep") and os.access(path, os.R_OK):
            found.append((path, release))
    found.sort(key=lambda t: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", t[1])])
    return found[-1] if found else (None, None)


def missing() -> list[str]:
    """What this host lacks to run the VM tier, in words (empty: it can run)."""
    out = []
    if shutil.which(QEMU) is None:
        out.append(f"{QEMU} (apt-get install qemu-system-x86)")
    kernel, _ = find_kernel()
    if kernel is None:
        out.append("a kernel image with its modules in /boot and /lib/modules (apt-get install linux-image-amd64)")
    if not any(os.access(b, os.X_OK) for b in BUSYBOX_CANDIDATES):
        out.append("busybox (apt-get install busybox-static)")
    if os.geteuid() != 0:
        out.append("root (the guest reads the host's root filesystem, and /boot/vmlinuz is root-only on Debian)")
    return out


# --- the initramfs --------------------------------------------------------------------------------


def _module_order(release: str, names: tuple[str, ...], modules_root: str = "/lib/modules") -> list[str]:
    """Relative paths of ``names`` and their dependencies, dependencies first (modules.dep)."""
    base = os.path.join(modules_root, release)
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    with open(os.path.join(base, "modules.dep")) as f:
        for line in f:
            mod, _, rest = line.partition(":")
            deps[mod] = rest.split()
            by_name[os.path.basename(mod).split(".ko")[0].replace("-", "_")] = mod
    builtin = set()
    try:
        with open(os.path.join(base, "modules.builtin")) as f:
            builtin = {os.path.basename(x.strip()).split(".ko")[0].replace("-", "_") for x in f}
    except OSError:
        pass
    order: list[str] = []

    def add(mod: str) -> None:
        for d in reversed(deps.get(mod, [])):
            add(d)
        if mod not in order:
            order.append(mod)

    for n in names:
        key = n.replace("-", "_")
        if key in builtin:
            continue
        if key not in by_name:
            raise FileNotFoundError(f"module {n} not found for kernel {release}")
        add(by_name[key])
    return order


def _cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A newc cpio archive of (name, mode, data) entries (directories: data b"")."""
    out = io.BytesIO()
    ino = 1
    for name, mode, data in entries + [("TRAILER!!!", 0, b"")]:
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08X}" for v in (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
        out.write(hdr.encode() + nb)
        out.write(b"\0" * ((4 - (110 + len(nb)) % 4) % 4))
        out.write(data)
        out.write(b"\0" * ((4 - len(data) % 4) % 4))
        ino += 1
    return out.getvalue()


INIT_SCRIPT = r"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
for m in $(/bin/busybox cat /modules.order); do /bin/busybox insmod /$m || echo "initrd: insmod $m failed"; done
if ! /bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 hostroot /newroot; then
  echo "initrd: cannot mount the host root over 9p"; /bin/busybox poweroff -f
fi
INIT=$(/bin/busybox sed -n 's/.*cardbench.init=\([^ ]*\).*/\1/p' /proc/cmdline)
for d in proc sys dev; do /bin/busybox mount --move /$d /newroot/$d; done
exec /bin/busybox switch_root /newroot /bin/sh "$INIT"
"""


def build_initramfs(release: str, out_path: str) -> str:
    """Write the initramfs for kernel ``release`` to ``out_path`` (busybox, 9p and virtio modules)."""
    busybox = next(b for b in BUSYBOX_CANDIDATES if os.access(b, os.X_OK))
    entries: list[tuple[str, int, bytes]] = [("bin", stat.S_IFDIR | 0o755, b""), ("dev", stat.S_IFDIR | 0o755, b""),
                                             ("proc", stat.S_IFDIR | 0o755, b""), ("sys", stat.S_IFDIR | 0o755, b""),
                                             ("newroot", stat.S_IFDIR | 0o755, b"")]
    with open(busybox, "rb") as f:
        entries.append(("bin/busybox", stat.S_IFREG | 0o755, f.read()))
    entries.append(("init", stat.S_IFREG | 0o755, INIT_SCRIPT.encode()))
    order = _module_order(release, INITRD_MODULES)
    made = set()
    for rel in order:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if d not in made:
                made.add(d)
                entries.append((d, stat.S_IFDIR | 0o755, b""))
        with open(f"/lib/modules/{release}/{rel}", "rb") as f:
            entries.append((rel, stat.S_IFREG | 0o644, f.read()))
    entries.append(("modules.order", stat.S_IFREG | 0o644, " ".join(order).encode()))
    with open(out_path, "wb") as f:
        f.write(_cpio_newc(entries))
    return out_path


# --- QMP --------------------------------------------------------------------------------------------


class Qmp:
    """A minimal QMP client on a unix socket: ``cmd(name, **args)`` returns ``return`` or raises."""

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.events: list[dict] = []
        self._read()                       # greeting
        self.cmd("qmp_capabilities")

    def _read(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("QMP closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def wait_event(self, name: str, timeout: float = 30.0, **match: Any) -> dict:
        """The next QMP event ``name`` whose data holds ``match`` (events seen before count)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("event") == name and all((ev.get("data") or {}).get(k) == v for k, v in match.items()):
                    return self.events.pop(i)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no QMP event {name} {match}")
            self.sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                self.events.append(self._read())
            except socket.timeout:
                pass

    def cmd(self, name: str, **args: Any) -> Any:
        msg: dict[str, Any] = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._read()
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                raise RuntimeError(f"QMP {name}: {reply['error'].get('desc')}")
            return reply.get("return")

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# --- the guest ----------------------------------------------------------------------------------------


def _die_with_parent() -> None:
    """In the QEMU child: be killed when the test process dies, even by SIGKILL (PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


@dataclass
class Drive:
    """A disk image for the guest: ``size`` bytes, optional throttle (bytes/s) or throttle group."""

    id: str
    size: int = 128 << 20
    read_bps: int | None = None
    write_bps: int | None = None
    group: str | None = None
    path: str | None = None


@dataclass
class Reply:
    rc: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.stdout)

    def lines(self) -> list[Any]:
        return [json.loads(x) for x in self.stdout.splitlines() if x.strip().startswith("{")]


@dataclass
class Guest:
    """A booted guest (see the module docstring). ``devices``: ``-device`` argument strings;
    ``drives``: images the devices name by ``drive=<id>``; ``extra``: further QEMU arguments."""

    drives: list[Drive] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    memory_mb: int = 768
    boot_timeout: float = 120.0
    tmpdir: str | None = None
    proc: subprocess.Popen | None = None
    qmp: Qmp | None = None
    agent: socket.socket | None = None
    boot_seconds: float | None = None
    #: seconds the host waits for a reply beyond the guest's own timeout of the command
    reply_slack: float = 30.0
    #: replies dropped because they answered a request the host no longer waited for
    stale_replies: int = 0
    _buf: bytes = b""
    _seq: int = 0

    # -- life --------------------------------------------------------------------------------------
    def __enter__(self) -> "Guest":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def image(self, drive: Drive) -> str:
        assert self.tmpdir is not None
        if drive.path is None:
            drive.path = os.path.join(self.tmpdir, f"{drive.id}.img")
            with open(drive.path, "wb") as f:
                f.truncate(drive.size)
        return drive.path

    def drive_arg(self, d: Drive) -> str:
        """The ``-drive``/``blockdev`` style argument for ``d`` (raw file, no cache, throttled)."""
        arg = f"if=none,id={d.id},file={self.image(d)},format=raw,cache=none,aio=threads"
        if d.read_bps:
            arg += f",throttling.bps-read={d.read_bps}"
        if d.write_bps:
            arg += f",throttling.bps-write={d.write_bps}"
        if d.group:
            arg += f",throttling.group={d.group}"
        return arg

    def start(self) -> None:
        kernel, release = find_kernel()
        if kernel is None:
            raise RuntimeError("no kernel image")
        self.tmpdir = tempfile.mkdtemp(prefix="cardbench-vm-")
        initrd = build_initramfs(release, os.path.join(self.tmpdir, "initrd.cpio"))
        agent_sock = os.path.join(self.tmpdir, "agent.sock")
        qmp_sock = os.path.join(self.tmpdir, "qmp.sock")
        self.console = os.path.join(self.tmpdir, "console.log")
        init = os.path.join(HERE, "guest_init.sh")
        args = [QEMU, "-accel", "tcg", "-cpu", "max", "-m", str(self.memory_mb), "-smp", "1", "-nodefaults", "-no-user-config",
                "-display", "none", "-nic", "none", "-kernel", kernel, "-initrd", initrd,
                "-append", f"console=ttyS0 quiet loglevel=4 panic=-1 cardbench.init={init} "
                           f"cardbench.checkout={CHECKOUT} cardbench.python={sys.executable} "
                           f"cardbench.modules={','.join(GUEST_MODULES)}",
                "-no-reboot", "-serial", f"file:{self.console}",
                "-virtfs", "local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap",
                # the checkout again, for a guest whose tmpfs hides it (a clone under /tmp, as CI's)
                "-virtfs", f"local,path={CHECKOUT},mount_tag=checkout,security_model=passthrough,readonly=on,"
                           "multidevs=remap",
                "-device", "virtio-serial-pci",
                "-chardev", f"socket,id=agent,path={agent_sock},server=on,wait=off",
                "-device", "virtserialport,chardev=agent,name=cardbench.agent",
                "-qmp", f"unix:{qmp_sock},server=on,wait=off"]
        for d in self.drives:
            args += ["-drive", self.drive_arg(d)]
        for dev in self.devices:
            args += ["-device", dev]
        args += self.extra
        t0 = time.monotonic()
        self.qemu_log = os.path.join(self.tmpdir, "qemu.log")
        with open(self.qemu_log, "wb") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        try:
            self.qmp = Qmp(qmp_sock)
        except OSError as e:
            raise RuntimeError(f"QEMU did not start ({e}): {self.qemu_text()}") from None
        self.agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.agent.connect(agent_sock)
        self.agent.settimeout(self.boot_timeout)
        hello = self._recv_line(time.monotonic() + self.boot_timeout)
        if not hello.get("ready"):
            raise RuntimeError(f"guest agent: {hello}")
        self.boot_seconds = time.monotonic() - t0
        self.release = release

    def close(self) -> None:
        """Kill QEMU (its whole process group) and remove every temporary file."""
        if self.qmp is not None:
            try:
                self.qmp.sock.settimeout(2)
                self.qmp.cmd("quit")
            except Exception:
                pass
            self.qmp.close()
            self.qmp = None
        if self.agent is not None:
            self.agent.close()
            self.agent = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
            self.proc = None
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def qemu_text(self) -> str:
        try:
            with open(self.qemu_log, errors="replace") as f:
                return f.read()[-3000:]
        except (OSError, AttributeError):
            return ""

    def console_text(self) -> str:
        try:
            with open(self.console, errors="replace") as f:
                return f.read()
        except (OSError, AttributeError):
            return ""

    # -- hotplug (QMP) -------------------------------------------------------------------------------
    def add_node(self, node: str, path: str, group: str | None = None) -> None:
        """A block node on image ``path`` (created sparse in the temp dir when only a size is known),
        behind throttle group ``group`` (made with ``-object throttle-group`` in ``extra``)."""
        assert self.qmp is not None
        leaf = {"driver": "raw", "file": {"driver": "file", "filename": path, "aio": "threads"},
                "cache": {"direct": True}}
        if group:
            self.qmp.cmd("blockdev-add", **{"driver": "throttle", "node-name": node, "throttle-group": group,
                                            "file": leaf})
        else:
            self.qmp.cmd("blockdev-add", **{"node-name": node, **leaf})

    def image_path(self, name: str, size: int) -> str:
        """A sparse image of ``size`` bytes in the temp dir (made once; the same name, the same file)."""
        assert self.tmpdir is not None
        path = os.path.join(self.tmpdir, f"{name}.img")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.truncate(size)
        return path

    def plug(self, dev_id: str, driver: str, node: str, **props: Any) -> None:
        """``device_add`` a USB device (``usb-storage`` on ``xhci.0`` by default) on ``node``."""
        assert self.qmp is not None
        self.qmp.cmd("device_add", driver=driver, id=dev_id, drive=node, **props)

    def unplug(self, dev_id: str, node: str | None = None, timeout: float = 30.0) -> None:
        """``device_del``, wait for the guest to let it go, then free its block node."""
        assert self.qmp is not None
        self.qmp.cmd("device_del", id=dev_id)
        self.qmp.wait_event("DEVICE_DELETED", timeout=timeout, device=dev_id)
        if node:
            self.qmp.cmd("blockdev-del", **{"node-name": node})

    def swap_medium(self, dev_id: str, node: str, old_node: str | None = None) -> None:
        """Take the medium out of a removable SCSI LUN (``scsi-hd,removable=on``) and put ``node`` in."""
        assert self.qmp is not None
        self.qmp.cmd("blockdev-open-tray", id=dev_id, force=True)
        self.qmp.cmd("blockdev-remove-medium", id=dev_id)
        if old_node:
            self.qmp.cmd("blockdev-del", **{"node-name": old_node})
        self.qmp.cmd("blockdev-insert-medium", id=dev_id, **{"node-name": node})
        self.qmp.cmd("blockdev-close-tray", id=dev_id)

    # -- the agent ---------------------------------------------------------------------------------
    def _recv_line(self, deadline: float) -> dict:
        assert self.agent is not None
        while b"\n" not in self._buf:
            self.agent.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                chunk = self.agent.recv(1 << 16)
            except socket.timeout:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"QEMU exited ({self.proc.returncode}); console:\n"
                                       + self.console_text()[-3000:]) from None
                raise TimeoutError("the guest did not answer in time; console:\n"
                                   + self.console_text()[-3000:]) from None
            if not chunk:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"QEMU exited ({self.proc.returncode}); console:\n"
                                       + self.console_text()[-3000:])
                if time.monotonic() > deadline:
                    raise TimeoutError("the guest agent did not answer; console:\n" + self.console_text()[-3000:])
                time.sleep(0.1)
                continue
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:           # a reply cut short before: not any request's (its id is lost)
            return {"id": None, "garbled": line[:200].decode(errors="replace")}

    def _ask(self, req: dict, timeout: float) -> dict:
        """Send ``req`` with a fresh id and return the reply carrying that id. A reply with
        another id is the late answer of a request the host stopped waiting for (it timed out):
        it is dropped (counted in ``stale_replies``), so one timeout does not shift every later
        reply onto the wrong command."""
        assert self.agent is not None
        self._seq += 1
        rid = self._seq
        self.agent.sendall(json.dumps({**req, "id": rid}).encode() + b"\n")
        deadline = time.monotonic() + timeout
        while True:
            r = self._recv_line(deadline)
            if r.get("id") == rid:
                return r
            self.stale_replies += 1

    def run(self, *argv: str, timeout: float = 300.0, background: bool = False) -> Reply:
        """Run ``argv`` in the guest (a shell line when one string containing a space is given);
        ``background``: start it and return at once (``stdout`` is then its job id). The guest
        kills it after ``timeout`` s; the host waits ``reply_slack`` s more for the reply."""
        r = self._ask({"argv": list(argv), "timeout": timeout, "background": background}, timeout + self.reply_slack)
        return Reply(r["rc"], r["stdout"], r["stderr"], r["seconds"])

    def wait_job(self, job: str, timeout: float = 300.0) -> Reply:
        """The reply of a background job (waits for it to end)."""
        r = self._ask({"wait": job, "timeout": timeout}, timeout + self.reply_slack)
        return Reply(r["rc"], r["stdout"], r["stderr"], r["seconds"])

    def signal_job(self, job: str, sig: int = signal.SIGINT) -> None:
        self._ask({"signal": job, "sig": int(sig)}, self.reply_slack)

    def cardbench(self, *args: str, timeout: float = 300.0, background: bool = False) -> Reply:
        return self.run("python3", "-m", "cardbench", *args, timeout=timeout, background=background)

    def wait_for(self, shell: str, timeout: float = 30.0) -> Reply:
        """Run ``shell`` in the guest until it exits 0 (polls every 0.3 s)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.run("sh", "-c", shell, timeout=timeout)
            if r.rc == 0 or time.monotonic() > deadline:
                return r
            time.sleep(0.3)
