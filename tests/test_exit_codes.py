"""The exit codes: one enum (errors.ExitCode), the one README.md documents, and every error class's
code taken from it; a command module that fails to import stops the command line at start."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import signal
from pathlib import Path

import pytest

from cardbench import errors
from cardbench.errors import CardbenchError, ExitCode
from realparts import ROOT, call_cli, loop_device, sha256_device

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_exit_codes() -> dict[int, str]:
    text = README.read_text()
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", section, re.M)
    return {int(code): meaning for code, meaning in rows}


def test_readme_exit_codes_table_is_the_enum():
    documented = readme_exit_codes()
    assert sorted(documented) == sorted(int(c) for c in ExitCode)
    assert len(documented) == len(ExitCode)


def test_every_error_class_exits_with_an_enum_member():
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, CardbenchError)]
    assert len(classes) >= 10
    for cls in classes:
        assert isinstance(cls.exit_code, ExitCode), cls
    assert errors.SafetyRefusal.exit_code == ExitCode.SAFETY == 4
    assert errors.Interrupted.exit_code == ExitCode.INTERRUPTED == 130


def _main(argv: list[str]) -> tuple[int, str]:
    from cardbench.cli import main
    err = io.StringIO()
    old_term = signal.getsignal(signal.SIGTERM)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                main(argv)
                code = 0
            except SystemExit as e:
                code = e.code
    finally:
        signal.signal(signal.SIGTERM, old_term)
    return code, err.getvalue()


def test_a_command_module_that_fails_to_import_is_an_internal_error_naming_it(monkeypatch):
    import cardbench.cli as cli_mod
    real = importlib.import_module

    def broken(name, *a, **k):
        if name == "cardbench.cli.sync_cmd":
            raise ImportError("No module named 'somethingmissing'")
        return real(name, *a, **k)

    monkeypatch.setattr(cli_mod, "_BROKEN", [])
    monkeypatch.setattr(cli_mod.importlib, "import_module", broken)
    cli_mod._attach("cardbench.cli.sync_cmd", "sync")
    code, err = _main(["--help"])
    assert code == ExitCode.INTERNAL == 70
    assert err.count("\n") == 1 and "internal error" in err and "cardbench.cli.sync_cmd" in err
    assert "somethingmissing" in err


def test_every_command_module_imports():
    import cardbench.cli as cli_mod
    assert cli_mod._BROKEN == []
    assert _main(["--help"])[0] == 0


@pytest.mark.skipif(not ROOT, reason="needs root for loop devices")
def test_a_destructive_write_without_a_terminal_is_refused_alike_by_every_command():
    """Nothing given to confirm with, and no terminal to ask on: `run --destructive` and `verify
    --destructive` both refuse with exit 4 (SafetyRefusal, as README's table says), in the same
    one line naming the device and what to pass; not a byte is written."""
    with loop_device(32 << 20) as dev:
        with open(dev, "r+b") as f:
            f.write(os.urandom(1 << 20) * 32)
        before = sha256_device(dev)
        ran = call_cli("run", dev, "--destructive", "--no-save")
        verified = call_cli("verify", dev, "--destructive", "--no-save")
        assert ran.returncode == verified.returncode == ExitCode.SAFETY == 4, (ran.stderr, verified.stderr)
        assert ran.stderr == verified.stderr and ran.stdout == verified.stdout == ""
        [line] = ran.stderr.splitlines()
        assert line.startswith(f"cardbench: not confirmed: {dev} (") and f"{32 << 20} bytes)" in line
        assert line.endswith("pass --confirm with its size in bytes (see `cardbench list`): there is no terminal "
                             "to ask on")
        assert sha256_device(dev) == before
