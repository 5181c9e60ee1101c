"""The full verify's state file: what a fill wrote and checked, kept so that ``--resume``
continues an interrupted run (beside the fill files, mirrored in the user state dir; for a
block device only there), and the names and sizes of the fill files."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import platformdirs

MiB = 1 << 20
GiB = 1 << 30
STATE_NAME = "cardbench-verify.json"
STATE_SCHEMA = "cardbench.verify-state/1"
FILE_PREFIX = "cardbench-verify-"
FILE_SUFFIX = ".cbv"
FILE_RE = re.compile(r"^cardbench-verify-\d{4,}\.cbv$")


def default_file_bytes(free: int) -> int:
    """1 GiB files (like H2testw and f3write) when there is room for 16 of them, else smaller ones
    (a power of two >= 1 MiB) so that the rate over the card still has ~16 points."""
    if free >= 16 * GiB:
        return GiB
    f = MiB
    while f * 2 * 16 <= free and f < GiB:
        f *= 2
    return f


def state_dir() -> Path:
    return Path(platformdirs.user_state_dir("cardbench")) / "verify"


def write_json(path: Path, data: dict, durable: bool = True) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if not durable:
        return
    try:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def read_json(path: Path) -> dict | None:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and d.get("schema") == STATE_SCHEMA else None
