"""realparts.call_cli (cardbench.cli.main in-process) answers as the command in a child process
does, and leaves nothing behind in the test process."""

from __future__ import annotations

import os
import signal

import pytest

from realparts import call_cli, run_cli


@pytest.mark.parametrize("args", [
    ("run", "/nonexistent/dir", "--no-save"),          # a refusal: exit 3, one line
    ("run", "/etc/hostname", "--size", "banana"),      # bad input: exit 2
    ("results", "--db", "{tmp}/empty.sqlite3", "--format", "csv"),
    ("no-such-command",),
])
def test_same_answer_as_a_child_process(tmp_path, args):
    args = tuple(a.replace("{tmp}", str(tmp_path)) for a in args)
    inproc, child = call_cli(*args), run_cli(*args)
    assert (inproc.returncode, inproc.stdout, inproc.stderr) == (child.returncode, child.stdout, child.stderr)


def test_process_state_is_put_back(tmp_path, monkeypatch):
    monkeypatch.setenv("CARDBENCH_DEBUG", "1")
    monkeypatch.chdir(tmp_path)
    before_env = dict(os.environ)
    old = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        p = call_cli("run", "/nonexistent/dir", "--no-save")
        assert p.returncode == 3 and p.stderr.startswith("cardbench: ") and "Traceback" not in p.stderr
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL     # main() installs its own
        assert dict(os.environ) == before_env and os.getcwd() == str(tmp_path)
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()
    finally:
        signal.signal(signal.SIGTERM, old)
