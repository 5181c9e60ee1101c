"""The fault suite's frame: an isolated environment, cleanup always, and the scenario table.

* Every emulated card of a test module lives under one temp dir ($CARDBENCH_EMULATE_TMPDIR), so
  the leak checks look at *our* loop devices, mounts and servers only (others may run theirs on
  the same machine at the same time).
* $XDG_DATA_HOME / $XDG_STATE_HOME point into the module's temp dir: the default results
  database, the --preserve journals and the verify state of every `cardbench` started here are
  ours alone (and a user's own journals are never "recovered" by a test).
* Each test declares ``@pytest.mark.scenario(name, expected)`` and notes what it saw with the
  ``row`` fixture (``row.saw(...)``; the store faults also say what was lost, ``row.lost(...)``); the table of every scenario and its outcome is printed at the end of the
  pytest run (also in CI), and written as JSON to $CARDBENCH_FAULT_REPORT when set
  (bench/fault_report.py).
"""

from __future__ import annotations

import json
import os
import sys

import pytest

HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from faults_helpers import Row, kill_leftover_children, leftovers  # noqa: E402

_ROWS: list[dict] = []
_ENV = ("CARDBENCH_EMULATE_TMPDIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
        "CARDBENCH_DB")


def pytest_configure(config):
    config.addinivalue_line("markers", "scenario(name, expected): a line of the fault suite's scenario table")


@pytest.fixture(scope="module", autouse=True)
def fault_env(tmp_path_factory):
    """Isolated user dirs and emulator dir for each module of the fault suite (restored after it,
    so tests outside tests/faults never see them); leak check at the end of the module."""
    base = tmp_path_factory.mktemp("faults")
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ["CARDBENCH_EMULATE_TMPDIR"] = str(base / "emu")
    (base / "emu").mkdir()
    for k, sub in (("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache"),
                   ("XDG_CONFIG_HOME", "config")):
        os.environ[k] = str(base / sub)
        (base / sub).mkdir()
    os.environ.pop("CARDBENCH_DB", None)
    try:
        yield base
    finally:
        kill_leftover_children()
        left = leftovers(base / "emu")
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        assert left == [], f"emulator leftovers after {base}: {left}"


@pytest.fixture
def journal_root(fault_env):
    """Where `cardbench` keeps --preserve journals in this suite (the default, under $XDG_DATA_HOME)."""
    return fault_env / "data" / "cardbench" / "journal"


@pytest.fixture
def emu_dir(fault_env):
    return fault_env / "emu"


@pytest.fixture
def row(request):
    """The scenario-table line of this test; filled with what the test saw."""
    m = request.node.get_closest_marker("scenario")
    r = Row(m.args[0] if m else request.node.name, m.args[1] if m and len(m.args) > 1 else "")
    request.node._fault_row = r
    yield r
    # cleanup always: no child of ours outlives its test
    killed = kill_leftover_children()
    if killed:
        r.saw(f"killed stray children {killed}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not str(item.fspath).startswith(HERE):
        return
    m = item.get_closest_marker("scenario")
    if m is None:
        return
    key = item.nodeid
    entry = next((e for e in _ROWS if e["id"] == key), None)
    if entry is None:
        entry = {"id": key, "scenario": m.args[0], "expected": m.args[1] if len(m.args) > 1 else "",
                 "observed": "", "outcome": "not run"}
        _ROWS.append(entry)
    r = getattr(item, "_fault_row", None)
    if r is not None and rep.when == "call":
        entry["observed"] = "; ".join(r.observed)
        if r.lost_text:
            entry["lost"] = r.lost_text
    if rep.when == "setup" and rep.skipped:
        entry["outcome"] = "SKIPPED"
        entry["observed"] = str(rep.longrepr[-1]) if isinstance(rep.longrepr, tuple) else "skipped"
    elif rep.when == "call":
        if hasattr(rep, "wasxfail"):
            entry["outcome"] = "XFAIL" if rep.skipped else "XPASS"
            entry["observed"] = (entry["observed"] + "; " if entry["observed"] else "") + f"xfail: {rep.wasxfail}"
        elif rep.passed:
            entry["outcome"] = "PASS"
        elif rep.failed:
            entry["outcome"] = "FAIL"
            msg = rep.longreprtext.strip().splitlines()
            last = next((ln for ln in reversed(msg) if ln.startswith("E ")), msg[-1] if msg else "")
            entry["observed"] = (entry["observed"] + "; " if entry["observed"] else "") + last[:200]
        elif rep.skipped:
            entry["outcome"] = "SKIPPED"
    elif rep.when == "teardown" and rep.failed and entry["outcome"] == "PASS":
        entry["outcome"] = "FAIL (teardown)"


def _table(rows: list[dict]) -> list[str]:
    head = ("scenario", "expected", "outcome", "lost", "observed")
    width = (44, 62, 8, 8)
    lines = [f"{head[0]:<{width[0]}} {head[1]:<{width[1]}} {head[2]:<{width[2]}} {head[3]:<{width[3]}} {head[4]}",
             f"{'-' * width[0]} {'-' * width[1]} {'-' * width[2]} {'-' * width[3]} {'-' * 40}"]
    for e in rows:
        lines.append(f"{e['scenario'][:width[0]]:<{width[0]}} {e['expected'][:width[1]]:<{width[1]}} "
                     f"{e['outcome']:<{width[2]}} {e.get('lost', ''):<{width[3]}} {e['observed']}")
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _ROWS:
        return
    tr = terminalreporter
    tr.write_sep("=", f"cardbench fault scenarios ({len(_ROWS)})")
    for line in _table(_ROWS):
        tr.write_line(line)
    counts: dict[str, int] = {}
    for e in _ROWS:
        counts[e["outcome"]] = counts.get(e["outcome"], 0) + 1
    tr.write_line("fault scenarios: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    out = os.environ.get("CARDBENCH_FAULT_REPORT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(_ROWS, f, indent=1)
