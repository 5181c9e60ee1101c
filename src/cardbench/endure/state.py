"""The host's state of an endurance run: one JSON file per card, replaced atomically after every
slice (written under a temporary name, fsync'd, renamed over the old one, the directory fsync'd),
so a killed process, a reboot or a power cut resumes with at most one slice done again.

Where: ``platformdirs.user_state_dir("cardbench")/endure/<card uuid>.json`` (beside the pull
test's logs), or ``EndureOptions.state_dir``. What it holds: the run's start (card UUID, record
id, device, capacity, options, the card's identity, the fake-capacity check), the finished rounds
(as the document has them), and the round under way: its phase, the slices of that phase done, and
what they measured so far. A host disk that fills up while it is saved is one line
(:class:`StateError`); the state before it stays whole.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import platformdirs

from cardbench.engine.errors import shown
from cardbench.errors import CardbenchError

STATE_SCHEMA = "cardbench.endure-state/1"
_FULL = (errno.ENOSPC, errno.EDQUOT)


class StateError(CardbenchError):
    """The host could not save the run's state (its disk is full, or failed): the run stops, what was
    measured is kept (``partial``), and the state saved last is still whole for ``--resume``."""


def state_dir() -> Path:
    return Path(platformdirs.user_state_dir("cardbench")) / "endure"


def state_path(card_uuid: str, directory: str | os.PathLike | None = None) -> Path:
    return Path(directory or state_dir()) / f"{card_uuid}.json"


def save_state(state: dict[str, Any], directory: str | os.PathLike | None = None) -> Path:
    """Replace the card's state file with ``state``, atomically and durably; StateError (one line)
    when the host cannot (the file saved before stays as it was)."""
    path = state_path(state["card_uuid"], directory)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = json.dumps(state, separators=(",", ":")).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if e.errno in _FULL:
            raise StateError(f"the host's disk is full: cannot save the endurance state {shown(str(path))}; "
                             "stopped (the rounds measured are kept; free some space and run "
                             "`cardbench endure --resume`)") from None
        raise StateError(f"cannot save the endurance state {shown(str(path))}: {e.strerror}; stopped (the rounds "
                         "measured are kept)") from None
    return path


def load_state(card_uuid: str, directory: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The saved state of a card, or None when this host has none (or it does not parse)."""
    path = state_path(card_uuid, directory)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("schema") != STATE_SCHEMA or state.get("card_uuid") != card_uuid:
        return None
    return state


#: how a run may have ended and still be gone on with (Ctrl-C, a card that did not come back in time)
RESUMABLE = (None, "interrupted", "dead")


def resumable(state: dict[str, Any]) -> bool:
    return state.get("ended") in RESUMABLE


def saved_states(directory: str | os.PathLike | None = None, *, unfinished: bool = True) -> list[dict[str, Any]]:
    """Every state saved on this host (only those that can be gone on with, by default), oldest first."""
    d = Path(directory or state_dir())
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    out = []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        st = load_state(name[:-5], d)
        if st is not None and not (unfinished and not resumable(st)):
            out.append(st)
    out.sort(key=lambda s: s.get("started_t") or 0)
    return out
