"""Helpers for the fault suite: the real CLI in child processes, triggers that fire a fault
"midway" (from the emulated card's own I/O counters), and the checks every scenario ends with.

A module with a unique name (pytest imports test helpers by basename)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

from cardbench.units import MB, MiB
from realparts import can_emulate, sha256_device  # noqa: F401
from realparts import emulator_leftovers as leftovers

ROOT = os.geteuid() == 0


needs_emulator = pytest.mark.skipif(not can_emulate(), reason="needs root, FUSE and loop devices")

#: test files of `cardbench run` and `cardbench verify --full` (the names the tools promise)
RUN_FILE_RE = re.compile(r"^cardbench-test-.*\.tmp$")
VERIFY_FILE_RE = re.compile(r"^cardbench-verify-\d{4,}\.cbv$|^cardbench-verify\.json(\.tmp)?$")


# -- the command line in a child process -----------------------------------------------------------

_live: list[subprocess.Popen] = []


@dataclass
class Cli:
    """One `cardbench ...` child process; stdout/stderr go to files (no pipe can fill up)."""

    args: tuple[str, ...]
    proc: subprocess.Popen
    out_path: Path
    err_path: Path
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""

    def wait(self, timeout: float = 120) -> "Cli":
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"cardbench {' '.join(self.args)} did not end within {timeout} s") from None
        finally:
            if self.proc in _live:
                _live.remove(self.proc)
        self.stdout = self.out_path.read_text(errors="replace")
        self.stderr = self.err_path.read_text(errors="replace")
        return self

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def alive(self) -> bool:
        return self.proc.poll() is None


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the same cardbench as this test process (not whichever one another
    checkout installed last), no debug tracebacks, no database from the environment."""
    import cardbench
    env = dict(os.environ)
    src = str(Path(cardbench.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("CARDBENCH_DEBUG", None)
    env.pop("CARDBENCH_DB", None)
    env["COLUMNS"] = "200"
    env.update(extra or {})
    return env


def start_cli(*args: str, workdir: Path, name: str = "cli", env: dict[str, str] | None = None) -> Cli:
    """Start `python -m cardbench ARGS` (as a user would run it) in the background."""
    workdir.mkdir(parents=True, exist_ok=True)
    n = len(list(workdir.glob(f"{name}*.out")))
    out = workdir / f"{name}{n}.out"
    err = workdir / f"{name}{n}.err"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen([sys.executable, "-m", "cardbench", *args], stdin=subprocess.DEVNULL,
                                stdout=fo, stderr=fe, env=cli_env(env))
    _live.append(proc)
    return Cli(tuple(args), proc, out, err)


def run_cli(*args: str, workdir: Path, timeout: float = 120, name: str = "cli") -> Cli:
    return start_cli(*args, workdir=workdir, name=name).wait(timeout)


def kill_leftover_children() -> list[int]:
    """Kill (and reap) every child this suite started that still runs; returns their pids."""
    killed = []
    for p in list(_live):
        if p.poll() is None:
            p.kill()
            killed.append(p.pid)
        p.wait()
        _live.remove(p)
    return killed


# -- what a user sees -------------------------------------------------------------------------------------

def error_lines(c: Cli) -> list[str]:
    return [ln for ln in c.stderr.splitlines() if ln.strip()]


def one_error_line(c: Cli, *words: str) -> str:
    """The child printed exactly one line on stderr, ``cardbench: ...``, naming one of ``words``."""
    assert "Traceback" not in c.stderr, c.stderr
    lines = error_lines(c)
    assert len(lines) == 1, f"expected one error line, got {len(lines)}:\n{c.stderr}"
    line = lines[0]
    assert line.startswith("cardbench: "), line
    assert "internal error" not in line, line
    if words:
        assert any(w.lower() in line.lower() for w in words), f"{line!r} names none of {words}"
    return line


# -- triggers ----------------------------------------------------------------------------------------------

def counters(card) -> dict:
    return card.status()["counters"]


def wait_until(cond: Callable[[], bool], timeout: float, what: str, proc: Cli | None = None,
               interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return
        if proc is not None and not proc.alive():
            proc.wait(1)
            raise AssertionError(f"cardbench ended (exit {proc.returncode}) before {what}:\n{proc.stderr}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def when_written(card, nbytes: int, base: dict | None = None) -> Callable[[], bool]:
    """True once the card has taken ``nbytes`` more written bytes than in ``base``."""
    b0 = (base or {}).get("bytes_written", 0)
    return lambda: counters(card)["bytes_written"] - b0 >= nbytes


def when_read(card, nbytes: int, base: dict | None = None, after_written: int = 0) -> Callable[[], bool]:
    """True once the card has read ``nbytes`` more bytes (and written ``after_written`` more) than in ``base``."""
    r0 = (base or {}).get("bytes_read", 0)
    w0 = (base or {}).get("bytes_written", 0)

    def cond() -> bool:
        c = counters(card)
        return c["bytes_written"] - w0 >= after_written and c["bytes_read"] - r0 >= nbytes
    return cond


# -- the checks ------------------------------------------------------------------------------------------------

def stored(db: str | os.PathLike) -> list:
    from cardbench.store import open_store
    if not os.path.exists(db):
        return []
    with open_store(str(db)) as s:
        assert s.check() == [], s.check()
        return s.results()


def stored_verify(db: str | os.PathLike) -> list[dict]:
    from cardbench.store import open_store
    if not os.path.exists(db):
        return []
    with open_store(str(db)) as s:
        assert s.check() == [], s.check()
        return s.verify_results()


def assert_store_intact(db: str | os.PathLike) -> None:
    """check() finds nothing, and the file opens again (twice: after a writer died too)."""
    from cardbench.store import open_store
    if not os.path.exists(db):
        return
    for _ in range(2):
        with open_store(str(db)) as s:
            assert s.check() == []
            s.results()


def assert_partial_stored(db: str | os.PathLike, *words: str):
    """Exactly one result stored, marked incomplete, with its error line; returns it."""
    results = stored(db)
    assert len(results) == 1, f"expected one stored (partial) result, got {len(results)}"
    r = results[0]
    assert r.complete is False, "a partial result was stored as complete"
    assert r.error, "a partial result without its error"
    if words:
        assert any(w.lower() in r.error.lower() for w in words), r.error
    assert any(t.complete is False for t in r.tests) or not r.tests or all(t.runs for t in r.tests)
    return r


def files_in(directory: str | os.PathLike, pattern: re.Pattern = RUN_FILE_RE) -> list[str]:
    try:
        return sorted(n for n in os.listdir(directory) if pattern.match(n))
    except OSError:
        return []


def scribble(dev: str, card, seed: int = 1) -> None:
    """Put recognisable data all over a card, so a region not restored changes its sha256."""
    import random
    rng = random.Random(seed)
    with card.unpaced():
        fd = os.open(dev, os.O_WRONLY)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
            chunk = 1 << 20
            for off in range(0, size, chunk):
                os.pwrite(fd, rng.randbytes(4096) * (chunk // 4096), off)
            os.fsync(fd)
        finally:
            os.close(fd)
        fd = os.open(dev, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def journals(root: str | os.PathLike) -> list[str]:
    """Journal directories of --preserve runs left under ``root``."""
    try:
        return sorted(p.name for p in Path(root).iterdir() if p.is_dir())
    except OSError:
        return []


def losetup_lines(prefix: str | os.PathLike) -> list[str]:
    """`losetup -a` lines of loop devices backed under ``prefix``."""
    prefix = os.path.realpath(prefix)
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if prefix in ln]


def cardbench_children() -> list[int]:
    """`python -m cardbench` processes that are children of this test process."""
    me = os.getpid()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and b"cardbench" in args and b"-m" in args:
            found.append(int(pid))
    return found


# -- emulated cards -----------------------------------------------------------------------------------------

@contextlib.contextmanager
def card(size: int = 96 * MiB, write_rate: float = 10 * MB, read_rate: float = 20 * MB, **kw) -> Iterator:
    from cardbench.emulate import CardSpec, EmulatedCard
    with EmulatedCard(CardSpec(size=size, write_rate=write_rate, read_rate=read_rate, **kw)) as c:
        yield c


@dataclass
class Row:
    """One line of the scenario table."""

    scenario: str
    expected: str
    observed: list[str] = field(default_factory=list)
    #: what was lost of what was measured (the store faults say it: the goal is "nothing")
    lost_text: str = ""

    def lost(self, text: str) -> None:
        self.lost_text = text

    def saw(self, text: str) -> None:
        """Note what the test saw (temporary paths shortened for the table)."""
        text = re.sub(r"/tmp/\S*?/cardbench-emu-[^/\s]+/fs/card0", "<mnt>", text)
        text = re.sub(r"/tmp/pytest-of-[^\s:;,)]*", "<tmp>", text)
        self.observed.append(text if len(text) <= 150 else text[:147] + "...")


def nothing_left(row, emu_dir, db=None) -> None:
    """No loop device, mount or server of ours, no cardbench child, the store (if any) intact."""
    assert leftovers(emu_dir) == [], leftovers(emu_dir)
    assert losetup_lines(emu_dir) == []
    assert cardbench_children() == []
    if db is not None:
        assert_store_intact(db)
    row.saw("no loop/mount/process left" + ("; store intact" if db is not None else ""))
