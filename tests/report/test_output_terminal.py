"""What a person sees in a terminal of 80 (and 120) columns (issue 16): the commands run in a real
tmux window on a real emulated card with ext4; no line of their output is cut or wrapped, `run`
ends with the card's row and plain-words verdicts, and no identity key or source tag shows."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cardbench.units import MB, MiB
from realparts import can_emulate, emulators_under, run_cli

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
              pytest.mark.skipif(not can_emulate(), reason="needs root, FUSE and loop devices")]

SRC = str(Path(__file__).resolve().parents[2] / "src")
INTERNAL = re.compile(r"\buser:[^\s]*\||\bname:unknown\b|\busb:[0-9a-f]{4}:|\[S\d+\]")


class Tmux:
    """A private tmux server (its own socket), killed whole at the end."""

    def __init__(self):
        self.socket = f"cbtest-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        # a session that lives as long as the server: killing the last window would end the
        # server, racing the next new-session
        self.tmux("new-session", "-d", "-s", "keep", "sleep 3600")

    def tmux(self, *args, timeout=30):
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=timeout)

    def run(self, argv: list[str], width: int, timeout: float = 120) -> tuple[int, str]:
        """Run ``cardbench ARGV`` in a window ``width`` columns wide; (exit code, screen with
        wrapped lines joined, so a wrapped line shows as a long one)."""
        return self._window(f"-m cardbench {' '.join(shlex.quote(a) for a in argv)}", width, timeout)

    def run_python(self, code: str, width: int, timeout: float = 120) -> tuple[int, str]:
        """Run Python ``code`` (``python -c``) in a window ``width`` columns wide, as :meth:`run`."""
        return self._window(f"-c {shlex.quote(code)}", width, timeout)

    def _window(self, python_args: str, width: int, timeout: float) -> tuple[int, str]:
        name = uuid.uuid4().hex[:8]
        rc_file = f"/tmp/cbtest-{name}.rc"
        cmd = (f"export PYTHONPATH={shlex.quote(SRC)}; {shlex.quote(sys.executable)} {python_args}; "
               f"echo $? > {rc_file}; tmux -L {self.socket} wait-for -S {name}; sleep 600")
        p = self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", "300", cmd)
        assert p.returncode == 0, p.stderr
        try:
            self.tmux("wait-for", name, timeout=timeout)
            screen = self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", name).stdout
            rc = int(Path(rc_file).read_text())
        finally:
            self.tmux("kill-session", "-t", name)
            if os.path.exists(rc_file):
                os.unlink(rc_file)
        return rc, screen.rstrip("\n")

    def close(self):
        self.tmux("kill-server")


@pytest.fixture(scope="module")
def term():
    t = Tmux()
    try:
        yield t
    finally:
        t.close()


@pytest.fixture(scope="module")
def card_fs(tmp_path_factory):
    from cardbench.emulate import CardSpec, EmulatedCard
    with emulators_under(tmp_path_factory.mktemp("emu")) as d:
        spec = CardSpec(size=32 * MiB, write_rate=5 * MB, read_rate=12 * MB, name="term")
        with EmulatedCard(spec) as card, card.filesystem("ext4") as mnt:
            # a directory of its own: the lock key (st_dev, inode) of a filesystem root is the same
            # on every ext4 of a reused loop number
            sub = os.path.join(mnt, "answer")
            os.mkdir(sub)
            yield sub, str(d / "r.sqlite3")


def _fits(screen: str, width: int) -> None:
    long = [line for line in screen.splitlines() if len(line) > width]
    assert not long, f"lines over {width} columns:\n" + "\n".join(long)


# not slow (2.5 s): the module's later tests read the store this run fills, also under --quick
def test_run_at_80_columns_ends_with_the_answer(term, card_fs):
    mnt, db = card_fs
    rc, screen = term.run(["run", mnt, "--brand", "Lexar", "--capacity", "48MB", "--label", "4X", "--size", "1MB",
                           "--runs", "2", "--db", db], 80)
    assert rc == 0, screen
    _fits(screen, 80)
    assert not INTERNAL.search(screen), screen
    lines = screen.splitlines()
    head = next(i for i, x in enumerate(lines) if x.split()[:1] == ["Card"] and "(MB/s)" in x)
    row = next(i for i, x in enumerate(lines) if i > head and x.split()[:1] == ["Lexar"])
    assert "4X" in lines[row].split()
    label = next(i for i, x in enumerate(lines) if x.startswith("4X on the label: holds — reads "))
    data = next(i for i, x in enumerate(lines) if x.startswith("Data: every sector read back as written"))
    reader = next(i for i, x in enumerate(lines) if x.startswith("Reader or bus: "))
    assert head < row < label < reader < data
    assert "95% CI" not in screen and "warm-up" not in screen       # the statistics are behind --verbose
    assert re.search(r"4X needs 0\.600 MB/s", screen)


@pytest.mark.slow
def test_verbose_run_at_120_columns(term, card_fs):
    mnt, db = card_fs
    rc, screen = term.run(["run", mnt, "--brand", "Lexar", "--label", "4X", "--size", "1MB", "--runs", "2",
                           "--db", db, "--verbose"], 120)
    assert rc == 0, screen
    _fits(screen, 120)
    assert "95% CI of mean" in screen and "user:Lexar" in screen    # --verbose keeps the keys
    assert screen.index("95% CI of mean") < screen.index("4X on the label: holds")


@pytest.mark.parametrize("argv", [["results"], ["readers"], ["list"], ["results", "--format", "md"],
                                  ["compare", "lexar", "lexar"]])
def test_other_commands_fit_80_columns(term, card_fs, argv):
    mnt, db = card_fs
    if run_cli("results", "--db", db, "--json").returncode != 0:
        pytest.skip("no store yet")
    full = argv + (["--db", db] if argv[0] != "list" else [])
    rc, screen = term.run(full, 80)
    assert rc == 0, screen
    if argv[-1] != "md":     # Markdown is for pasting, not for the terminal: its rows are as long as they are
        _fits(screen, 80)
    assert not INTERNAL.search(screen), screen


#: every command's --help in one process, in one 80-column window: main() as `cardbench NAME
#: --help` runs it, each screen ended by a marker line with its exit code
HELP_ALL = """
import sys
from cardbench.cli import cli, main
for name in sorted(cli.commands):
    try:
        main([name, "--help"])
        rc = 0
    except SystemExit as e:
        rc = e.code or 0
    print(f"@@@ {name} {rc}", flush=True)
"""


@pytest.mark.slow
def test_help_fits_and_ends_with_examples(term):
    from cardbench.cli import cli
    rc, screen = term.run_python(HELP_ALL, 80)
    assert rc == 0, screen
    screens = re.split(r"^@@@ (\S+) (\d+)$", screen, flags=re.M)
    # each marker's text is the one before it (what follows the last marker is no help)
    helps = dict(zip(screens[1::3], zip(screens[2::3], screens[0::3], strict=False), strict=True))
    assert sorted(helps) == sorted(cli.commands), screen[-2000:]
    for name, (code, text) in helps.items():
        assert code == "0", (name, text)
        _fits(text, 80)
        tail = text.strip("\n").splitlines()[-3:]
        assert any(line.strip().startswith("cardbench ") for line in tail), (name, text)


def test_piped_output_keeps_the_full_width(card_fs):
    mnt, db = card_fs
    # a result of its own (an empty store prints a sentence, not a table)
    stored = run_cli("run", mnt, "--brand", "Lexar", "--capacity", "48MB", "--label", "4X", "--size", "1MB", "--runs", "1",
                     "--warmup", "0", "--db", db)
    assert stored.returncode == 0, stored.stderr
    out = run_cli("results", "--db", db).stdout
    assert "Write file" in out and "Capacity" in out and "Left out" not in out
