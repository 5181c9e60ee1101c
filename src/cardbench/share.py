"""Sharing records with a station server (``cardbench serve``), through the outbox.

``--share URL --token TOKEN`` (or ``CARDBENCH_SHARE`` / ``CARDBENCH_TOKEN``) on run, verify,
drawer and import: every record :func:`cardbench.record.record` keeps locally is also uploaded
(``POST URL/api/v1/records``). When the server is down, or answers 5xx or 401 (a token to fix),
the record waits in the outbox under the destination ``share:URL`` (the outbox's second kind of
destination, beside a store) and ``cardbench sync --share URL`` (or the next share) sends it. The
server stores by the record's own id, so a record sent twice (an answer lost after the commit)
is stored once. A refusal that sending again cannot mend (400 a bad document, 403 another
station's id, 413) is a warning and is not sent again: the record stays in the local store, and
an outbox file of it is set aside as ``.bad`` by ``flush``.

:class:`Uploader` has the store's save methods, so :func:`cardbench.store.outbox.flush` moves the
outbox into a server exactly as into a store.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable

import click

from cardbench import kinds
from cardbench.errors import StoreError, UsageError
from cardbench.progress import Advance, set_total
from cardbench.signals import start_thread
from cardbench.store import outbox
from cardbench.store.core import open_store
from cardbench.store.export import EXPORT_SCHEMA, collect

SHARE_ENV = "CARDBENCH_SHARE"
TOKEN_ENV = "CARDBENCH_TOKEN"
PREFIX = "share:"
TIMEOUT = 20.0


def share_key(url: str) -> str:
    return PREFIX + url.rstrip("/")


def is_share_key(key: str) -> bool:
    return str(key).startswith(PREFIX)


class Refused(UsageError):
    """The server refused the record for good (4xx other than 401)."""


class Uploader:
    """A station server as the outbox sees a store: ``save_record`` (any kind of record)."""

    def __init__(self, url: str, token: str | None, timeout: float = TIMEOUT):
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--share {url!r}: give the server's http:// or https:// URL")
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout
        self.location = self.url

    def post(self, doc: Any) -> dict:
        body = json.dumps(doc, ensure_ascii=False).encode()
        req = urllib.request.Request(self.url + "/api/v1/records", data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {self.token}"} if self.token else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                why = json.loads(e.read()).get("error") or e.reason
            except (ValueError, AttributeError, OSError):
                why = e.reason
            if e.code == 401 or e.code >= 500 or e.code == 429:
                raise StoreError(f"station server {self.url}: {e.code} {why}") from None
            raise Refused(f"station server {self.url} refused it: {e.code} {why}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            raise StoreError(f"station server {self.url}: {reason}") from None

    def post_live(self, payload: dict) -> None:
        """What the station is doing now, for its live page (``POST /api/v1/live``)."""
        req = urllib.request.Request(self.url + "/api/v1/live", data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {self.token}"} if self.token else {})})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            resp.read()

    def save_record(self, item: Any) -> str:
        doc = kinds.document_of(item)
        self.post(doc)
        return str(doc.get("id"))


#: what the running command's --share / --token said (set by :func:`share_options` at each
#: invocation, so one command's choice does not outlive it); None: not a command, read the environment
_COMMAND: dict[str, str | None] | None = None


def destination(url: str | None = None, token: str | None = None) -> tuple[str | None, str | None]:
    """The server to share with and the token: given here, else the command's --share/--token
    (which click reads from CARDBENCH_SHARE / CARDBENCH_TOKEN too), else those variables."""
    given = _COMMAND if _COMMAND is not None else {"url": os.environ.get(SHARE_ENV), "token": os.environ.get(TOKEN_ENV)}
    return (url or given.get("url") or None), (token or given.get("token") or None)


@dataclass
class Shared:
    sent: int = 0
    kept: list = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    error: str | None = None

    def warnings(self, url: str) -> list[str]:
        out = []
        if self.kept:
            out.append(f"not shared with {url} yet ({self.error}); {len(self.kept)} kept in the outbox: "
                       f"`cardbench sync --share {url}` sends {'it' if len(self.kept) == 1 else 'them'}")
        out += self.refused
        return out


def share_items(items: Iterable, url: str | None = None, token: str | None = None) -> Shared | None:
    """Upload ``items`` (records of the kinds that are shared) after what waits in the outbox
    for this server; each that cannot be sent now is kept in the outbox. None when not sharing."""
    url, token = destination(url, token)
    if not url:
        return None
    up = Uploader(url, token)
    key = share_key(url)
    out = Shared()
    try:
        out.sent += len(outbox.flush(up, key).saved)
    except StoreError as e:
        out.error = e.message
    for it in items:
        if not kinds.kind_of(it).shared:
            continue
        try:
            if out.error is None:
                up.save_record(it)
                out.sent += 1
                continue
        except Refused as e:
            out.refused.append(e.message)
            continue
        except StoreError as e:
            out.error = e.message
        try:
            out.kept.append(outbox.keep(it, key, out.error or ""))
        except OSError as e:
            out.refused.append(f"not shared and the outbox could not keep it: {e}")
    return out


def sync_share(url: str | None = None, token: str | None = None) -> list[str]:
    """``cardbench sync --share URL``: send what the outbox keeps for this server."""
    url, token = destination(url, token)
    if not url:
        raise UsageError("--share URL (or CARDBENCH_SHARE) names the server")
    up = Uploader(url, token)
    key = share_key(url)
    try:
        done = outbox.flush(up, key)
    except StoreError as e:
        left = outbox.waiting(key)
        raise StoreError(f"{e.message}; {outbox.describe(left)} stay in the outbox") from None
    lines = [f"shared {outbox.describe(kinds.count_items(done.saved))} from the outbox with {up.url}" if done.saved
             else f"the outbox holds nothing for {up.url}"]
    if done.bad:
        lines.append(f"{len(done.bad)} refused and set aside as .bad: {', '.join(str(p) for p in done.bad[:3])}")
    return lines


def share_store(db: Any, url: str | None = None, token: str | None = None, *, batch: int = 200,
                **filters: Any) -> Shared:
    """``cardbench share``: send what a local store holds (results in batches, documents one by one)."""
    url, token = destination(url, token)
    if not url:
        raise UsageError("--share URL (or CARDBENCH_SHARE) names the server")
    up = Uploader(url, token)
    with open_store(db) as store:
        doc = collect(store, **filters)
    out = Shared()
    results = doc[kinds.RESULT.section] if kinds.RESULT.shared else []
    empty: dict[str, list] = {k.section: [] for k in kinds.kinds()}
    for i in range(0, len(results), batch):
        part = results[i:i + batch]
        up.post({"schema": EXPORT_SCHEMA, "cards": [], **empty, kinds.RESULT.section: part})
        out.sent += len(part)
    for k in kinds.kinds():
        if k.table.native or not k.shared:
            continue
        for d in doc[k.section]:
            try:
                up.post(d)
                out.sent += 1
            except Refused as e:
                out.refused.append(e.message)
    return out


class LiveProgress:
    """A progress reporter that shows the same tasks and also tells the server's live page what
    the station is doing (the card, the task, how far): sent from a background thread at most
    every ``every`` seconds, never waited for, its failures ignored, so a measurement is never slowed
    or stopped by the server."""

    def __init__(self, inner, url: str, token: str | None, every: float = 0.5):
        self.inner, self.every = inner, every
        self.up = Uploader(url, token, timeout=3)
        self.latest: dict | None = None
        self.wake = threading.Event()
        threading.Thread(target=self._send, name="cardbench-live", daemon=True).start()

    def _set(self, task: str, done: int, total: int | None) -> None:
        self.latest = {"task": task, "done": done, "total": total}
        self.wake.set()

    def _send(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            state = self.latest
            try:
                if state is not None:
                    self.up.post_live(state)
            except Exception:  # noqa: BLE001 - the live page is a courtesy; the records go through the outbox
                pass
            time.sleep(self.every)

    @contextmanager
    def task(self, description: str, total: int | None):
        with self.inner.task(description, total) as advance:
            done, whole = 0, total
            self._set(description, 0, total)

            def adv(n: int) -> None:
                nonlocal done
                advance(n)
                done += n
                self._set(description, done, whole)

            def learn_total(t: int) -> None:
                nonlocal whole
                set_total(advance, t)
                whole = t
            yield Advance(adv, learn_total)


class LiveCards:
    """What many cards at once are doing, for a station server's live page (``cardbench endure``
    on several cards): the latest event of each card (its ``key``) goes in the extended body of
    ``POST /api/v1/live`` (``card``: key, label, and on the first event of a key its ``identity``,
    which announces the card; ``kind``, ``round``, ``bytes_written``, ``rate_bytes_per_s``,
    ``bad_fraction``, ``eta_s``). Sent from one background thread, at most every ``every`` seconds,
    never waited for, its failures ignored (an identity not delivered goes with the next event):
    the records themselves go through the outbox."""

    def __init__(self, url: str, token: str | None, every: float = 0.5):
        self.up = Uploader(url, token, timeout=3)
        self.every = every
        self.pending: dict[str, dict] = {}
        self.announced: set[str] = set()
        self.identities: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.closed = False
        self.sent = 0
        self.thread = threading.Thread(target=self._send, name="cardbench-live-cards", daemon=True)
        start_thread(self.thread)

    def update(self, key: str, label: str, task: str, *, identity: dict | None = None, **fields: Any) -> None:
        """The newest state of card ``key`` (replaces one not sent yet)."""
        with self.lock:
            if identity is not None:
                self.identities.setdefault(key, identity)
            self.pending[key] = {"task": task, "card": {"key": key, "label": label}, **fields}
        self.wake.set()

    def _body(self, key: str, event: dict) -> dict:
        body = json.loads(json.dumps(event))
        if key not in self.announced:      # announce the card (an empty identity where none is known)
            body["card"]["identity"] = self.identities.get(key) or {}
        return body

    def _send_pending(self) -> None:
        with self.lock:
            todo, self.pending = self.pending, {}
        for key, event in todo.items():
            body = self._body(key, event)
            try:
                self.up.post_live(body)
            except Exception:  # noqa: BLE001 - the live page is a courtesy; the records go through the outbox
                continue
            self.sent += 1
            if "identity" in body["card"]:
                self.announced.add(key)

    def _send(self) -> None:
        while not self.closed:
            self.wake.wait()
            self.wake.clear()
            self._send_pending()
            time.sleep(self.every)

    def close(self) -> None:
        """Send what is left (the cards' last state), then stop the thread."""
        self.closed = True
        self.wake.set()
        self.thread.join(timeout=5)
        self._send_pending()


def live_cards() -> LiveCards | None:
    """A :class:`LiveCards` for this command's --share server, or None when it does not share."""
    url, token = destination()
    return LiveCards(url, token) if url else None


def live_progress(inner):
    """``inner`` wrapped in a :class:`LiveProgress` when this command shares (--share), else ``inner``."""
    url, token = destination()
    return LiveProgress(inner, url, token) if url else inner


def _remember(key: str):
    def callback(ctx, param, value):
        global _COMMAND
        if _COMMAND is None or ctx.meta.get("cardbench.share") is None:
            _COMMAND = {"url": None, "token": None}
            ctx.meta["cardbench.share"] = True
        _COMMAND[key] = value or None
        return value
    return callback


def share_options(f):
    """``--share URL`` and ``--token TOKEN`` (also CARDBENCH_SHARE / CARDBENCH_TOKEN): what this
    command stores is also shared with that station server (see :mod:`cardbench.share`)."""
    f = click.option("--token", envvar=TOKEN_ENV, metavar="TOKEN", expose_value=False, callback=_remember("token"),
                     help="This station's token for --share (cardbench serve token add STATION).")(f)
    f = click.option("--share", envvar=SHARE_ENV, metavar="URL", expose_value=False, callback=_remember("url"),
                     help="Also upload what is stored to this station server (cardbench serve); kept in the "
                          "outbox while it cannot be reached.")(f)
    return f
