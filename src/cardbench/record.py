"""Keeping what was measured: store it, or keep it in the outbox until the store takes it.

The one way every command (run, verify, import, demo, and a drawer session) saves:

    from cardbench.record import record
    rec = record(result, db, show=lambda: print(render(result)))   # or a verify document, or a list
    if rec.problem():                                             # not stored: kept in the outbox
        raise rec.problem()

:func:`record` opens the store (``db``: None, a path or a URL, as ``open_store``), first moves in
quietly what the outbox holds for that store, saves the items, and judges the stored results of
their readers again (:func:`cardbench.verdicts.readers.rejudge_reader`: the caller's results take
their re-judged marks, so what is shown is what is stored). ``show`` is called next, whatever
happened, so the result is on screen before anything else can go wrong. If the store failed, for
any reason (disk full, read-only, locked past the timeout, PostgreSQL down, the connection lost
mid-transaction), each item is then written to the outbox (:mod:`cardbench.store.outbox`) and
:meth:`Recorded.problem` is the one line to say: where it is kept and how it will be stored
(exit code 9, ``NotStored``). :func:`sync` moves the outbox into a store (``cardbench sync``);
:func:`check_store` is the check before a test (a bad ``--db`` fails before the card is touched).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from cardbench import kinds
from cardbench.errors import CardbenchError, NotStored, StoreError
from cardbench.result import Result
from cardbench.share import destination, share_items
from cardbench.store import outbox
from cardbench.store.core import open_store, parse_target, store_key
from cardbench.verdicts.readers import REJUDGED_SOURCES, rejudge_reader


@dataclass
class Recorded:
    """What :func:`record` did with the items."""

    location: str                     # the store, for messages (password hidden)
    stored: bool
    kept: list[Path] = field(default_factory=list)   # outbox files, when not stored
    error: str | None = None          # why the store did not take them
    keep_error: str | None = None     # why the outbox could not keep them either
    warnings: list[str] = field(default_factory=list)
    sync_command: str = "cardbench sync"

    def problem(self) -> CardbenchError | None:
        """None when stored; else the one line to end with: NotStored (kept in the outbox, exit 9),
        or StoreError (exit 6) when even the outbox could not keep it."""
        if self.stored:
            return None
        why = self.error or "the store failed"
        if self.kept and not self.keep_error:
            where = self.kept[0] if len(self.kept) == 1 else f"{len(self.kept)} files in {self.kept[0].parent}"
            return NotStored(f"not stored: {why}; kept in {where}; `{self.sync_command}` (or the next save) "
                             "will store it")
        return StoreError(f"not stored: {why}; and the outbox could not keep it either ({self.keep_error}): "
                          "what is printed above is all that remains")


def record(items: Result | dict | Iterable[Result | dict], db: str | os.PathLike | None = None, *,
           show: Callable[[], None] | None = None) -> Recorded:
    """Store ``items`` (a Result, a document of another kind of :mod:`cardbench.kinds`: a
    ``cardbench.verify/1``, ``cardbench.probe/1``, ``cardbench.session/1``, ..., or a list of them) in ``db``,
    or keep them in the outbox; ``show()`` is called in between (see the module docstring)."""
    todo = [items] if isinstance(items, (Result, dict)) else list(items)
    for it in todo:
        outbox.kind_of(it)                 # a programming error is raised, not kept
    key = store_key(db)
    rec = Recorded(location=describe_store(db), stored=False, sync_command=sync_command(db))
    try:
        with open_store(db) as store:
            rec.location = store.location
            moved = _flush_quietly(store, key)
            for it in todo:
                store.save_record(outbox.document_of(it) if isinstance(it, dict) else it)
            rec.stored = True
            try:
                _rejudge(store, [*moved, *todo], todo)
            except CardbenchError as e:    # stored; only judging its reader again failed
                rec.warnings.append(f"stored results of this reader not judged again: {e.message}")
    except StoreError as e:
        if not rec.stored:
            rec.error = e.message
    except OSError as e:                   # the store's file system failing under sqlite3's feet
        rec.error = f"results database {rec.location}: {e.strerror or e}"
    try:
        if show is not None:
            show()
    finally:
        if not rec.stored:
            _keep(rec, todo, key)
        _share(rec, todo)
    return rec


def _share(rec: Recorded, items: list) -> None:
    """With --share / CARDBENCH_SHARE: upload them too, or keep them in the outbox for the server."""
    url = destination()[0]
    if not url:
        return
    try:
        done = share_items(items)
    except CardbenchError as e:
        rec.warnings.append(f"not shared: {e.message}")
        return
    if done is not None:
        rec.warnings += done.warnings(url)


def check_store(db: str | os.PathLike | None = None) -> str:
    """Open the store before a test, so a bad ``--db`` fails (StoreError, exit 6) before a byte is
    written to the card; moves in what the outbox holds for it, quietly. Returns its location."""
    with open_store(db) as store:
        _flush_quietly(store, store_key(db))
        return store.location


@dataclass
class Synced:
    """What :func:`sync` did."""

    location: str
    saved: list = field(default_factory=list)
    bad: list[Path] = field(default_factory=list)
    elsewhere: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        counts = kinds.count_items(self.saved)
        out = [f"stored {outbox.describe(counts)} from the outbox in {self.location}" if self.saved
               else f"the outbox holds nothing for {self.location}"]
        for where, n in sorted(self.elsewhere.items()):
            out.append(f"{n} more wait{'s' if n == 1 else ''} for {where}: `{sync_command(where)}`")
        if self.bad:
            out.append(f"{len(self.bad)} outbox file(s) cannot be read and were set aside as .bad: "
                       f"{', '.join(str(p) for p in self.bad[:3])}")
        return out + self.warnings


def sync(db: str | os.PathLike | None = None) -> Synced:
    """Move what the outbox holds for ``db`` into it (``cardbench sync``). Idempotent by id: run
    twice, or after a sync that was cut short, nothing is stored twice. StoreError (exit 6) when
    the store cannot be written; the outbox is then left as it was."""
    key = store_key(db)
    try:
        with open_store(db) as store:
            done = outbox.flush(store, key)
            out = Synced(store.location, done.saved, done.bad)
            try:
                _rejudge(store, done.saved, [])
            except CardbenchError as e:
                out.warnings.append(f"stored results of their readers not judged again: {e.message}")
    except StoreError as e:
        left = outbox.waiting(key)
        if left:
            raise StoreError(f"{e.message}; {outbox.describe(left)} stay in the outbox") from None
        raise
    out.elsewhere = outbox.elsewhere(key)
    return out


def waiting_notice(db: str | os.PathLike | None = None) -> str | None:
    """For ``cardbench results``: one line when the outbox holds items for this store, else None."""
    counts = outbox.waiting(store_key(db))
    if not counts:
        return None
    n = sum(counts.values())
    return (f"{outbox.describe(counts)} in the outbox ({outbox.outbox_dir()}) {'is' if n == 1 else 'are'} "
            f"not in this store yet: `{sync_command(db)}` stores {'it' if n == 1 else 'them'}")


def describe_store(db: str | os.PathLike | None) -> str:
    try:
        return store_key(db)
    except CardbenchError:
        return str(db)


def sync_command(db: str | os.PathLike | None) -> str:
    """The command that stores what waits for ``db`` (a URL with a password is not repeated)."""
    if str(db or "").startswith("share:"):
        return f"cardbench sync --share {shlex.quote(str(db)[6:])}"
    if db is None or os.environ.get("CARDBENCH_DB") == os.fspath(db):
        return "cardbench sync"
    text = os.fspath(db)
    if parse_target(text)[0] == "postgresql" and (describe_store(text) != text or ":***@" in text):
        return "cardbench sync --db URL"       # its password is not printed
    return f"cardbench sync --db {shlex.quote(text)}"


def _flush_quietly(store, key: str) -> list:
    """The outbox first, before what is saved now; any trouble is left for `cardbench sync` to say."""
    try:
        return outbox.flush(store, key).saved
    except (StoreError, OSError):
        return []


def _rejudge(store, saved: list, mine: list) -> None:
    """Judge the stored results of the readers of the results just stored again; the caller's own
    results (``mine``) take their new marks."""
    readers = dict.fromkeys(r.reader.identity() for r in saved
                            if isinstance(r, Result) and r.source in REJUDGED_SOURCES)
    by_id = {r.id: r for r in mine if isinstance(r, Result)}
    for identity in readers:
        for again in rejudge_reader(store, identity):
            own = by_id.get(again.id)
            if own is not None:
                own.tests, own.claims, own.warnings = again.tests, again.claims, again.warnings


def _keep(rec: Recorded, items: list, key: str) -> None:
    for it in items:
        try:
            rec.kept.append(outbox.keep(it, key, rec.error or ""))
        except OSError as e:
            rec.keep_error = f"{outbox.outbox_dir()}: {e.strerror or e}"
