#!/usr/bin/env python3
"""The station server under load: records accepted per second from 8 concurrent stations, and
the drawer page of a store with 10,000 runs.

Starts a throwaway PostgreSQL (tests/store's PostgresServer) unless --db URL is given, and a
real `cardbench serve` (uvicorn, one process) on 127.0.0.1. Side by side, in the same run:

  direct     8 threads calling Store.save_all straight into PostgreSQL (no HTTP): the store's ceiling
  stations   8 threads, each a station with its own token, uploading one record per request through
             cardbench's own client (cardbench.share.Uploader, as run/verify/drawer --share do)
  plain      a plain load generator: 8 keep-alive HTTP/1.1 connections (asyncio, raw sockets) posting
             the same one-record bodies, so the client's own cost is seen apart from the server's
  batched    8 stations uploading 50 records per request (an export document, as `cardbench share`)

then fills the store to 10,000 runs and times GET / (the drawer, first page, and page 100) by the
server's own Server-Timing header and as the client saw it. Goals (issue 26): >= 500 records/s
with PostgreSQL; the drawer page <= 300 ms server time.

Usage: python3 bench/serve_load.py [--db postgresql://...] [--records 2000] [--runs 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "tests", "store"))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))

from cardbench.server import tokens  # noqa: E402
from cardbench.share import Uploader  # noqa: E402
from cardbench.store.core import open_store  # noqa: E402
from cardbench_factories import make_result, running_postgres  # noqa: E402

STATIONS = 8


def docs(n: int, tag: str) -> list[dict]:
    return [make_result(brand=f"{tag}-{i % 40}", serial=f"{tag}-{i}",
                        started_at=f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}T10:{i % 60:02d}:00+00:00").to_dict()
            for i in range(n)]


def in_threads(work, parts) -> float:
    t0 = time.perf_counter()
    ts = [threading.Thread(target=work, args=(i, p)) for i, p in enumerate(parts)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def split(items, n=STATIONS):
    return [items[i::n] for i in range(n)]


async def plain_load(port: int, token: str, bodies: list[bytes], conns: int = STATIONS) -> float:
    async def one(part):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        for b in part:
            w.write(b"POST /api/v1/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode() +
                    b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(b)).encode() + b"\r\n\r\n" + b)
            await w.drain()
            head = await r.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head[:100]
            n = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
            await r.readexactly(n)
        w.close()
    t0 = time.perf_counter()
    await asyncio.gather(*(one(p) for p in split(bodies, conns)))
    return time.perf_counter() - t0


def page_time(url: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as resp:
        resp.read()
        st = resp.headers.get("Server-Timing", "app;dur=nan").split("dur=")[1]
    return float(st), (time.perf_counter() - t0) * 1000


def run(db: str, n: int, runs: int) -> None:
    from serve_helpers import ServeProcess
    with open_store(db) as store:
        toks = [tokens.add(store, f"bench-{i}") for i in range(STATIONS)]
    srv = ServeProcess(db).start()
    try:
        print(f"cardbench serve on {srv.url} (uvicorn, 1 process), PostgreSQL {db.split('@')[-1]}, "
              f"{os.cpu_count()} cores shared by server, database and clients")
        # direct: the store's ceiling
        d = docs(n, "direct")
        from cardbench.result import Result

        def direct(i, part):
            with open_store(db) as st:
                for x in part:
                    st.save_all([Result.from_dict(x)])
        secs = in_threads(direct, split(d))
        print(f"  direct   Store.save_all, 8 threads, no HTTP:          {n / secs:7.0f} records/s")
        # stations through cardbench's own client
        d = docs(n, "stations")

        def station(i, part):
            up = Uploader(srv.url, toks[i])
            for x in part:
                up.post(x)
        secs = in_threads(station, split(d))
        print(f"  stations 8 x cardbench.share.Uploader, 1 record/request: {n / secs:7.0f} records/s")
        # plain load generator, the same bodies
        bodies = [json.dumps(x).encode() for x in docs(n, "plain")]
        secs = asyncio.run(plain_load(srv.port, toks[0], bodies))
        print(f"  plain    8 keep-alive connections, 1 record/request:     {n / secs:7.0f} records/s")
        # batched
        d = docs(n, "batched")

        def batched(i, part):
            up = Uploader(srv.url, toks[i])
            for k in range(0, len(part), 50):
                up.post({"schema": "cardbench.export/2", "cards": [], "results": part[k:k + 50], "verify": [],
                         "probes": [], "sessions": []})
        secs = in_threads(batched, split(d))
        print(f"  batched  8 stations, 50 records/request (cardbench share): {n / secs:7.0f} records/s")
        # the drawer of a 10,000-run store
        with open_store(db) as st:
            have = st.count()
            todo = max(0, runs - have)
            for k in range(0, todo, 500):
                st.save_all([Result.from_dict(x) for x in docs(min(500, todo - k), f"fill{k}")])
            total = st.count()
        from cardbench.server.pages import card_url, model_key, model_url
        with open_store(db) as st:
            one = st.results(card="fill0-7", limit=1)[0]
        for label, path in (("first page", "/"), ("page 100", "/?page=100"), ("filtered --card", "/?card=fill0-7"),
                            ("a card's page", card_url(one.card.identity())),
                            ("its model's page", model_url(model_key(one.card))),
                            ("API, one card", "/api/v1/results?card=fill0-7")):
            page_time(srv.url + path)                       # warm
            times = [page_time(srv.url + path) for _ in range(5)]
            server = statistics.median(t[0] for t in times)
            client = statistics.median(t[1] for t in times)
            print(f"  drawer of {total} runs, {label:16s} server {server:6.1f} ms, client {client:6.1f} ms "
                  "(median of 5)")
    finally:
        srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db")
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=10000)
    a = ap.parse_args()
    if a.db:
        run(a.db, a.records, a.runs)
        return
    import pytest  # running_postgres skips through pytest when PostgreSQL is missing
    try:
        with running_postgres() as pg:
            run(pg.new_database(), a.records, a.runs)
    except pytest.skip.Exception as e:
        raise SystemExit(f"no PostgreSQL: {e}") from None


if __name__ == "__main__":
    main()
