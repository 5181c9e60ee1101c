"""The caller's side: :class:`EmulatedReader` (one server process) and :class:`EmulatedCard`.

Both are context managers that always clean up (see :meth:`EmulatedReader.close`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import cardbench
from cardbench import signals
from cardbench.emulate import system
from cardbench.emulate.control import SOCKET_NAME, ServerGone, call
from cardbench.emulate.pacing import DEFAULT_TURNAROUND
from cardbench.emulate.spec import CardSpec, validate_settings
from cardbench.errors import CardbenchError, UsageError

#: Seconds to wait for a server to mount its FUSE filesystem.
START_TIMEOUT = 15.0
STATE_NAME = "state.json"

def _default_tmpdir() -> str | None:
    return os.environ.get("CARDBENCH_EMULATE_TMPDIR") or None


class EmulatedReader:
    """A card reader: one FUSE server process serving the cards added to it.

    ``ceiling`` (bytes/s or None) is shared by all its cards: their requests also pass one
    shared timeline at that rate. ``turnaround`` is the pacing allowance for the host's own
    per-request overhead (see :mod:`cardbench.emulate.pacing`).

    ``workdir``: directory for the FUSE mountpoint, control socket, log and (unless
    ``data_dir``) the sparse backing files; default a private temp dir (under
    $CARDBENCH_EMULATE_TMPDIR or the system temp dir), removed on close.
    ``detached=True`` (used by the CLI): the server outlives this process; stop it with
    :meth:`close` on an :meth:`attach`-ed reader.

    Use as ``with EmulatedReader(ceiling=20*MB) as r: a = r.add_card(spec)``. Closing (also on
    exceptions, Ctrl-C, SIGTERM, or if the server died) unmounts filesystems on its cards,
    detaches the loop devices, stops the server, unmounts FUSE and removes its directories.
    If the caller is SIGKILLed, the server notices (pidfd on the owner) and cleans up itself.
    """

    def __init__(self, ceiling: float | None = None, *, turnaround: float = DEFAULT_TURNAROUND,
                 workdir: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
                 detached: bool = False) -> None:
        if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, (int, float))
                                    or not ceiling > 0):
            raise UsageError(f"reader ceiling must be a positive number of bytes/s or None, got {ceiling!r}")
        validate_settings({"turnaround": turnaround})
        self.ceiling = None if ceiling is None else float(ceiling)
        self.turnaround = float(turnaround)
        self.detached = detached
        self._requested_workdir = None if workdir is None else os.path.realpath(workdir)
        self._requested_data_dir = None if data_dir is None else os.path.realpath(data_dir)
        self.workdir: str | None = None
        self.data_dir: str | None = None
        self.pid: int | None = None
        self._proc: subprocess.Popen | None = None
        self._own_workdir = False
        self._own_data_dir = False
        self._cards: dict[str, EmulatedCard] = {}
        self._devices: dict[str, str] = {}
        self._sigterm = False
        self._closed = False
        self._started = False
        self._extra_state: dict[str, Any] = {}

    # -- paths ------------------------------------------------------------------------------
    @property
    def mountpoint(self) -> str:
        """The FUSE mount serving the card files."""
        assert self.workdir is not None
        return os.path.join(self.workdir, "mnt")

    @property
    def socket(self) -> str:
        """The control socket (see :mod:`cardbench.emulate.control`)."""
        assert self.workdir is not None
        return os.path.join(self.workdir, SOCKET_NAME)

    @property
    def log_path(self) -> str:
        assert self.workdir is not None
        return os.path.join(self.workdir, "server.log")

    @property
    def cards(self) -> dict[str, "EmulatedCard"]:
        return dict(self._cards)

    # -- life -------------------------------------------------------------------------------
    def __enter__(self) -> "EmulatedReader":
        self._sigterm = signals.acquire_sigterm()
        try:
            self.start()
        except BaseException:
            self._release_sigterm()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(raise_on_leftovers=exc[0] is None)

    def _release_sigterm(self) -> None:
        owed, self._sigterm = self._sigterm, False
        signals.release_sigterm(owed)

    def start(self) -> "EmulatedReader":
        """Start the server process and wait until its FUSE mount is up. Cleans up on failure."""
        if self._started:
            return self
        system.check_environment()
        self._started = True
        try:
            self._start()
        except BaseException:
            self.close(raise_on_leftovers=False)
            raise
        return self

    def _start(self) -> None:
        if self._requested_workdir is None:
            self.workdir = os.path.realpath(tempfile.mkdtemp(prefix="cardbench-emu-", dir=_default_tmpdir()))
            self._own_workdir = True
        else:
            self.workdir = self._requested_workdir
            self._own_workdir = not os.path.exists(self.workdir)
            os.makedirs(self.workdir, mode=0o700, exist_ok=True)
        self.data_dir = self._requested_data_dir or os.path.join(self.workdir, "data")
        self._own_data_dir = not os.path.exists(self.data_dir)
        os.makedirs(self.mountpoint, mode=0o700, exist_ok=True)
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        config: dict[str, Any] = {
            "mountpoint": self.mountpoint, "data_dir": self.data_dir, "socket": self.socket,
            "ceiling": self.ceiling, "turnaround": self.turnaround, "cards": [],
            "owner_pid": None if self.detached else os.getpid(),
            "remove_workdir": not self.detached,
        }
        Path(self.workdir, "config.json").write_text(json.dumps(config, indent=1))
        env = dict(os.environ)
        src = str(Path(cardbench.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        with open(self.log_path, "ab") as logf, signals.signals_deferred():
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "cardbench.emulate.server", self.workdir],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, close_fds=True)
            self.pid = self._proc.pid
            self._save_state()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self._proc.poll() is not None:
                raise CardbenchError(f"emulator server exited at start: {self._log_tail()}")
            try:
                if call(self.socket, "ping", timeout=2.0).get("ready") and system.fuse_mount(self.mountpoint):
                    return
            except ServerGone:
                pass
            if time.monotonic() > deadline:
                raise CardbenchError(f"emulator server did not come up within {START_TIMEOUT:.0f} s: {self._log_tail()}")
            time.sleep(0.02)

    def _log_tail(self) -> str:
        try:
            lines = [ln for ln in Path(self.log_path).read_text(errors="replace").splitlines()
                     if ln.strip() and "invalid max threads" not in ln]
        except OSError:
            return "no log"
        return lines[-1].strip() if lines else "no log output"

    def _save_state(self) -> None:
        if self.workdir is None:
            return
        state = {
            "pid": self.pid, "mountpoint": self.mountpoint, "socket": self.socket, "data_dir": self.data_dir,
            "workdir": self.workdir, "ceiling": self.ceiling, "detached": self.detached,
            "devices": dict(self._devices), "own_data_dir": self._own_data_dir, **self._extra_state,
        }
        tmp = Path(self.workdir, STATE_NAME + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, Path(self.workdir, STATE_NAME))

    @classmethod
    def attach(cls, workdir: str | os.PathLike) -> "EmulatedReader":
        """Bind to a running (detached) server from its work directory's state file.

        The returned reader can set/yank/status its cards and :meth:`close` (stop) it.
        """
        workdir = os.path.realpath(workdir)
        try:
            state = json.loads(Path(workdir, STATE_NAME).read_text())
        except (OSError, ValueError) as e:
            raise UsageError(f"no emulator state in {workdir} ({e.__class__.__name__})") from None
        reader = cls(state.get("ceiling"), workdir=workdir, data_dir=state.get("data_dir"), detached=True)
        reader.workdir = workdir
        reader.data_dir = state.get("data_dir") or os.path.join(workdir, "data")
        reader.pid = state.get("pid")
        reader._own_workdir = True
        reader._own_data_dir = bool(state.get("own_data_dir"))
        reader._started = True
        reader._devices = dict(state.get("devices") or {})
        reader._extra_state = {k: v for k, v in state.items() if k not in (
            "pid", "mountpoint", "socket", "data_dir", "workdir", "ceiling", "detached", "devices", "own_data_dir")}
        for name, device in reader._devices.items():
            card = EmulatedCard.__new__(EmulatedCard)
            card._init_bound(reader, name, device, None)
            reader._cards[name] = card
        return reader

    def _abort_server(self) -> None:
        """The server is dead or hung: abort its FUSE connection (pending and later I/O on our
        loop devices fail at once instead of hanging) and kill it if it is still there."""
        if self.workdir is None:
            return
        system.abort_fuse(self.mountpoint)
        if self.pid is not None and system.is_server_process(self.pid, self.workdir):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def alive(self) -> bool:
        """True if the server process runs and answers."""
        if self.pid is None or not system.is_server_process(self.pid, self.workdir or ""):
            return False
        try:
            call(self.socket, "ping", timeout=2.0)
            return True
        except ServerGone:
            return False

    # -- cards ------------------------------------------------------------------------------
    def add_card(self, spec: CardSpec) -> "EmulatedCard":
        """Add a card behind this reader; returns it with its loop device attached."""
        if not isinstance(spec, CardSpec):
            raise UsageError(f"add_card needs a CardSpec, got {type(spec).__name__}")
        self._check_open()
        if spec.name in self._cards:
            raise UsageError(f"a card named {spec.name!r} is already behind this reader")
        path = self.call("add_card", spec=spec.to_json())["path"]
        device = None
        try:
            with signals.signals_deferred():
                device = system.attach_loop(path)
                self._devices[spec.name] = device
                card = EmulatedCard.__new__(EmulatedCard)
                card._init_bound(self, spec.name, device, spec)
                self._cards[spec.name] = card
                self._save_state()
        except BaseException:
            if device is not None:
                system.detach_loop(device)
            self._devices.pop(spec.name, None)
            self._cards.pop(spec.name, None)
            try:
                self.call("remove_card", card=spec.name)
            except CardbenchError:
                pass
            raise
        return card

    def remove_card(self, card: "EmulatedCard | str") -> None:
        """Unmount filesystems on the card, detach its loop device and drop it from the server."""
        name = card if isinstance(card, str) else card.name
        device = self._devices.get(name)
        with signals.signals_deferred():
            if device is not None:
                system.detach_loop(device)
                if system.loop_info(device) is not None and system.loops_under(self.mountpoint):
                    raise CardbenchError(f"{device} is still in use; cannot remove card {name}")
            self._devices.pop(name, None)
            self._cards.pop(name, None)
            self._save_state()
            try:
                self.call("remove_card", card=name)
            except ServerGone:
                pass

    def _check_open(self) -> None:
        if not self._started or self._closed:
            raise UsageError("the emulated reader is not running (use it in a with block or call start())")

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """Send a control request to the server (see :mod:`cardbench.emulate.control`)."""
        self._check_open()
        return call(self.socket, op, **args)

    def set_ceiling(self, ceiling: float | None) -> None:
        """Change the reader's ceiling (bytes/s, None for none) while it runs."""
        self.call("set_reader", ceiling=ceiling)
        self.ceiling = ceiling
        self._save_state()

    def status(self) -> dict[str, Any]:
        """Reader settings and, per card, settings and counters (plus ``device``)."""
        st = self.call("status")["status"]
        for name, card_status in st.get("cards", {}).items():
            card_status["device"] = self._devices.get(name)
        return st

    # -- teardown ---------------------------------------------------------------------------
    def close(self, *, raise_on_leftovers: bool = True) -> None:
        """Tear everything down, in order: unmount filesystems on our loop devices, detach the
        loop devices, stop the server, unmount FUSE (lazily / aborting the connection if it
        hangs), remove our directories. Idempotent. SIGINT/SIGTERM are held until it is done.
        """
        if self._closed:
            return
        self._closed = True
        problems: list[str] = []
        try:
            with signals.signals_deferred():
                if self.workdir is not None:
                    problems = self._teardown()
        finally:
            self._release_sigterm()
        if problems and raise_on_leftovers:
            raise CardbenchError("emulator cleanup incomplete: " + "; ".join(problems))

    def _attached_loops(self, mnt: str) -> list[str]:
        found = [lo.device for lo in system.loops_under(mnt)]
        return found + [d for d in system.still_ours(self._devices.values(), mnt) if d not in found]

    def _teardown(self) -> list[str]:
        problems: list[str] = []
        mnt = self.mountpoint
        ours = self.pid is not None and system.is_server_process(self.pid, self.workdir or "")
        if self.alive():
            # Unpace every card: unmounting flushes dirty data, no need to wait for a slow card.
            for name in list(self._devices):
                try:
                    call(self.socket, "set", card=name, settings={"paced": False}, timeout=2.0)
                except CardbenchError:
                    pass
        else:
            self._abort_server()
        problems += system.release_mountpoint(mnt, devices=list(self._devices.values()))
        system.unmount_fuse(mnt)
        if ours and self.pid is not None:
            system.stop_process(self.pid, self._proc, timeout=5.0)
        elif self._proc is not None:
            system.stop_process(self._proc.pid, self._proc, timeout=5.0)
        if system.fuse_mount(mnt) is not None:
            system.unmount_fuse(mnt)
        leftovers = self._attached_loops(mnt)
        deadline = time.monotonic() + 5.0
        while leftovers and time.monotonic() < deadline:
            # another process (lsblk, blkid, a parallel test) may hold a detached device for a
            # moment: losetup -d only marked it for autoclear; it goes when that process lets go
            time.sleep(0.1)
            for d in leftovers:
                system.detach_loop(d, timeout=2.0)
            leftovers = self._attached_loops(mnt)
        if leftovers:
            problems.append(f"loop devices still attached: {', '.join(leftovers)}")
        if system.fuse_mount(mnt) is not None:
            problems.append(f"FUSE still mounted on {mnt}")
        if ours and self.pid is not None and system.is_server_process(self.pid, self.workdir or ""):
            problems.append(f"server process {self.pid} still running")
        if self.data_dir and self.data_dir != self.workdir:
            if self._own_data_dir:
                system.remove_tree(self.data_dir)
            else:  # the server removes its backing files; make sure
                for name in list(self._devices) + list(self._cards):
                    try:
                        os.unlink(os.path.join(self.data_dir, name + ".img"))
                    except OSError:
                        pass
        if self.workdir:
            if self._own_workdir:
                system.remove_tree(self.workdir)
            else:  # somebody else's directory: remove only what we put there
                for sub in ("mnt", "data", "fs"):
                    system.remove_tree(os.path.join(self.workdir, sub))
                for f in ("config.json", STATE_NAME, SOCKET_NAME, "server.log"):
                    try:
                        os.unlink(os.path.join(self.workdir, f))
                    except OSError:
                        pass
        for card in self._cards.values():
            card._filesystems.clear()
        return problems


def _autoclearing(device: str) -> bool:
    """Whether a loop device was detached while held open (it goes when its holder lets go)."""
    try:
        with open(f"/sys/block/{os.path.basename(device)}/loop/autoclear") as f:
            return f.read().strip() == "1"
    except OSError:
        return True


class EmulatedCard:
    """An emulated card: a loop device (``card.device``) paced by the emulator server.

    ``EmulatedCard(spec)`` alone gets its own reader without a ceiling; use it as a context
    manager (``with EmulatedCard(spec) as card:``). Cards from :meth:`EmulatedReader.add_card`
    are already running; closing such a card removes it from its reader.
    """

    def __init__(self, spec: CardSpec, *, turnaround: float = DEFAULT_TURNAROUND,
                 workdir: str | os.PathLike | None = None) -> None:
        if not isinstance(spec, CardSpec):
            raise UsageError(f"EmulatedCard needs a CardSpec, got {type(spec).__name__}")
        self._init_bound(EmulatedReader(None, turnaround=turnaround, workdir=workdir), spec.name, None, spec)
        self._own_reader = True

    def _init_bound(self, reader: EmulatedReader, name: str, device: str | None, spec: CardSpec | None) -> None:
        self.reader = reader
        self.name = name
        self.spec = spec
        self._device = device
        self._own_reader = False
        self._filesystems: list[dict[str, Any]] = []

    # -- life -------------------------------------------------------------------------------
    def __enter__(self) -> "EmulatedCard":
        if self._own_reader:
            self.reader.__enter__()
            try:
                self._attach()
            except BaseException:
                self.reader.__exit__(*sys.exc_info())
                raise
        return self

    def _attach(self) -> None:
        assert self.spec is not None
        bound = self.reader.add_card(self.spec)
        self._device = bound._device
        self.reader._cards[self.name] = self

    def start(self) -> "EmulatedCard":
        """Start without a with block (then call :meth:`close`)."""
        if self._own_reader and not self.reader._started:
            self.reader.start()
            try:
                self._attach()
            except BaseException:
                self.reader.close(raise_on_leftovers=False)
                raise
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._own_reader:
            self.reader.__exit__(*exc)
        else:
            self.close()

    def close(self) -> None:
        """Own reader: stop everything. Card behind a shared reader: remove it from the reader."""
        if self._own_reader:
            self.reader.close()
        elif not self.reader._closed:
            self.reader.remove_card(self)

    # -- properties ---------------------------------------------------------------------------
    @property
    def device(self) -> str:
        """The loop device, e.g. "/dev/loop3"."""
        if self._device is None:
            raise UsageError("the emulated card is not running (use it in a with block)")
        return self._device

    @property
    def size(self) -> int:
        return self.spec.size if self.spec else int(self.status()["size"])

    # -- live control -------------------------------------------------------------------------
    def set(self, **settings: Any) -> dict[str, Any]:
        """Change settings while running: write_rate, read_rate (bytes/s), latency (s),
        cache_bytes, cache_rate, cache_idle, errors ([(start, end, kind)]), paced (bool),
        turnaround (s, reader-wide), volatile_bytes, drain_rate, flush, pull_damage, and the
        wear fields (wear_cycles, wear_spread, wear_seed, wear_block, wear_mode,
        wear_readonly_at: see :class:`CardSpec`). Returns the card status."""
        settings = validate_settings(settings)
        if "errors" in settings:
            settings["errors"] = [e.to_list() for e in settings["errors"]]
        return self.reader.call("set", card=self.name, settings=settings)["status"]

    @contextmanager
    def unpaced(self) -> Iterator["EmulatedCard"]:
        """Within the block I/O is not paced (full speed), e.g. for mkfs. Pacing resumes after."""
        before = bool(self.status().get("paced", True))
        self.set(paced=False)
        try:
            yield self
        finally:
            if not self.reader._closed:
                try:
                    self.set(paced=before)
                except ServerGone:
                    pass

    def yank(self) -> dict[str, Any]:
        """From now on every I/O on the card fails with EIO (like pulling it out mid-test)."""
        return self.reader.call("yank", card=self.name)["status"]

    def pull(self, *, detach: bool = True) -> dict[str, Any]:
        """Pull the card out (or cut its power): its volatile write cache keeps what it drained
        and loses the rest (see :class:`cardbench.emulate.spec.CardSpec`), every I/O fails with
        EIO, and (``detach``) its loop device goes away like a pulled disk: detached now, or as
        soon as whoever holds it open lets go. Returns the card status (``lost_now``: bytes of
        the cache lost by this pull)."""
        st = self.reader.call("pull", card=self.name)["status"]
        if detach and self._device is not None:
            system.run(["losetup", "-d", self._device], check=False)
        return st

    def reinsert(self, *, read_only: bool = False) -> str:
        """Put the pulled card back, with the data it kept: it answers again, on a new loop
        device (when the old one is still held open, under another name); ``read_only``: as a
        card whose write-protect switch slid, or that turned itself read-only. A card its wear
        model turned read-only comes back read-only by itself (as a card's write-protect bit
        would show it). Returns the device."""
        st = self.reader.call("reinsert", card=self.name)["status"]
        read_only = read_only or bool((st.get("wear") or {}).get("read_only"))
        path = os.path.join(self.reader.mountpoint, self.name)
        info = system.loop_info(self._device) if self._device is not None else None
        if info is not None and info.backing_file == path and not _autoclearing(info.device):
            if not read_only:
                return info.device  # pulled without detaching: the same device answers again
            system.detach_loop(info.device)
        with signals.signals_deferred():
            device = system.attach_loop(path, read_only=read_only)
            self._device = device
            self.reader._devices[self.name] = device
            self.reader._save_state()
        return device

    def wear(self, *, full: bool = False) -> dict[str, Any]:
        """The truth of the card's wear model (UsageError if it has none; see :class:`CardSpec`).

        ``cycles``, ``spread``, ``seed``, ``mode``, ``readonly_at``: the settings;
        ``block`` (bytes, the one in effect), ``blocks``, ``last_block`` (bytes of the last one);
        ``limits``: ``[[limit, blocks], ...]`` ascending: that many blocks survive ``limit``
        whole writes and wear out by the first write into them in pass ``limit + 1``, so after
        pass N the worn blocks number the sum of ``blocks`` over ``limit < N``;
        ``first_block`` / ``first_limit``: the (lowest-numbered) block with the lowest limit;
        ``readonly_after``: worn blocks that turn the card read-only (None: never);
        ``passes``: bytes written / kept bytes; ``cycles_min`` / ``cycles_max``: per block;
        ``worn``: worn blocks now; ``worn_blocks``: their numbers (the first 1000);
        ``read_only``; ``worn_requests`` (requests that touched a worn block), ``refused``
        (writes refused read-only); ``misplace_shift`` (bytes a misplaced write moves);
        ``modes`` (``"mixed"``: blocks per mode). ``full``: also ``block_limits``,
        ``block_cycles``, ``block_modes`` (lists, one item a block) and every worn block."""
        return self.reader.call("wear", card=self.name, full=full)["wear"]

    def status(self) -> dict[str, Any]:
        """Settings plus ``counters`` (reads, writes, bytes_read, bytes_written, bytes_cached,
        bytes_dropped, bytes_wrapped, eio, erofs, ...), ``cache_left``, ``busy_seconds``,
        ``wear`` (None, or block, blocks, worn, read_only, passes) and ``device``."""
        st = self.reader.call("status", card=self.name)["status"]
        st["device"] = self._device
        return st

    # -- filesystems ----------------------------------------------------------------------------
    @contextmanager
    def filesystem(self, fstype: str = "ext4", *, mkfs: bool = True, mkfs_args: tuple[str, ...] | list[str] = (),
                   mount_options: str | None = None, unpaced: bool = True) -> Iterator[str]:
        """Make a filesystem on the card (``mkfs=True``), mount it, yield the mount point; unmount
        after. ext2/3/4 are made quietly without lazy init (no background writes later).
        ``unpaced=True`` formats at full speed; mounting and everything else is paced."""
        mnt = os.path.join(self.reader.workdir or "", "fs", self.name)
        if any(fs["mountpoint"] == mnt for fs in self._filesystems):
            raise UsageError(f"a filesystem of card {self.name} is already mounted at {mnt}")
        os.makedirs(mnt, exist_ok=True)
        if mkfs:
            if fstype.startswith("ext"):
                args = [f"mkfs.{fstype}", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]
            elif fstype in ("vfat", "fat", "msdos"):
                args = ["mkfs.vfat"]
            else:
                args = [f"mkfs.{fstype}"]
            args += [*mkfs_args, self.device]
            if unpaced:
                with self.unpaced():
                    system.run(args, timeout=600)
            else:
                system.run(args, timeout=3600)
        entry = {"mountpoint": mnt, "fstype": fstype, "options": mount_options}
        self._mount(entry)
        self._filesystems.append(entry)
        try:
            yield mnt
        finally:
            if entry in self._filesystems:
                self._filesystems.remove(entry)
            with signals.signals_deferred():
                self._umount(mnt)
                try:
                    os.rmdir(mnt)
                except OSError:
                    pass

    def _umount(self, mnt: str, lazy_fallback: bool = True) -> None:
        # A dead or hung server would make umount wait forever: abort it first. A live one may
        # be slow (a paced card flushing dirty data), so give umount time.
        if not self.reader._closed and not self.reader.alive():
            self.reader._abort_server()
        system.umount(mnt, timeout=3600, lazy_fallback=lazy_fallback)

    def _mount(self, entry: dict[str, Any]) -> None:
        args = ["mount", "-t", entry["fstype"]]
        if entry["options"]:
            args += ["-o", entry["options"]]
        system.run(args + [self.device, entry["mountpoint"]], timeout=600)

    def remount(self) -> str:
        """Unmount and mount the card's filesystem again: the next reads are cold (from the card)."""
        if not self._filesystems:
            raise UsageError(f"card {self.name} has no mounted filesystem (use card.filesystem())")
        entry = self._filesystems[-1]
        with signals.signals_deferred():
            self._umount(entry["mountpoint"], lazy_fallback=False)
        self._mount(entry)
        return entry["mountpoint"]

    def __repr__(self) -> str:
        return f"<EmulatedCard {self.name} {self._device or 'not running'}>"
