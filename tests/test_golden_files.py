"""Golden files, snapshots and fixtures hold nothing of the machine that made them.

A golden file holding the build machine's kernel release failed CI on every other machine
(issue 30: tests/store/data/bulk_export.json named ``6.18.44-fc-v1098``). Every data file under
tests/ (all but Python sources and tests/vm's guest scripts) is searched for this machine's kernel
release and hostname; cardbench's own documents among them (JSON with a ``cardbench.`` schema)
also for a temporary or checkout path.

The captured outputs of other tools (tests/importers/data/peers/fio_real, dd_busybox_1.37.txt)
keep the /tmp paths and dates their real runs printed: they are input, read the same on any
machine, and were not edited (their SOURCES.md says so).
"""

from __future__ import annotations

import json
import platform
import re
import socket
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: hostnames too common to search as a word in a file (a match says nothing of this machine)
_COMMON = {"localhost", "debian", "ubuntu", "host", "server", "runner", "box", "vm", "linux"}


def data_files(root: Path = TESTS) -> list[Path]:
    """The golden, snapshot and fixture files under ``root``: every text file but Python sources
    and the booted-kernel tier's guest scripts."""
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).parts
        if not p.is_file() or p.is_symlink() or p.suffix in (".py", ".pyc") or "__pycache__" in rel \
                or rel[0] == "vm" or ".pytest_cache" in rel or ".hypothesis" in rel:
            continue
        out.append(p)
    return out


def host_facts_in(path: Path, kernel: str, hostname: str) -> list[str]:
    """What of the host (``kernel`` release, ``hostname``) the file at ``path`` holds, in words."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return []
    found = []
    if kernel and kernel in text:
        found.append(f"the kernel release {kernel}")
    short = hostname.split(".")[0]
    if short and re.search(rf'"(hostname|host|node)"\s*:\s*"{re.escape(short)}(\.[^"]*)?"', text):
        found.append(f"the hostname {short} as a JSON value")
    elif short and len(short) >= 4 and short.lower() not in _COMMON and \
            re.search(rf"(?<![\w-]){re.escape(short)}(?![\w-])", text):
        found.append(f"the hostname {short}")
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("cardbench."):
            for m in re.finditer(r'"(/tmp/|/var/tmp/|/work/|/home/|/root/)[^"]*"', text):
                found.append(f"the local path {m.group(0)}")
                break
    return found


def test_no_golden_file_holds_this_machines_kernel_or_hostname():
    kernel, hostname = platform.release(), socket.gethostname()
    files = data_files()
    assert len(files) > 100, "the fixture trees were not found"
    bad = {str(p.relative_to(TESTS)): facts for p in files if (facts := host_facts_in(p, kernel, hostname))}
    assert bad == {}, f"golden/fixture files hold this machine's facts (mask them): {bad}"


def test_the_search_finds_a_kernel_release_and_a_hostname(tmp_path):
    """The search above can fail: a file with this machine's kernel release, or an export naming
    its host, is found."""
    kernel, hostname = platform.release(), socket.gethostname()
    (tmp_path / "uname.txt").write_text(f"Linux {kernel} x86_64\n")
    (tmp_path / "export.json").write_text(json.dumps(
        {"schema": "cardbench.export/2", "results": [{"host": {"hostname": hostname}, "target": {"path": "/tmp/x"}}]}))
    (tmp_path / "clean.json").write_text(json.dumps({"schema": "cardbench.export/2", "host": {"hostname": "golden"}}))
    found = {p.name: host_facts_in(p, kernel, hostname) for p in data_files(tmp_path)}
    assert found["uname.txt"] == [f"the kernel release {kernel}"]
    assert f"the hostname {hostname.split('.')[0]} as a JSON value" in found["export.json"]
    assert any("/tmp/x" in f for f in found["export.json"])
    assert found["clean.json"] == []
