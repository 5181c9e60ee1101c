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

Answers to bad requests are one line, ``{"error": "..."}``: 400 a document that cannot be read
(truncated, a newer schema, the wrong shape), 401 a token missing, wrong or revoked, 403 a record
another station shared first (a station's own record sent again replaces it: stored once), 413 a body over the limit
(refused from its Content-Length before it is read, or as soon as it passes the limit), 503 the
store failing (nothing stored; the station's outbox keeps it). Writes are one transaction each:
all of a request or nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from cardbench import kinds
from cardbench.errors import CardbenchError, StoreError, UsageError
from cardbench.result import SCHEMA as RESULT_SCHEMA
from cardbench.server import pages, tokens
from cardbench.store.core import StorePool
from cardbench.store.export import collect, read_export
from cardbench.units import INT64_MAX

MAX_BODY = 16 * 1024 * 1024
#: `cardbench serve --workers N`: the settings each worker process makes its app from (JSON:
#: db, read_token, max_body), read by :func:`app_from_env`
APP_ENV = "CARDBENCH_SERVE_APP"
PAGE_SIZE = 50
CSP = "default-src 'self'; style-src 'unsafe-inline'; img-src data:; script-src 'self'"


class HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class Live:
    """What each station shared last, and the event streams of the live pages (one process)."""

    def __init__(self) -> None:
        self.queues: dict[str, set[asyncio.Queue]] = {}
        self.current: dict[str, dict] = {}
        self.progress: dict[str, dict] = {}

    def publish(self, station: str, event: dict) -> None:
        if event.get("kind") == "progress":
            self.progress[station] = event
        else:
            self.current[station] = event
        for q in list(self.queues.get(station, ())):
            q.put_nowait(event)


class Server:
    def __init__(self, db: Any, *, read_token: str | None = None, max_body: int = MAX_BODY):
        self.db, self.read_token, self.max_body = db, read_token, max_body
        self.live = Live()
        self.stores = StorePool(db)     # creates / migrates once, and fails now on a bad --db
        self.location = self.stores.location

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
        given = _bearer(request) or request.query_params.get("token") or request.cookies.get("cardbench_read")
        if given != self.read_token:
            raise HTTPError(401, "reading this server takes its read token (Authorization: Bearer TOKEN)")

    # -- writing -----------------------------------------------------------------------------------
    async def body(self, request: Request) -> bytes:
        return await read_body(request, self.max_body)


    def store_records(self, station: str, raw: bytes):
        """Read, check and store one request's records (one transaction); returns (answer, contents)."""
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:     # RecursionError: nested too deep
            raise HTTPError(400, f"the body is not JSON (truncated?): {e}") from None
        try:
            contents = read_export(doc, path="the body")      # UsageError: 400
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise HTTPError(400, f"the body cannot be read as cardbench records ({type(e).__name__}: {e})") from None
        _own_ids(doc)
        items = contents.items()
        if not items:
            raise HTTPError(400, "the body holds no records")
        ids = self.call(lambda store: store.save_all(items, before=tokens.claimer(station)))
        return {"stored": len(ids), "ids": ids, "station": station}, contents


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


def create_app(db: Any = None, *, read_token: str | None = None, max_body: int = MAX_BODY) -> Starlette:
    srv = Server(db, read_token=read_token, max_body=max_body)

    def guarded(fn, *, html: bool = False, writes: bool = False):
        """``writes``: the endpoint checks a station's token itself (no read token asked)."""
        async def endpoint(request: Request) -> Response:
            t0 = time.perf_counter()
            try:
                if not writes:
                    srv.check_read(request)
                resp = await fn(request)
            except HTTPError as e:
                resp = error(e.status, e.message)
            except tokens.Forbidden as e:
                resp = error(403, str(e))
            except StoreError as e:
                resp = error(503, f"the store failed, nothing was stored: {e.message}")
            except UsageError as e:
                resp = error(400, e.message)
            except CardbenchError as e:
                resp = error(400, e.message)
            resp.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - t0) * 1000:.1f}"
            resp.headers.setdefault("Content-Security-Policy", CSP)
            resp.headers.setdefault("X-Content-Type-Options", "nosniff")
            return resp
        return endpoint

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

        def work(store):
            rs = store.results(card=f["card"] or None, reader=f["reader"] or None, since=f["since"] or None,
                               order_by="-started", limit=PAGE_SIZE + 1, offset=(page_no - 1) * PAGE_SIZE)
            return rs[:PAGE_SIZE], len(rs) > PAGE_SIZE, stations_of(store, rs[:PAGE_SIZE])
        rs, more, st = await run_in_threadpool(srv.call, work)
        return HTMLResponse(pages.drawer_page(rs, filters=f, page_no=page_no, has_next=more, stations=st))

    async def card(request: Request) -> Response:
        ident = request.path_params["identity"]

        def names(k, d) -> bool:       # this card itself, not one whose words match its identity
            return any((c.get("identity") or "") in (ident, "") for c, _ in k.cards(d) if isinstance(c, dict))

        def work(store):
            rs = store.results_of_cards([ident])
            shown = [(k, [d for d in store.records(k.name, card=ident) if names(k, d)])
                     for k in kinds.kinds() if k.listed]
            return rs, shown, stations_of(store, rs)
        rs, shown, st = await run_in_threadpool(srv.call, work)
        return HTMLResponse(pages.card_page(ident, rs, shown, st),
                            status_code=200 if rs or any(docs for _, docs in shown) else 404)

    async def model(request: Request) -> Response:
        key = request.path_params["key"]
        this = request.query_params.get("card")
        def work(store):
            idents = [c["identity"] for c in store.cards() if pages.model_key_of_row(c) == key]
            return [r for r in store.results_of_cards(idents) if pages.model_key(r.card) == key]
        rs = await run_in_threadpool(srv.call, work)
        if this is None and rs:
            this = rs[-1].card.identity()
        return HTMLResponse(pages.model_page(key, rs, this), status_code=200 if rs else 404)

    async def reader(request: Request) -> Response:
        ident = request.path_params["identity"]
        rs = await run_in_threadpool(srv.call, lambda store: [r for r in store.results(reader=ident)
                                                               if r.reader.identity() == ident])
        return HTMLResponse(pages.reader_page(ident, rs), status_code=200 if rs else 404)

    async def readers(request: Request) -> Response:
        rows = await run_in_threadpool(srv.call, lambda store: store.readers())
        return HTMLResponse(pages.readers_page(rows))

    def station_results(store, station: str, limit: int = PAGE_SIZE):
        rows = store._run("reading a station's records", store._db.execute,
                          "SELECT record_id FROM record_stations WHERE station = ? AND kind = 'result' "
                          "ORDER BY shared_at DESC, record_id LIMIT ?", (station, limit))
        out = []
        for (rid,) in rows:
            try:
                out.append(store.get(rid))
            except UsageError:      # claimed, then its transaction failed: not stored
                pass
        return out

    async def live_index(request: Request) -> Response:
        rows = await run_in_threadpool(srv.call, lambda store: store._run(
            "reading stations", store._db.execute, "SELECT DISTINCT station FROM record_stations ORDER BY station"))
        return HTMLResponse(pages.live_index([r[0] for r in rows]))

    async def live(request: Request) -> Response:
        station = request.path_params["station"]
        rs = await run_in_threadpool(srv.call, station_results, station)
        return HTMLResponse(pages.live_page(station, rs, srv.live.current.get(station),
                                            srv.live.progress.get(station)))

    async def live_events(request: Request) -> Response:
        station = request.path_params["station"]
        q: asyncio.Queue = asyncio.Queue()
        srv.live.queues.setdefault(station, set()).add(q)

        async def stream():
            try:
                yield ": connected\n\n"
                while True:
                    try:
                        ev = await asyncio.wait_for(q.get(), timeout=15)
                    except asyncio.TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if ev.get("kind") == "progress":
                        yield f"event: progress\ndata: {json.dumps({'text': pages.progress_text(ev)})}\n\n"
                        continue
                    for row in ev.get("rows", []):
                        yield f"event: row\ndata: {json.dumps({**row, 'now': pages.current_text(ev)})}\n\n"
            finally:
                srv.live.queues.get(station, set()).discard(q)
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def live_js(request: Request) -> Response:
        return Response(pages.LIVE_JS, media_type="text/javascript")

    async def api_results(request: Request) -> Response:
        f = filters(request)
        doc = await run_in_threadpool(srv.call, lambda store: collect(
            store, card=f["card"] or None, reader=f["reader"] or None, since=f["since"] or None,
            until=f["until"] or None, test=f["test"] or None))
        return JSONResponse(doc)

    async def api_result(request: Request) -> Response:
        rid = request.path_params["id"]
        r = await run_in_threadpool(srv.call, lambda store: store.get(rid))
        return JSONResponse(r.to_dict())

    async def api_kind(request: Request) -> Response:
        k = kinds.kind_named(request.path_params["kind"])      # UsageError: 400 naming the kinds
        f = filters(request)
        found = await run_in_threadpool(srv.call, lambda store: store.records(
            k.name, card=f["card"] or None, reader=f["reader"] or None, since=f["since"] or None,
            until=f["until"] or None))
        return JSONResponse({"schema": k.schema, "kind": k.name,
                             "records": [d if k.item_type is dict else k.dump(d) for d in found]})

    async def api_record(request: Request) -> Response:
        k = kinds.kind_named(request.path_params["kind"])
        rid = request.path_params["id"]
        doc = await run_in_threadpool(srv.call, lambda store: store.stored_document(k.name, rid))
        if doc is None:
            raise HTTPError(404, f"no {k.noun} with id {rid!r}")
        return JSONResponse(doc)

    async def api_records(request: Request) -> Response:
        token = _bearer(request)
        if not token:
            raise HTTPError(401, "writing takes a station token: Authorization: Bearer TOKEN "
                                 "(cardbench serve token add STATION)")
        station = await run_in_threadpool(srv.call, tokens.station_of, token)
        if station is None:
            raise HTTPError(401, "this token is not known here or was revoked")
        raw = await srv.body(request)
        out, contents = await run_in_threadpool(srv.store_records, station, raw)
        _publish(station, contents)
        return JSONResponse(out, status_code=200)

    async def api_live(request: Request) -> Response:
        token = _bearer(request)
        station = await run_in_threadpool(srv.call, tokens.station_of, token) if token else None
        if station is None:
            raise HTTPError(401, "telling a live page what a station does takes its token")
        raw = await read_body(request, 64 * 1024)
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise HTTPError(400, "the body is not JSON") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("task"), str):
            raise HTTPError(400, "give {\"task\": text, \"done\": bytes, \"total\": bytes or null}")
        num = lambda v: v if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= INT64_MAX else None  # noqa: E731
        ev = {"kind": "progress", "task": doc["task"][:300], "done": num(doc.get("done")), "total": num(doc.get("total")),
              "at": time.strftime("%H:%M:%S")}
        srv.live.publish(station, ev)
        return JSONResponse({"ok": True})

    def _publish(station: str, contents) -> None:
        if not srv.live.queues.get(station) and not contents.results:
            return
        watched = bool(srv.live.queues.get(station))
        rows = [{"id": r.id, "html": pages.drawer_tr(r, cls="new")} for r in contents.results] if watched else []
        last = contents.results[-1] if contents.results else None
        ev = {"rows": rows, "card": pages.rh.card_label(last) if last else None,
              "what": "result" if last else "document", "at": last.started_at if last else None}
        srv.live.publish(station, ev)

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
        Route("/live/{station}", guarded(live)),
        Route("/static/live.js", live_js),
        Route("/api/v1/results", guarded(api_results)),
        Route("/api/v1/export", guarded(api_results)),
        Route("/api/v1/results/{id}", guarded(api_result)),
        Route("/api/v1/records", guarded(api_records, writes=True), methods=["POST"]),
        Route("/api/v1/records/{kind}", guarded(api_kind)),
        Route("/api/v1/records/{kind}/{id}", guarded(api_record)),
        Route("/api/v1/live", guarded(api_live, writes=True), methods=["POST"]),
    ]

    async def server_error(request: Request, exc: Exception) -> Response:
        return error(500, f"internal error: {type(exc).__name__}")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        srv.stores.close()          # the pool's connections, at the server's shutdown

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: lambda r, e: error(
        405, "method not allowed"), 500: server_error}, lifespan=lifespan)
    app.state.server = srv
    return app


def app_from_env() -> Starlette:
    """The app of one worker process of `cardbench serve --workers N` (uvicorn's factory)."""
    cfg = json.loads(os.environ[APP_ENV])
    return create_app(cfg["db"], read_token=cfg.get("read_token"), max_body=int(cfg["max_body"]))
