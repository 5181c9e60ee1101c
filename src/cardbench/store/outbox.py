"""The outbox: what was measured but could not be stored yet, kept until a store takes it.

One file per kept record of any kind (:mod:`cardbench.kinds`: a result, a verify document, a
reader probe, a drawer session, ...), in ``platformdirs.user_data_dir("cardbench")/outbox``
(``~/.local/share/cardbench/outbox``): written under a temporary name, fsynced, renamed into place
and the directory fsynced, so a file there is always whole. A file is never replaced: keeping the
same result again (a verify run that is resumed) adds a newer file, and the newest is stored last.

A file (``cardbench.outbox/1``) names the store it was meant for (:func:`store_key`: a SQLite
file's absolute path, a PostgreSQL URL without its password), why it was not stored, and the
document itself (its kind: a :mod:`cardbench.kinds` name). :func:`flush` moves the files of one
store into it: each is saved (``save_record`` replaces by id, so a file saved twice, after a
crash between the save and the removal, is still stored once) and only then removed; a file
another process is moving at the same moment (``flock``) is left to that process.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import platformdirs

from cardbench import kinds
from cardbench.errors import UsageError
from cardbench.kinds import document_of
from cardbench.result import Result

OUTBOX_SCHEMA = "cardbench.outbox/1"

#: a result, or a document of another kind (cardbench.verify/1, cardbench.probe/1, ...)
Item = Union[Result, dict]


def outbox_dir() -> Path:
    return Path(platformdirs.user_data_dir("cardbench")) / "outbox"


def kind_of(item: Item) -> str:
    """The name of the kind of ``item`` ("result", "verify", ...); UsageError when it is no kind's."""
    return kinds.kind_of(item).name


@dataclass
class Entry:
    """One file of the outbox."""

    path: Path
    kind: str
    id: str
    store: str
    kept_at: str
    reason: str
    document: dict

    def item(self) -> Item:
        return kinds.kind_named(self.kind).load(self.document)


@dataclass
class Flushed:
    """What :func:`flush` did: the items now stored, and files that cannot be read (set aside as ``.bad``)."""

    saved: list = field(default_factory=list)
    bad: list[Path] = field(default_factory=list)


def keep(item: Item, store: str, reason: str, directory: Path | None = None) -> Path:
    """Write ``item`` to the outbox for ``store`` (a :func:`store_key`); returns its file.
    Raises OSError when the outbox itself cannot be written (the disk of the user data dir is
    full too)."""
    kind = kind_of(item)
    doc = document_of(item)
    d = directory or outbox_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = _dt.datetime.now(_dt.timezone.utc)
    name = f"{now.strftime('%Y%m%dT%H%M%S%f')}-{kind}-{_safe(str(doc['id']))}-{os.getpid()}.json"
    text = json.dumps({"schema": OUTBOX_SCHEMA, "kind": kind, "id": str(doc["id"]), "store": store,
                       "kept_at": now.isoformat(timespec="seconds"), "reason": reason, "document": doc},
                      ensure_ascii=False, indent=1)
    tmp = d / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            data = text.encode()
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, d / name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(d)
    return d / name


def entries(directory: Path | None = None) -> list[Entry]:
    """Every readable file of the outbox, oldest first (unreadable ones are skipped here)."""
    out = []
    for path in _files(directory):
        e = _read(path)
        if e is not None:
            out.append(e)
    return out


def waiting(store: str, directory: Path | None = None) -> dict[str, int]:
    """How many results and verify documents (distinct ids) wait for ``store``, e.g. {"result": 1}."""
    ids: dict[str, set] = {}
    for e in entries(directory):
        if e.store == store:
            ids.setdefault(e.kind, set()).add(e.id)
    return {k: len(v) for k, v in ids.items()}


def elsewhere(store: str, directory: Path | None = None) -> dict[str, int]:
    """How many items (distinct ids) wait for each other store."""
    ids: dict[str, set] = {}
    for e in entries(directory):
        if e.store != store:
            ids.setdefault(e.store, set()).add((e.kind, e.id))
    return {k: len(v) for k, v in ids.items()}


def flush(store: Any, key: str, directory: Path | None = None) -> Flushed:
    """Save every outbox file meant for ``key`` into the open ``store`` (oldest first), removing
    each once it is saved. A StoreError stops it (what is left stays for the next time)."""
    done = Flushed()
    for path in _files(directory):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue              # moved by another process meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue          # another process is moving it right now
            if not _same_file(path, fd):
                continue
            entry = _read(path)
            if entry is None:
                _set_aside(path)
                done.bad.append(path)
                continue
            if entry.store != key:
                continue
            try:
                item = entry.item()
                store.save_record(item)
            except (UsageError, ValueError, KeyError, TypeError, ArithmeticError):
                _set_aside(path)
                done.bad.append(path)
                continue
            os.unlink(path)
            done.saved.append(item)
        finally:
            os.close(fd)
    if done.saved:
        try:
            _fsync_dir(path.parent)
        except OSError:
            pass
    return done


def _files(directory: Path | None) -> list[Path]:
    d = directory or outbox_dir()
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return [d / n for n in sorted(names) if n.endswith(".json") and not n.startswith(".")]


def _read(path: Path) -> Entry | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("schema") != OUTBOX_SCHEMA or raw.get("kind") not in kinds.kind_names():
            return None
        return Entry(path, raw["kind"], str(raw["id"]), str(raw["store"]), str(raw.get("kept_at") or ""),
                     str(raw.get("reason") or ""), dict(raw["document"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _set_aside(path: Path) -> None:
    """An outbox file that cannot be read or stored: renamed ``.bad`` so it is kept but not tried again."""
    try:
        os.rename(path, path.with_suffix(".bad"))
    except OSError:
        pass


def _same_file(path: Path, fd: int) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except OSError:
        return False


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:64] or "x"


def describe(counts: dict[str, int]) -> str:
    """{"result": 2, "verify": 1} -> "2 results and 1 verify result"."""
    return kinds.describe(counts)


__all__ = ["OUTBOX_SCHEMA", "Entry", "kind_of", "document_of", "Flushed", "outbox_dir", "keep", "entries", "waiting", "elsewhere", "flush",
           "describe"]
