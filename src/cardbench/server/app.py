"""The station server's ASGI application (Starlette), over one store.

Pages (``/``, ``/card/{identity}``, ``/model/{key}``, ``/reader/{identity}``, ``/readers``,
``/live``, ``/live/{station}`` and its event stream), and the API:

``GET  /api/v1/results`` and ``/api/v1/export``   the ``cardbench.export/2`` document (filters
                                                   ``card``, ``reader``, ``since``, ``until``, ``test``)
``GET  /api/v1/results/{id}``                      one ``cardbench.result/1`` document
``GET  /api/v1/records/{kind}``                    the stored documents of one kind (``cardbench.kinds``:
                                                   result, verify, probe, session, ...), oldest first
                                                   (filters ``card``, ``reader``, ``since``, ``until``)
``GET  /api/v1/records/{kind}/{id}``               one record of that kind
``POST /api/v1/records``                           store records (any document ``cardbench import``
                                                   reads); ``Authorization: Bearer <station token>``
``POST /api/v1/live``                              a station's progress, per card (cardbench.server.live):
                                                   one row kept per (station, card key); 409 a card key
                                                   the station never announced

Answers to bad requests are one line, ``{"error": "..."}``: 400 a document that cannot be read
(truncated, a newer schema, the wrong shape), 401 a token missing, wrong or revoked, 403 a record
another station shared first (a station's own record sent again replaces it: stored once), 413 a body over the limit
(refused from its Content-Length before it is read, or as soon as it passes the limit), 404 no
such page or record (an id is read back as itself, never stripped), 429 a station over its rate
(``--live-rate``, ``--upload-rate``; with Retry-After), 503 the store failing (nothing stored;
the station's outbox keeps it); never a 500 for what a client sends (issue 34). Writes are one
transaction each: all of a request or nothing. Every answer carries SECURITY_HEADERS. Who names
a card or reader: cardbench.server.tokens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hmac
import json
import math
import os
import threading
import time
from typing import Any
from urllib.parse import quote, unquote_to_bytes, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from cardbench import kinds
from cardbench.errors import CardbenchError, NotFound, StoreError
from cardbench.result import SCHEMA as RESULT_SCHEMA
from cardbench.result import Card, Reader
from cardbench.server import live, pages, tokens
from cardbench.store.core import StorePool
from cardbench.store.export import collect, read_export
from cardbench.units import finite_or_null

MAX_BODY = 16 * 1024 * 1024
#: `cardbench serve --workers N`: the settings each worker process makes its app from (JSON:
#: db, read_token, max_body), read by :func:`app_from_env`
APP_ENV = "CARDBENCH_SERVE_APP"
PAGE_SIZE = 50
MAX_PAGE = 10 ** 9
#: the longest record id the server takes (a uuid is 32 or 36 characters); longer ids are refused
#: at upload (400) and are no record's when read (404)
MAX_ID_LENGTH = 200
CSP = ("default-src 'self'; style-src 'unsafe-inline'; img-src data:; script-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
#: on every answer (pages, API, errors, the script, 404 and 405 too)
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
                    (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
#: the cookie a browser opened with ``?token=`` keeps the read token in
READ_COOKIE = "cardbench_read"
#: live events (POST /api/v1/live) a station may send a second, on average (``serve --live-rate``);
#: a burst of twice as many passes. `drawer --share` sends at most 2 a second; a lab's endurance
#: run a few a second per station
LIVE_RATE = 50.0
#: a write (an upload, a live event) with a body up to this size runs on the event loop itself,
#: on PostgreSQL, when a pooled connection is idle at once (Server.write): no thread hand-off and
#: no thread contending for the interpreter's lock, so 8 stations uploading one record a request
#: cost the server 1.3 to 1.7 ms of CPU a record, against 1.5 to 2.1 on a writer thread and 3.4
#: on Starlette's 40 (bench/serve_load.py). A bigger body (a batch: 50 records take ~100 ms)
#: would hold the loop, and every page and live stream of the process with it: a thread's.
INLINE_MAX = 64 * 1024
#: the threads that take the other writes (a big body, a store that failed or has no idle
#: connection, SQLite), with the store's waits and retries; reads run on Starlette's threads
WRITE_THREADS = 3


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


class JSON(JSONResponse):
    """A JSON answer that JSON can always hold: a record stored before NaN and Infinity were
    refused is sent with them as null, a lone surrogate as its escape, never a 500."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except (ValueError, UnicodeEncodeError):
            return json.dumps(finite_or_null(content), allow_nan=False, separators=(",", ":")).encode("ascii")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSON({"error": " ".join(str(message).split())}, status_code=status, headers=headers)


class RateLimit:
    """At most ``rate`` events a second per key on average, a burst of ``2 * rate`` (a token
    bucket per key, in this process). ``rate`` 0: no limit."""

    def __init__(self, rate: float, what: str = "events"):
        self.rate, self.what = float(rate), what
        self.burst = max(1.0, 2 * self.rate)
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()        # checked on the writer threads

    def check(self, key: str) -> None:
        """HTTPError 429 (one line, Retry-After) when ``key`` is over its rate; else counts one."""
        if self.rate <= 0:
            return
        with self.lock:
            now = time.monotonic()
            level, then = self.buckets.get(key, (self.burst, now))
            level = min(self.burst, level + (now - then) * self.rate)
            if level >= 1:
                self.buckets[key] = (level - 1, now)
                return
            self.buckets[key] = (level, now)
        wait = max(1, math.ceil((1 - level) / self.rate))
        raise HTTPError(429, f"slow down: {self.rate:g} {self.what}/s allowed", {"Retry-After": str(wait)})


class Server:
    def __init__(self, db: Any, *, read_token: str | None = None, max_body: int = MAX_BODY,
                 live_rate: float = LIVE_RATE, upload_rate: float = 0):
        self.db, self.read_token, self.max_body = db, read_token, max_body
        self.live_limit = RateLimit(live_rate, "events")
        self.upload_limit = RateLimit(upload_rate, "uploads")
        self.stores = StorePool(db)     # creates / migrates once, and fails now on a bad --db
        self.location = self.stores.location
        self.hub = live.Hub(db, self.call)
        self.writers = concurrent.futures.ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="cardbench-write")

    async def write(self, fn, raw: bytes, *args):
        """``fn(store, raw, *args)``, a write of a request's body ``raw``. On PostgreSQL, a body up
        to INLINE_MAX runs here, on the event loop, when a pooled connection is idle at once,
        with no wait and no retry in it (``StorePool.store(now=True)``). Anything else, and one
        that failed so (StoreError: nothing was stored, or a commit whose answer was lost; a
        write replaces by id, so doing it again stores it once), runs on a writer thread with
        the store's waits for a connection, reconnects and retries."""
        if self.stores.pool is not None and len(raw) <= INLINE_MAX:
            try:
                with self.stores.store(now=True) as st:
                    return fn(st, raw, *args)
            except StoreError:
                pass
        return await asyncio.get_running_loop().run_in_executor(
            self.writers, functools.partial(self.call, fn, raw, *args))

    def hide_location(self, message: str) -> str:
        """A message without the store's path or URL (a client has no business knowing it)."""
        loc = self.location
        return message.replace(f"results database {loc}", "the results store").replace(f" in {loc}", "") \
            .replace(loc, "the store")

    # -- the store: a pooled connection per call (PostgreSQL), a store per worker thread (SQLite) --
    def call(self, fn, *args, **kw):
        """``fn(store, ...)`` in this thread, on a store taken for this call (a StoreError drops
        a broken connection; the next call gets a working one)."""
        with self.stores.store() as st:
            return fn(st, *args, **kw)

    # -- reading -----------------------------------------------------------------------------------
    def check_read(self, request: Request) -> None:
        if self.read_token is None:
            return
        given = _bearer(request) or request.query_params.get("token") or request.cookies.get(READ_COOKIE)
        if not self.is_read_token(given):
            raise HTTPError(401, "reading this server takes its read token (Authorization: Bearer TOKEN)")

    def is_read_token(self, given: str | None) -> bool:
        """In constant time (hmac.compare_digest), whatever the text given."""
        if self.read_token is None or given is None:
            return False
        return hmac.compare_digest(given.encode("utf-8", "backslashreplace"),
                                   self.read_token.encode("utf-8", "backslashreplace"))

    # -- writing -----------------------------------------------------------------------------------
    async def body(self, request: Request) -> bytes:
        return await read_body(request, self.max_body)


    def station(self, store, token: str | None, limit: RateLimit, counted: list[str]) -> str:
        """The station of a write's token (401 when it is missing, unknown or revoked; 429 past
        its ``limit``). ``counted``: the request's own list, the station appended once ``limit``
        has counted it, so a write done again on a writer thread (:meth:`write`) counts once."""
        station = tokens.station_of(store, token) if token else None
        if station is None:
            raise HTTPError(401, "this token is not known here or was revoked")
        if not counted:
            limit.check(station)
            counted.append(station)
        return station

    def upload(self, store, raw: bytes, token: str, counted: list[str]):
        """A station's upload (:meth:`write`): its token checked, then its records stored
        (:meth:`store_records`); returns (answer, station)."""
        station = self.station(store, token, self.upload_limit, counted)
        return self.store_records(station, raw, store), station

    def progress(self, store, raw: bytes, token: str, counted: list[str]):
        """A station's live event (POST /api/v1/live, :meth:`write`); returns (station, its card key)."""
        station = self.station(store, token, self.live_limit, counted)
        ev = live.read_event(raw)                       # UsageError: 400
        live.write_progress(store, station, ev)         # Unannounced: 409
        return station, ev["card_key"]

    def store_records(self, station: str, raw: bytes, store):
        """Read, check and store one request's records in ``store`` (one transaction); returns
        the answer."""
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:     # RecursionError: nested too deep
            raise HTTPError(400, f"the body is not JSON (truncated?): {e}") from None
        try:
            contents = read_export(doc, path="the body")      # UsageError: 400
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise HTTPError(400, f"the body cannot be read as cardbench records ({type(e).__name__}: {e})") from None
        _own_ids(doc)
        for k, rid in contents.ids():
            problem = id_problem(rid)
            if problem:
                raise HTTPError(400, f"{k.noun} id {rid[:60]!r}: {problem}")
        items = contents.items()
        if not items:
            raise HTTPError(400, "the body holds no records")
        before = tokens.claimer(station, names_in(contents))
        ids = store.save_all(items, before=before)
        return {"stored": len(ids), "ids": ids, "station": station}


async def read_body(request: Request, max_body: int) -> bytes:
    """The body, refused (413) from its Content-Length before it is read, or once it passes ``max_body``."""
    size = request.headers.get("content-length")
    if size is not None:
        try:
            n = int(size)
        except ValueError:
            raise HTTPError(400, "Content-Length is not a number") from None
        if n > max_body:
            raise HTTPError(413, f"the body is {n} bytes; this server takes at most {max_body}")
    chunks, total = [], 0
    try:
        async for chunk in request.stream():
            total += len(chunk)
            if total > max_body:
                raise HTTPError(413, f"the body passes {max_body} bytes, this server's limit")
            chunks.append(chunk)
    except ClientDisconnect:
        raise HTTPError(400, "the body was cut short (the client went away)") from None
    return b"".join(chunks)


def names_in(contents) -> list[tuple[str, str]]:
    """The ("card" | "reader", identity) the records of an upload name (tokens.claimer's ``names``)."""
    out: list[tuple[str, str]] = []
    for r in contents.results:
        out += [("card", r.card.identity()), ("reader", r.reader.identity())]
    for k in kinds.kinds():
        for d in contents.by_kind.get(k.name, []) if k.item_type is dict else ():
            for card, reader in k.cards(d):
                if isinstance(card, dict) and card:
                    out.append(("card", Card.from_dict(card).identity()))
                if isinstance(reader, dict) and reader:
                    out.append(("reader", Reader.from_dict(reader).identity()))
    return out


def tail_param(request: Request, name: str) -> str:
    """A ``{name:path}`` parameter (the path's last part: a card's identity, a record's id) as
    the client quoted it, decoded once from the raw path: an id holding ``%2F`` or ``/`` is read
    back as itself, whoever decoded the path before (Starlette's test client decodes it twice)."""
    value = request.path_params[name]
    raw, path = request.scope.get("raw_path"), request.scope.get("path", "")
    if not raw or not path.endswith(value):
        return value
    before = path[: len(path) - len(value)].count("/")
    parts = bytes(raw).split(b"/", before)
    return unquote_to_bytes(parts[-1]).decode("utf-8", "replace") if len(parts) == before + 1 else value


def id_problem(rid: str) -> str | None:
    """Why a record id cannot be a shared record's (None: it can). An id is read back as itself
    (``/api/v1/results/`` + the id, quoted): never stripped, so none starts or ends with a space;
    none holds a control character or is longer than MAX_ID_LENGTH. A ``/`` is fine."""
    if not rid or rid != rid.strip():
        return "an id may not be empty or start or end with white space"
    if len(rid) > MAX_ID_LENGTH:
        return f"an id is at most {MAX_ID_LENGTH} characters"
    if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in rid):
        return "an id may not hold control characters"
    return None


def _own_ids(doc: Any) -> None:
    """Every result uploaded carries its own id (a retry must name the same record), a card and
    a list of tests: a bare ``{"schema": "cardbench.result/1"}`` is not a run."""
    if isinstance(doc, list):
        docs = doc
    elif isinstance(doc, dict) and doc.get("schema") == RESULT_SCHEMA:
        docs = [doc]
    elif isinstance(doc, dict) and isinstance(doc.get("results"), list):
        docs = doc["results"]
    else:
        docs = []
    for i, d in enumerate(docs, 1):
        if not isinstance(d, dict) or not isinstance(d.get("id"), str) or not d["id"].strip():
            raise HTTPError(400, f"result #{i} has no id of its own; a shared record keeps its id")
        if not isinstance(d.get("tests"), list) or not isinstance(d.get("card"), dict):
            raise HTTPError(400, f"result {d['id']} has no 'card' object or no 'tests' list")


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization") or ""
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return None


class App(Starlette):
    """Starlette, with SECURITY_HEADERS on every answer (set where an answer has none of its own),
    including those Starlette makes itself (404, 405, 500)."""

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                have = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *((k, v) for k, v in SECURITY_HEADERS if k not in have)]}
            await send(message)
        await super().__call__(scope, receive, send_with_headers)


def create_app(db: Any = None, *, read_token: str | None = None, max_body: int = MAX_BODY,
               live_rate: float = LIVE_RATE, upload_rate: float = 0) -> Starlette:
    """The server's app. ``live_rate``: live events a station may send a second (429 past it; 0: no
    limit); ``upload_rate``: the same for uploads (POST /api/v1/records; 0, the default: no limit)."""
    srv = Server(db, read_token=read_token, max_body=max_body, live_rate=live_rate, upload_rate=upload_rate)

    def guarded(fn, *, html: bool = False, writes: bool = False):
        """``writes``: the endpoint checks a station's token itself (no read token asked)."""
        async def endpoint(request: Request) -> Response:
            t0 = time.perf_counter()
            try:
                if not writes and srv.read_token is not None and "token" in request.query_params \
                        and not request.url.path.startswith("/api/"):
                    resp = token_to_cookie(request)
                else:
                    if not writes:
                        srv.check_read(request)
                    resp = await fn(request)
            except HTTPError as e:
                resp = error(e.status, e.message, e.headers)
            except tokens.Forbidden as e:
                resp = error(403, str(e))
            except live.Unannounced as e:
                resp = error(409, str(e))
            except StoreError as e:
                resp = error(503, f"the store failed, nothing was stored: {srv.hide_location(e.message)}")
            except NotFound as e:
                resp = error(404, srv.hide_location(e.message))
            except CardbenchError as e:         # UsageError and the others: the request's fault
                resp = error(400, srv.hide_location(e.message))
            except (RecursionError, OverflowError, UnicodeError) as e:
                # the last guard: input nested too deep, a number beyond what a float or the
                # store holds, text UTF-8 cannot hold, somewhere not checked before
                resp = error(400, f"the request cannot be read ({type(e).__name__})")
            resp.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - t0) * 1000:.1f}"
            return resp
        return endpoint

    def token_to_cookie(request: Request) -> Response:
        """A page opened with ``?token=``: the token goes to a cookie (HttpOnly, SameSite=Strict,
        Path=/) and the browser to the same page without it, so no link, history entry or
        Referer carries it; every link and the live stream then send the cookie."""
        if not srv.is_read_token(request.query_params.get("token")):
            raise HTTPError(401, "reading this server takes its read token (Authorization: Bearer TOKEN)")
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        raw = request.scope.get("raw_path")      # the path as the browser quoted it (a card's %2F kept)
        path = bytes(raw).decode("latin-1") if raw else quote(request.url.path)
        resp = RedirectResponse(path + (f"?{urlencode(rest)}" if rest else ""), status_code=303)
        resp.set_cookie(READ_COOKIE, srv.read_token or "", httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https")
        return resp

    def filters(request: Request) -> dict[str, str]:
        qp = request.query_params
        return {k: qp.get(k, "").strip() for k in ("card", "reader", "since", "until", "test")}

    def stations_of(store, results) -> dict[str, str]:
        ids = [r.id for r in results]
        if not ids:
            return {}
        rows = store._run("reading stations", store._db.execute,
                          f"SELECT record_id, station FROM record_stations WHERE kind = 'result' AND record_id IN "
                          f"({', '.join('?' * len(ids))})", ids)
        return dict(rows)

    async def drawer(request: Request) -> Response:
        f = filters(request)
        try:
            page_no = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            raise HTTPError(400, "page must be a number") from None
        if page_no > MAX_PAGE:        # an offset no store's integer holds
            raise HTTPError(404, f"no page {page_no}; the last possible one is {MAX_PAGE}")

        def work(store):
            rs = store.results(card=f["card"] or None, reader=f["reader"] or None, since=f["since"] or None,
                               order_by="-started", limit=PAGE_SIZE + 1, offset=(page_no - 1) * PAGE_SIZE)
            return rs[:PAGE_SIZE], len(rs) > PAGE_SIZE, stations_of(store, rs[:PAGE_SIZE])
        rs, more, st = await run_in_threadpool(srv.call, work)
        return HTMLResponse(pages.drawer_page(rs, filters=f, page_no=page_no, has_next=more, stations=st))

    async def card(request: Request) -> Response:
        ident = tail_param(request, "identity")

        def names(k, d) -> bool:       # this card itself, not one whose words match its identity
            return any((c.get("identity") or "") in (ident, "") for c, _ in k.cards(d) if isinstance(c, dict))

        def work(store):
            rs = store.results_of_cards([ident])
            shown = [(k, [d for d in store.records(k.name, card=ident) if names(k, d)])
                     for k in kinds.kinds() if k.listed]
            row = next((c for c in store.cards() if c["identity"] == ident), None)
            return rs, shown, stations_of(store, rs), row, tokens.namer(store, "card", ident)
        rs, shown, st, row, namer = await run_in_threadpool(srv.call, work)
        return HTMLResponse(pages.card_page(ident, rs, shown, st, row, namer),
                            status_code=200 if rs or any(docs for _, docs in shown) else 404)

    async def model(request: Request) -> Response:
        key = tail_param(request, "key")
        this = request.query_params.get("card")
        def work(store):
            idents = [c["identity"] for c in store.cards() if pages.model_key_of_row(c) == key]
            return [r for r in store.results_of_cards(idents) if pages.model_key(r.card) == key]
        rs = await run_in_threadpool(srv.call, work)
        if this is None and rs:
            this = rs[-1].card.identity()
        return HTMLResponse(pages.model_page(key, rs, this), status_code=200 if rs else 404)

    async def reader(request: Request) -> Response:
        ident = tail_param(request, "identity")
        def work(store):
            rs = [r for r in store.results(reader=ident) if r.reader.identity() == ident]
            return rs, next((row for row in store.readers() if row["identity"] == ident), None)
        rs, row = await run_in_threadpool(srv.call, work)
        return HTMLResponse(pages.reader_page(ident, rs, row), status_code=200 if rs else 404)

    async def readers(request: Request) -> Response:
        rows = await run_in_threadpool(srv.call, lambda store: store.readers())
        return HTMLResponse(pages.readers_page(rows))

    async def live_index(request: Request) -> Response:
        return HTMLResponse(pages.live_index(await run_in_threadpool(srv.call, live.everything)))

    def live_state(store, station: str):
        ids = live.result_ids(store, station, PAGE_SIZE)
        return (ids, live.results_of(store, ids), live.station_of(store, station), live.cards_of(store, station))

    async def live_page(request: Request) -> Response:
        station = request.path_params["station"]
        _, rs, last, cards = await run_in_threadpool(srv.call, live_state, station)
        return HTMLResponse(pages.live_page(station, rs, last, cards))

    async def live_events(request: Request) -> Response:
        station = request.path_params["station"]
        # what the page may have missed between its rendering and this stream: the cards as they are,
        # and the result rows newer than ``after`` (the newest row the page has; absent: none)
        ids, rs, last, cards = await run_in_threadpool(srv.call, lambda store: live_state(store, station))
        after = request.query_params.get("after")
        newer = ids.index(after) if after in ids else len(ids) if after is not None else 0
        missed = [r for r in rs if r.id in ids[:newer]][::-1]

        async def stream():
            q = srv.hub.subscribe(station, ids)      # here: a stream never started is never subscribed
            try:
                yield ": connected\n\n"
                for row in cards:
                    yield live.sse(*live.card_event(row))
                now = pages.current_text(last)
                for r in missed:
                    yield live.sse("row", {"id": r.id, "html": pages.drawer_tr(r, cls="new"), "now": now})
                yield live.sse("now", {"text": now})
                while not getattr(q, "overflowed", False):
                    try:
                        name, data = await asyncio.wait_for(q.get(), timeout=15)
                    except asyncio.TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    yield live.sse(name, data)
            finally:
                srv.hub.unsubscribe(station, q)
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def live_js(request: Request) -> Response:
        return Response(pages.LIVE_JS, media_type="text/javascript")

    async def api_results(request: Request) -> Response:
        f = filters(request)
        doc = await run_in_threadpool(srv.call, lambda store: collect(
            store, card=f["card"] or None, reader=f["reader"] or None, since=f["since"] or None,
            until=f["until"] or None, test=f["test"] or None))
        return JSON(doc)

    async def api_result(request: Request) -> Response:
        rid = tail_param(request, "id")
        if id_problem(rid):        # no record has such an id: not looked for (nor stripped to another's)
            raise HTTPError(404, f"no run with id {rid[:60]!r}")
        r = await run_in_threadpool(srv.call, lambda store: store.get(rid))
        return JSON(r.to_dict())

    async def api_kind(request: Request) -> Response:
        k = kinds.kind_named(request.path_params["kind"])      # UsageError: 400 naming the kinds
        f = filters(request)
        found = await run_in_threadpool(srv.call, lambda store: store.records(
            k.name, card=f["card"] or None, reader=f["reader"] or None, since=f["since"] or None,
            until=f["until"] or None))
        return JSON({"schema": k.schema, "kind": k.name,
                     "records": [d if k.item_type is dict else k.dump(d) for d in found]})

    async def api_record(request: Request) -> Response:
        k = kinds.kind_named(request.path_params["kind"])
        rid = tail_param(request, "id")
        doc = None if id_problem(rid) else await run_in_threadpool(
            srv.call, lambda store: store.stored_document(k.name, rid))
        if doc is None:
            raise HTTPError(404, f"no {k.noun} with id {rid[:60]!r}")
        return JSON(doc)

    async def api_records(request: Request) -> Response:
        token = _bearer(request)
        if not token:
            raise HTTPError(401, "writing takes a station token: Authorization: Bearer TOKEN "
                                 "(cardbench serve token add STATION)")
        raw = await srv.body(request)
        out, station = await srv.write(srv.upload, raw, token, [])
        srv.hub.changed(station, None)
        return JSON(out, status_code=200)

    async def api_live(request: Request) -> Response:
        token = _bearer(request)
        if not token:
            raise HTTPError(401, "telling a live page what a station does takes its token")
        # the limit is per station (its tokens): a flood is 429, others unaffected
        station, key = await srv.write(srv.progress, await read_body(request, live.BODY_MAX), token, [])
        srv.hub.changed(station, key)
        return JSON({"ok": True})

    async def not_found(request: Request, exc) -> Response:
        return error(404, "no such page")

    routes = [
        Route("/", guarded(drawer)),
        Route("/card/{identity:path}", guarded(card)),
        Route("/model/{key:path}", guarded(model)),
        Route("/reader/{identity:path}", guarded(reader)),
        Route("/readers", guarded(readers)),
        Route("/live", guarded(live_index)),
        Route("/live/{station}/events", guarded(live_events)),
        Route("/live/{station}", guarded(live_page)),
        Route("/static/live.js", guarded(live_js, writes=True)),       # no token asked for a script
        Route("/api/v1/results", guarded(api_results)),
        Route("/api/v1/export", guarded(api_results)),
        Route("/api/v1/results/{id:path}", guarded(api_result)),
        Route("/api/v1/records", guarded(api_records, writes=True), methods=["POST"]),
        Route("/api/v1/records/{kind}", guarded(api_kind)),
        Route("/api/v1/records/{kind}/{id:path}", guarded(api_record)),
        Route("/api/v1/live", guarded(api_live, writes=True), methods=["POST"]),
    ]

    async def server_error(request: Request, exc: Exception) -> Response:
        return error(500, f"internal error: {type(exc).__name__}")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        srv.hub.start(asyncio.get_running_loop())       # the live pages' fan-out (LISTEN on PostgreSQL)
        try:
            yield
        finally:
            srv.hub.stop()
            srv.writers.shutdown(wait=True)
            srv.stores.close()          # the pool's connections, at the server's shutdown

    app = App(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: lambda r, e: error(
        405, "method not allowed"), 500: server_error})
    app.state.server = srv
    return app


def app_from_env() -> Starlette:
    """The app of one worker process of `cardbench serve --workers N` (uvicorn's factory)."""
    cfg = json.loads(os.environ[APP_ENV])
    return create_app(cfg["db"], read_token=cfg.get("read_token"), max_body=int(cfg["max_body"]),
                      live_rate=float(cfg.get("live_rate", LIVE_RATE)), upload_rate=float(cfg.get("upload_rate", 0)))
