"""Test helpers shared by tests/store, tests/report and tests/importers.

``make_result``: a realistic Result (seq_write + cold_read, optional raw_read positions and
sustained_write curve). ``PostgresServer``: a throwaway PostgreSQL server in a temp dir, run as
the ``postgres`` user on 127.0.0.1 with a random port and its unix socket in the data dir.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from cardbench.cli import main
from cardbench.result import Card, Reader, Result, Run, TestResult

MB = 1_000_000


def make_result(brand="Lexar", capacity=48 * MB, label="4X", write_times=(41.2, 41.5, 41.6),
                write_bytes=42 * MB, read_rate=3.6 * MB, read_runs=3, reader="Generic USB2 reader",
                started_at="2024-05-01T10:00:00+00:00", complete=True, curves=False, serial=None,
                warnings=(), limited_by=None, source="run", **kw) -> Result:
    tests = [TestResult("seq_write", {"engine": "sync", "block_size": 1 << 20, "file_bytes": write_bytes,
                                      "sync": "fsync"},
                        runs=[Run(write_bytes, t) for t in write_times], warnings=list(warnings))]
    if read_rate:
        tests.append(TestResult("cold_read", {"engine": "sync", "block_size": 1 << 20, "cache": "dropped"},
                                runs=[Run(write_bytes, write_bytes / (read_rate * (1 + 0.01 * i)))
                                      for i in range(read_runs)], limited_by=limited_by))
    if curves:
        tests.append(TestResult(
            "raw_read", {"engine": "sync", "block_size": 1 << 20},
            runs=[Run(1 << 20, (1 << 20) / (read_rate * (1 - 0.3 * i / 20)), offset=i * capacity // 20)
                  for i in range(20)],
            extra={"positions": [[i * capacity // 20, read_rate * (1 - 0.3 * i / 20)] for i in range(20)]}))
        tests.append(TestResult(
            "sustained_write", {"engine": "sync", "block_size": 1 << 20},
            runs=[Run(capacity // 2, capacity / 2 / (write_bytes / write_times[0]))],
            extra={"curve": [[i * capacity // 40, (write_bytes / write_times[0]) * (1.3 if i < 5 else 0.8)]
                             for i in range(1, 21)]}))
    return Result(target={"kind": "directory", "path": "/mnt/card"},
                  card=Card(brand=brand, capacity_bytes=capacity, label=label, serial=serial, name=kw.pop("name", None)),
                  reader=Reader(name=reader), tests=tests, complete=complete, started_at=started_at,
                  finished_at=None if not complete else started_at, source=source,
                  error=None if complete else "interrupted", **kw)


def find_pg_bin() -> Path | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "pg_ctl")):
            return Path(d)
    return None


def _pg_missing_reason() -> str | None:
    if find_pg_bin() is None:
        return "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "no 'postgres' user to run the test server as"
    return None


@contextlib.contextmanager
def running_postgres(durable: bool = False):
    """A started PostgresServer, stopped and removed afterwards; skips the test where none can run
    (fails it in CI, where PostgreSQL tests must run)."""
    import pytest
    reason = _pg_missing_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL tests must run in CI: {reason}")
        pytest.skip(reason)
    server = PostgresServer(find_pg_bin(), durable=durable)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """initdb + pg_ctl start as user postgres; ``stop()`` always kills it and removes the directory."""

    def __init__(self, bindir: Path, durable: bool = False):
        """``durable``: a commit is on disk when it is answered (``synchronous_commit=on``), so a
        server killed with ``-m immediate`` keeps every commit it answered, as a production one does
        (the default, off, is faster and fine for tests that never kill the server)."""
        self.bindir = bindir
        self.durable = durable
        self.dir = Path(tempfile.mkdtemp(prefix="cbpg", dir="/tmp"))
        self.data = self.dir / "data"
        self.port = 0
        self.started = False

    def _as_postgres(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = list(args)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def start(self) -> "PostgresServer":
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        r = self._as_postgres(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
                              "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed: {r.stderr.strip()[-500:]}")
        for _attempt in range(5):
            self.port = _free_port()
            r = self._pg_ctl_start()
            if r.returncode == 0:
                self.started = True
                return self
        log = (self.dir / "log").read_text(errors="replace")[-800:] if (self.dir / "log").exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {r.stderr.strip()[-300:]} {log}")

    def _pg_ctl_start(self) -> subprocess.CompletedProcess:
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                f"-c synchronous_commit={'on' if self.durable else 'off'} -c full_page_writes=off "
                "-c max_connections=40")
        return self._as_postgres(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l",
                                 str(self.dir / "log"), "-w", "-t", "30", "start")

    def kill(self) -> None:
        """Stop the server at once (``-m immediate``: as a crash), keeping its data for ``restart``."""
        r = self._as_postgres(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "-t", "20",
                              "stop", timeout=30)
        if r.returncode != 0:
            self._kill_postmaster()

    def restart(self) -> None:
        """Start the killed server again on the same port (its clients reconnect to the same URL)."""
        r = self._pg_ctl_start()
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl start (restart) failed: {r.stderr.strip()[-300:]}")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def new_database(self) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            if self.started:
                r = self._as_postgres(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                                      "-w", "-t", "20", "stop", timeout=30)
                if r.returncode != 0:
                    self._kill_postmaster()
        except Exception:
            self._kill_postmaster()
        finally:
            self.started = False
            shutil.rmtree(self.dir, ignore_errors=True)

    def _kill_postmaster(self) -> None:
        pidfile = self.data / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        except (OSError, ValueError, IndexError):
            pass


def cli(capsys, *argv) -> tuple[int, str, str]:
    """``cardbench ARGV`` in this process (cardbench.cli.main): (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_ok(capsys, *argv) -> str:
    """:func:`cli` that must exit 0; its stdout."""
    code, out, err = cli(capsys, *argv)
    assert code == 0, (argv, out, err)
    return out


def key_paths(doc) -> list[tuple]:
    """Every path into a JSON document (keys and list indexes), the root's () first."""
    paths: list[tuple] = []

    def walk(node, path=()):
        paths.append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for k, v in items:
            walk(v, path + (k,))
    walk(doc)
    return paths


def mangled(doc, path: tuple, value):
    """A copy of ``doc`` with ``value`` at ``path``; ``"drop"`` takes the key out (of an object)."""
    d = json.loads(json.dumps(doc))
    node = d
    for k in path[:-1]:
        node = node[k]
    if isinstance(value, str) and value == "drop":
        if isinstance(node, dict):
            del node[path[-1]]
    else:
        node[path[-1]] = value
    return d


def make_endurance(brand="SanDisk", capacity=32 * MB, rounds=12, first_error=None, bad_class="stale",
                   growth=4.0, write_rate=20 * MB, read_rate=40 * MB, read_fade=0.01, ended="rounds",
                   label="Endurance", serial="0x5a5a01", created="2024-07-01T10:00:00+00:00",
                   rated_tbw=None) -> dict:
    """A ``cardbench.endurance/1`` document as the contract describes it, built by hand: ``rounds``
    rounds of a card of ``capacity`` bytes (512-byte sectors); from round ``first_error`` on, bad
    sectors of ``bad_class`` (one in round ``first_error``, times ``growth`` each round after);
    reads ``read_fade`` slower each round; the milestones reached, in order; the answer in words."""
    from cardbench.kinds.endurance import CLASSES, MILESTONES, SCHEMA

    sectors = capacity // 512
    doc_rounds, milestones, total = [], [], 0
    marks = [(None, "first error"), *((f, f"{f * 100:g}% bad") for f in MILESTONES)]
    bad = 0
    for n in range(1, rounds + 1):
        if first_error is not None and n >= first_error:
            bad = min(sectors, max(1, int(bad * growth)))
        classes = {c: 0 for c in CLASSES}
        classes[bad_class] = bad
        total += capacity
        w, r = write_rate * (1 - 0.002 * n), read_rate * (1 - read_fade) ** (n - 1)
        fraction = bad / sectors
        doc_rounds.append({"round": n, "write_bytes_per_s": w, "read_bytes_per_s": r,
                           "write_seconds": capacity / w, "read_seconds": capacity / r, "bytes_written": capacity,
                           "bad_sectors": classes, "bad_total": bad, "bad_fraction": fraction,
                           "ended_at": f"2024-07-01T{10 + n // 60:02d}:{n % 60:02d}:00+00:00", "slices_redone": 0})
        while marks and bad and (marks[0][0] is None or fraction >= marks[0][0]):
            f, what = marks.pop(0)
            milestones.append({"what": what, "bad_fraction": f or 0.0, "round": n, "bytes_written": total})
    first = milestones[0]["round"] if milestones else None
    tb = f"{total / 1e12:.3g} TB" if total >= 1e11 else f"{total / 1e9:.3g} GB"
    slow = 1 - doc_rounds[-1]["read_bytes_per_s"] / doc_rounds[0]["read_bytes_per_s"] if doc_rounds else None
    if first is None:
        answer = f"{brand} {capacity / 1e9:g} GB: {rounds:,} full writes ({tb}) with no error"
        if slow:
            answer += f"; reads slowed {slow * 100:.0f}% since round 1"
    else:
        first_bad = doc_rounds[first - 1]["bad_total"]
        answer = f"first error after {first - 1:,} full writes: {bad_class} data in {first_bad} sectors"
        answer += "".join(f"; {m['what']} after {m['round'] - 1:,}" for m in milestones[1:])
    rated = None
    if rated_tbw:
        rated = {"tbw": rated_tbw, "video_hours": None, "video_mbps": None, "rated_bytes": int(rated_tbw * 1e12),
                 "used_fraction": total / (rated_tbw * 1e12)}
    card = Card(brand=brand, capacity_bytes=capacity, label=label, serial=serial)
    return {"schema": SCHEMA, "id": uuid.uuid4().hex, "created_at": created, "started_at": created,
            "finished_at": created, "tool": {"name": "cardbench", "version": "test"}, "host": {"hostname": "test"},
            "card": card.to_dict(), "reader": Reader(name="Quad slot", vendor_id="05e3", product_id="0747").to_dict(),
            "device": "/dev/sdx", "capacity_bytes": capacity, "sector_bytes": 512, "card_uuid": uuid.uuid4().hex,
            "options": {"rounds": rounds, "hours": None, "until_bad": 0.5, "slices": 16, "request_bytes": 1 << 20},
            "rated": rated, "rounds": doc_rounds, "first_error_round": first, "milestones": milestones,
            "bytes_written": total, "full_writes": total / capacity, "read_slowdown": slow, "ended": ended,
            "complete": ended not in (None, "interrupted"), "error": None, "answer": answer,
            "verdict": "no error" if first is None else "worn",
            "method": {"engine": "queued", "direct": True, "request_bytes": 1 << 20, "slices": 16,
                       "order": "slices shuffled each round", "sector_layout": "address, round, uuid, crc32c"}}
