"""`cardbench verify` as a user runs it: one-line refusals with their exit codes, the table, --json."""

from __future__ import annotations

import json

import pytest

from realparts import call_cli
from verify_helpers import card, needs_emulator

MiB = 1 << 20
pytestmark = [needs_emulator, pytest.mark.needs_root]


def one_line(p) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("cardbench: ") and "Traceback" not in p.stderr
    return lines[0]


@pytest.mark.slow
def test_quick_json_and_table(journal, tmp_path):
    db = str(tmp_path / "r.sqlite3")
    with card(256 * MiB, 64 * MiB, "drop") as c:
        p = call_cli("verify", c.device, "--json", "--journal", journal, "--db", db, "--seed", "1")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert (doc["verdict"], doc["kind"], doc["usable_bytes"]) == ("counterfeit", "dropped", 64 * MiB)
        t = call_cli("verify", c.device, "--journal", journal, "--no-save")
        assert t.returncode == 0, t.stderr
        assert "COUNTERFEIT" in t.stdout and "f3fix --last-sec=131071" in t.stdout
    from cardbench.store import open_store
    with open_store(db) as store:
        if hasattr(store, "verify_results"):
            assert [d["id"] for d in store.verify_results()] == [doc["id"]]


@pytest.mark.slow
def test_destructive_needs_the_identity(journal):
    with card(64 * MiB) as c:
        p = call_cli("verify", c.device, "--destructive", "--no-save")
        assert p.returncode == 4 and "not confirmed" in one_line(p)
        p = call_cli("verify", c.device, "--destructive", "--confirm", "12345", "--no-save")
        assert p.returncode == 4 and "does not match" in one_line(p)
        p = call_cli("verify", c.device, "--destructive", "--confirm", str(64 * MiB), "--no-save", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["verdict"] == "genuine"


def test_mounted_is_refused_with_exit_4():
    with card(64 * MiB) as c, c.filesystem("ext4"):
        p = call_cli("verify", c.device, "--no-save")
        assert p.returncode == 4 and "mounted" in one_line(p)
        p = call_cli("verify", c.device, "--destructive", "--confirm", str(64 * MiB), "--no-save")
        assert p.returncode == 4 and "mounted" in one_line(p)


def test_usage_errors():
    p = call_cli("verify", "/nonexistent/card", "--no-save")
    assert p.returncode == 3 and "no such" in one_line(p)
    with card(64 * MiB) as c:
        p = call_cli("verify", c.device, "--full", "--no-save")
        assert p.returncode == 2 and "--destructive" in one_line(p)
        p = call_cli("verify", c.device, "--resume", "--no-save")
        assert p.returncode == 2 and one_line(p)


@pytest.mark.slow
def test_directory_full_mode():
    with card(128 * MiB, 64 * MiB, "drop") as c, c.filesystem("ext4", mkfs_args=("-O", "^has_journal")) as mnt:
        p = call_cli("verify", mnt, "--json", "--no-save", "--seed", "3")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["mode"] == "full" and doc["verdict"] == "counterfeit"
