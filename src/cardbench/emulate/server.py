"""The emulator server: one process per reader, serving one FUSE file per card.

Run as ``python -m cardbench.emulate.server WORKDIR``; WORKDIR/config.json says what to serve::

    {"mountpoint": ..., "data_dir": ..., "socket": ..., "ceiling": null or bytes/s,
     "turnaround": seconds, "cards": [CardSpec.to_json(), ...],
     "owner_pid": pid or null, "remove_workdir": bool}

Each card is the file ``<mountpoint>/<name>`` of the advertised size, opened with FUSE
``direct_io`` (no page cache in front of it); its data lives in a sparse file
``<data_dir>/<name>.img`` of the kept size, accessed with pread/pwrite. Every read/write is
booked on the pacing model (:mod:`cardbench.emulate.pacing`) and answered when it finishes.

Signals (SIGTERM, SIGINT, SIGHUP) and the death of ``owner_pid`` lead to an orderly shutdown:
filesystems on our loop devices are unmounted, the loop devices detached, the FUSE mount
unmounted, the backing files removed (and the work directory if ``remove_workdir``). The server
runs in its own session so a Ctrl-C in the caller's terminal does not reach it; the caller stops it.
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import select
import signal
import socket
import stat
import sys
import threading
import time
import warnings
from typing import Any

from cardbench.emulate import system
from cardbench.emulate.pacing import DEFAULT_TURNAROUND, CardModel, ReaderModel
from cardbench.emulate.spec import CardSpec, validate_settings
from cardbench.emulate.wear import ERASED
from cardbench.errors import CardbenchError, UsageError

log = logging.getLogger("cardbench.emulate.server")

_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _set_timer_slack(ns: int = 1000) -> None:
    """Sleep more precisely (default timer slack is 50 us)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(29, ctypes.c_ulong(ns), 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


class Server:
    def __init__(self, workdir: str, config: dict[str, Any]) -> None:
        self.workdir = workdir
        self.config = config
        self.mountpoint = config["mountpoint"]
        self.data_dir = config["data_dir"]
        self.socket_path = config["socket"]
        self.reader = ReaderModel(config.get("ceiling"), config.get("turnaround", DEFAULT_TURNAROUND))
        self.fds: dict[str, int] = {}
        self.ready = threading.Event()
        self.fuse_info: dict[str, Any] = {}
        self.started = time.time()
        self._shutdown_lock = threading.Lock()
        self._shutting_down = False
        os.makedirs(self.data_dir, exist_ok=True)
        for spec_json in config.get("cards", []):
            self.add_card(CardSpec.from_json(spec_json))

    # -- cards --------------------------------------------------------------------------
    def add_card(self, spec: CardSpec) -> CardModel:
        with self.reader.lock:
            if spec.name in self.reader.cards:
                raise UsageError(f"a card named {spec.name!r} already exists on this reader")
        path = os.path.join(self.data_dir, spec.name + ".img")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        os.ftruncate(fd, spec.kept)  # sparse
        with self.reader.lock:
            self.fds[spec.name] = fd
            return self.reader.add(spec)

    def remove_card(self, name: str) -> None:
        with self.reader.lock:
            self.reader.cards.pop(name, None)
            fd = self.fds.pop(name, None)
        if fd is not None:
            os.close(fd)
            try:
                os.unlink(os.path.join(self.data_dir, name + ".img"))
            except OSError:
                pass

    def card(self, name: Any) -> CardModel:
        card = self.reader.cards.get(name) if isinstance(name, str) else None
        if card is None:
            raise UsageError(f"no card named {name!r} on this emulator")
        return card

    # -- the data path (called from libfuse threads) -----------------------------------
    def io(self, op: str, name: str, offset: int, size: int, data: bytes | None = None) -> bytes | int:
        now = time.monotonic()
        reader = self.reader
        result: bytes | int = 0
        with reader.lock:
            card = reader.cards.get(name)
            fd = self.fds.get(name)
            if card is None or fd is None:
                raise OSError(errno.ENOENT, "no such card")
            verdict = card.request(op, offset, size, now)
            pulls = card.counters.pulls
            # a write failing on a worn block still stores its other pieces: through the cache too
            cached = card.caching and (not verdict.error or bool(verdict.pieces))
            if cached:  # the volatile cache: served under the lock, in order
                result = self._cached_io(card, fd, op, verdict, now, data)
        if verdict.error and not verdict.pieces and card.yanked:
            raise OSError(errno.EIO, "card yanked")
        if cached:
            pass
        elif op == "read":
            parts = []
            for where, n in verdict.pieces:
                if where is None:
                    parts.append(bytes(n))
                elif where == ERASED:
                    parts.append(b"\xff" * n)
                else:
                    chunk = os.pread(fd, n, where)
                    if len(chunk) < n:
                        chunk += bytes(n - len(chunk))
                    parts.append(chunk)
            result = parts[0] if len(parts) == 1 else b"".join(parts)
        else:
            assert data is not None
            view = memoryview(data)
            pos = 0
            for where, n in verdict.pieces:
                if where is not None:
                    os.pwrite(fd, view[pos:pos + n], where)
                pos += n
            result = len(data)
        delay = verdict.finish - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        card.answered(time.monotonic())
        if verdict.error:
            raise OSError(verdict.errno, "emulated I/O error")
        if card.counters.pulls != pulls:  # pulled before it was answered: never acknowledged
            raise OSError(errno.EIO, "card pulled")
        return result

    @staticmethod
    def _write_back(fd: int, writes: list[tuple[int, bytes]]) -> None:
        for where, chunk in writes:
            os.pwrite(fd, chunk, where)

    def _cached_io(self, card: CardModel, fd: int, op: str, verdict, now: float, data) -> bytes | int:
        """A read or write of a card with a volatile cache (caller holds the reader lock)."""
        self._write_back(fd, card.settle(now))
        if op == "write":
            accept = card.accept_at(sum(n for w, n in verdict.pieces if w is not None), now)
            card.cache_put(verdict.pieces, data, accept)
            verdict.finish = max(verdict.finish, accept)
            return len(data)
        parts = []
        for where, n in verdict.pieces:
            if where is None or where == ERASED:
                parts.append(bytes(n) if where is None else b"\xff" * n)
                continue
            chunk = bytearray(os.pread(fd, n, where))
            chunk += bytes(n - len(chunk))
            card.overlay(where, chunk)
            parts.append(bytes(chunk))
        return b"".join(parts)

    def flush(self, name: str) -> None:
        """fsync/fdatasync reached the card: an honest card waits until its volatile cache is
        empty, a liar answers at once. EIO once the card is pulled (also while waiting)."""
        with self.reader.lock:
            card = self.reader.cards.get(name)
            fd = self.fds.get(name)
            if card is None or fd is None:
                raise OSError(errno.ENOENT, "no such card")
            if card.yanked:
                raise OSError(errno.EIO, "card yanked")
            card.counters.flushes += 1
            now = time.monotonic()
            self._write_back(fd, card.settle(now))
            due = card.empty_at(now) if card.flush == "honest" else now
            pulls = card.counters.pulls
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        with self.reader.lock:
            if card.counters.pulls != pulls:
                raise OSError(errno.EIO, "card pulled")
            self._write_back(fd, card.settle(time.monotonic()))

    def pull(self, name: Any) -> dict[str, Any]:
        """Pull the card: it keeps what its cache drained (and the drained front of a write cut
        mid-way), loses the rest, and the bytes of ``pull_damage`` are scrambled; every I/O fails
        with EIO until it is put back (:meth:`reinsert`)."""
        with self.reader.lock:
            card = self.card(name)
            fd = self.fds[card.name]
            lost_before = card.counters.bytes_lost
            self._write_back(fd, card.cut(time.monotonic()))
            for start, end in card.pull_damage:
                end = min(end, card.real_size)
                if end > start:
                    os.pwrite(fd, os.urandom(end - start), start)
            os.fsync(fd)
            st = card.status()
            st["lost_now"] = card.counters.bytes_lost - lost_before
            return st

    # -- control ------------------------------------------------------------------------
    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "ping":
            return {"ready": self.ready.is_set(), "pid": os.getpid(), "mountpoint": self.mountpoint,
                    "fuse": self.fuse_info}
        if op == "status":
            with self.reader.lock:
                if req.get("card") is not None:
                    return {"status": self.card(req["card"]).status()}
                st = self.reader.status()
            st.update(pid=os.getpid(), mountpoint=self.mountpoint, uptime=time.time() - self.started,
                      fuse=self.fuse_info)
            return {"status": st}
        if op == "set":
            settings = validate_settings(dict(req.get("settings") or {}))
            with self.reader.lock:
                card = self.card(req.get("card"))
                card.apply(settings)
                return {"status": card.status()}
        if op == "set_reader":
            ceiling = req.get("ceiling")
            if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, (int, float))
                                        or not ceiling > 0):
                raise UsageError(f"reader ceiling must be a positive number of bytes/s or null, got {ceiling!r}")
            with self.reader.lock:
                self.reader.ceiling = None if ceiling is None else float(ceiling)
                return {"status": self.reader.status()}
        if op == "yank":
            with self.reader.lock:
                card = self.card(req.get("card"))
                card.yanked = True
                return {"status": card.status()}
        if op == "pull":
            return {"status": self.pull(req.get("card"))}
        if op == "wear":
            with self.reader.lock:
                card = self.card(req.get("card"))
                if card.wear is None:
                    raise UsageError(f"card {card.name} has no wear model (set wear_cycles)")
                return {"wear": card.wear.report(full=bool(req.get("full")))}
        if op == "reinsert":
            with self.reader.lock:
                card = self.card(req.get("card"))
                card.yanked = False
                return {"status": card.status()}
        if op == "add_card":
            spec = CardSpec.from_json(req.get("spec") or {})
            self.add_card(spec)
            return {"path": os.path.join(self.mountpoint, spec.name)}
        if op == "remove_card":
            name = req.get("card")
            if not isinstance(name, str):
                raise UsageError(f"remove_card needs a card's name, not {name!r}")
            self.remove_card(name)
            return {}
        if op == "shutdown":
            threading.Thread(target=self.shutdown, args=("control request",), daemon=True).start()
            return {}
        raise UsageError(f"unknown control op {op!r}")

    def serve_control(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.settimeout(10)
                    buf = b""
                    while not buf.endswith(b"\n"):
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        buf += chunk
                    try:
                        req = json.loads(buf or b"{}")
                        if not isinstance(req, dict):
                            raise UsageError("a control request is a JSON object")
                        answer = {"ok": True, **self.handle(req)}
                    except UsageError as e:
                        answer = {"ok": False, "kind": "usage", "error": e.message}
                    except (CardbenchError, ValueError, TypeError, KeyError) as e:
                        answer = {"ok": False, "kind": "error",
                                  "error": getattr(e, "message", None) or f"{e.__class__.__name__}: {e}"}
                    conn.sendall(json.dumps(answer).encode() + b"\n")
                except OSError:
                    pass

    # -- lifetime -------------------------------------------------------------------------
    def shutdown(self, reason: str) -> None:
        """Release our loop devices and unmount the FUSE mount (the FUSE loop then returns)."""
        with self._shutdown_lock:
            if self._shutting_down:
                return
            self._shutting_down = True
        log.info("shutting down: %s", reason)
        try:
            system.release_mountpoint(self.mountpoint)
        finally:
            system.unmount_fuse(self.mountpoint)

    def watch_signals(self) -> None:
        while True:
            sig = signal.sigwait(_SIGNALS)
            self.shutdown(f"signal {signal.Signals(sig).name}")

    def watch_owner(self, pid: int) -> None:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.shutdown(f"owner {pid} is gone")
            return
        except OSError:  # no pidfd: poll
            while system.process_alive(pid):
                time.sleep(0.5)
            self.shutdown(f"owner {pid} exited")
            return
        select.select([pidfd], [], [])
        os.close(pidfd)
        self.shutdown(f"owner {pid} exited")

    def close(self) -> None:
        with self.reader.lock:
            fds = list(self.fds.items())
            self.fds.clear()
        for name, fd in fds:
            os.close(fd)
            try:
                os.unlink(os.path.join(self.data_dir, name + ".img"))
            except OSError:
                pass
        try:
            os.unlink(self.socket_path)
        except OSError:
            pass


def _operations(server: Server):
    mfusepy = system.load_mfusepy()
    operations: Any = mfusepy.Operations    # loaded at run time, untyped: nothing to check against

    class CardFiles(operations):
        use_ns = True

        def init_with_config(self, conn, config):  # noqa: D401 - libfuse callback
            if conn is not None:
                server.fuse_info = {"max_write": conn.max_write, "max_read": conn.max_read,
                                    "max_readahead": conn.max_readahead,
                                    "max_background": conn.max_background}
            server.ready.set()

        def getattr(self, path, fh=None):
            now_ns = int(time.time() * 1e9)
            if path == "/":
                return {"st_mode": stat.S_IFDIR | 0o700, "st_nlink": 2, "st_size": 0,
                        "st_atime": now_ns, "st_mtime": now_ns, "st_ctime": now_ns}
            card = server.reader.cards.get(path[1:])
            if card is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": card.size,
                    "st_blocks": card.size // 512, "st_blksize": 4096,
                    "st_atime": now_ns, "st_mtime": now_ns, "st_ctime": now_ns}

        def readdir(self, path, fh):
            if path != "/":
                raise mfusepy.FuseOSError(errno.ENOTDIR)
            return [".", ".."] + list(server.reader.cards)

        def open(self, path, fi):
            if path[1:] not in server.reader.cards:
                raise mfusepy.FuseOSError(errno.ENOENT)
            fi.direct_io = 1
            fi.keep_cache = 0
            return 0

        def read(self, path, size, offset, fh):
            return server.io("read", path[1:], offset, size)

        def write(self, path, data, offset, fh):
            return server.io("write", path[1:], offset, len(data), data)

        def truncate(self, path, length, fh=None):
            card = server.reader.cards.get(path[1:])
            if card is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            if length != card.size:
                raise mfusepy.FuseOSError(errno.EPERM)
            return 0

        def flush(self, path, fh):
            return 0

        def fsync(self, path, datasync, fh):
            server.flush(path[1:])
            return 0

        def release(self, path, fh):
            return 0

        def statfs(self, path):
            return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 0, "f_bfree": 0, "f_bavail": 0,
                    "f_namemax": 255}

    return CardFiles()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m cardbench.emulate.server WORKDIR", file=sys.stderr)
        return 2
    workdir = os.path.realpath(argv[0])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s cardbench-emulate[%(process)d] %(message)s")
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    # Signals go to one thread (sigwait), never interrupt libfuse or the pacing sleeps.
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    _set_timer_slack()
    try:  # the "card" answers on time even when the machine is busy (threads inherit this)
        os.setpriority(os.PRIO_PROCESS, 0, -5)
    except OSError:
        pass
    server = Server(workdir, config)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.unlink(server.socket_path)
    except FileNotFoundError:
        pass
    old_umask = os.umask(0o077)
    listener.bind(server.socket_path)
    os.umask(old_umask)
    listener.listen(16)
    threading.Thread(target=server.serve_control, args=(listener,), daemon=True, name="control").start()
    threading.Thread(target=server.watch_signals, daemon=True, name="signals").start()
    owner = config.get("owner_pid")
    if owner:
        threading.Thread(target=server.watch_owner, args=(int(owner),), daemon=True, name="owner").start()
    os.makedirs(server.mountpoint, exist_ok=True)

    mfusepy = system.load_mfusepy()
    warnings.simplefilter("ignore", DeprecationWarning)
    status = 0
    try:
        mfusepy.FUSE(_operations(server), server.mountpoint, foreground=True, raw_fi=True, nothreads=False,
                     fsname="cardbench-emulate", subtype="cardbench")
    except Exception as e:  # noqa: BLE001 - report in the log, exit non-zero
        log.error("FUSE failed: %s", e)
        status = 1
    finally:
        listener.close()
        server.close()
        if config.get("remove_workdir") and server._shutting_down:
            system.remove_tree(workdir)
    log.info("exit %d", status)
    return status


if __name__ == "__main__":
    sys.exit(main())
