#!/usr/bin/env python3
"""The station server under load, side by side in one run, on one PostgreSQL: records/s, progress
events/s and request latency through HTTP, against the store alone and the load generator's ceiling.

Starts a throwaway PostgreSQL (tests/store's PostgresServer, fsync off as in the tests) unless --db
URL is given. Then, each row its own fresh database (so every row starts from an empty store), first
the goal's rows --repeat times interleaved (the store alone, then each `cardbench serve` one/req row,
each set against the store row just before it: rates here wander by half from one minute to the
next), their medians and the verdict; then every other row once:

  store alone  8 threads, each with its own psycopg connection, inserting the rows the server
               writes for a record (card, reader, host upserts, the run, its tests and samples,
               the station's claim) in one transaction per record, statement after statement: a
               plain insert, the goal's denominator; and the same pipelined (psycopg's pipeline
               mode: one wait a record), what PostgreSQL takes from Python at best
  save_all     8 threads calling cardbench's Store.save_all (no HTTP): the store layer's own cost
  ceiling      the load generator against a bare ASGI endpoint (bench/serve_apps.py: trivial), on
               each HTTP stack: the most requests/s this generator and that server reach here
  one/req      the load generator (8 keep-alive HTTP/1.1 connections, asyncio, one per station,
               each with its own token) posting one record per request to cardbench's server, on
               each HTTP stack: uvicorn with h11 and asyncio, uvicorn with httptools and uvloop
               (its "standard" extras), granian (Rust; when installed), and `cardbench serve`
               itself, as a lab starts it (and with --workers 2: two processes); p50/p99 request latency
               as the generator saw it, and the CPU time a record took in the server, PostgreSQL
               and the generator
  batched      `cardbench serve`, 8 stations, 50 records per request (as `cardbench share`)
  progress     `cardbench serve`, 8 stations posting progress events (POST /api/v1/live); every
               `cardbench serve` here runs with --live-rate 0 (the per-station rate limit off: 8
               stations at full speed are far past its 50 events/s, and would be answered 429)
  Uploader     `cardbench serve`, 8 stations through cardbench's own client (cardbench.share.Uploader,
               urllib, a new connection per request, as run/verify/drawer --share do)

then fills the store to --runs runs and times GET / (the drawer, first page, page 100...) by the
server's own Server-Timing header and as the client saw it. Goals (issue 34): >= 500 records/s at
one record per request from 8 stations, and >= 0.8 of the store alone; the drawer <= 300 ms.

Usage: python3 bench/serve_load.py [--db postgresql://...] [--records 2000] [--runs 10000]
       [--stacks uvicorn-h11,uvicorn-std,granian] [--serve "" --serve "--workers 2"] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "tests", "store"))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))

from cardbench.result import Result  # noqa: E402
from cardbench.server import tokens  # noqa: E402
from cardbench.share import Uploader  # noqa: E402
from cardbench.store.core import Store, open_store  # noqa: E402
from cardbench_factories import make_result, running_postgres  # noqa: E402
from serve_helpers import child_env, free_port  # noqa: E402

STATIONS = 8

#: how each HTTP stack serves an app given as an import string (bench/serve_apps.py)
STACKS = {
    "uvicorn-h11": ("uvicorn", "h11", lambda app, port: [
        "-m", "uvicorn", "--loop", "asyncio", "--http", "h11", "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "warning", "--no-access-log", *(["--factory"] if "cardbench" in app else []), app]),
    "uvicorn-std": ("uvicorn", "httptools", lambda app, port: [
        "-m", "uvicorn", "--loop", "uvloop", "--http", "httptools", "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "warning", "--no-access-log", *(["--factory"] if "cardbench" in app else []), app]),
    "granian": ("granian", "granian", lambda app, port: [
        "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--log-level", "warning", "--no-access-log", *(["--factory"] if "cardbench" in app else []), app]),
}


def docs(n: int, tag: str) -> list[dict]:
    """``n`` result documents, each with figures of its own (as real runs: no two alike)."""
    salt = sum(map(ord, tag)) * 1e-6
    return [make_result(brand=f"{tag}-{i % 40}", serial=f"{tag}-{i}",
                        write_times=(41.2 + i * 1e-4 + salt, 41.5 + i * 2e-4, 41.6 + i * 3e-4),
                        read_rate=3.6e6 + i + salt,
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


# -- the store alone: plain psycopg ------------------------------------------------------------

_P = "%s"
RUN_SQL = ("INSERT INTO runs (result_id, card_id, reader_id, host_id, started_at, started_epoch, finished_at, "
           "complete, source, error, tool_version, schema, n_tests, n_samples, document, saved_at) VALUES "
           "(%s, (SELECT id FROM cards WHERE identity = %s), (SELECT id FROM readers WHERE identity = %s), "
           "(SELECT id FROM hosts WHERE identity = %s), %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")
TEST_SQL = ("INSERT INTO tests (run_id, position, name, method, complete, n_runs, median_bytes_per_s, "
            "mean_bytes_per_s, min_bytes_per_s, max_bytes_per_s, stdev_bytes_per_s, ci95_low, ci95_high, x_rating, "
            "median_iops, limited_by, warnings) VALUES ((SELECT id FROM runs WHERE result_id = %s), "
            "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")
SAMPLE_SQL = ("INSERT INTO samples (run_id, test_id, kind, idx, bytes, seconds, ops, offset_bytes) "
              "SELECT t.run_id, t.id, %s, %s, %s, %s, %s, %s FROM tests t "
              "WHERE t.run_id = (SELECT id FROM runs WHERE result_id = %s) AND t.position = %s")
CLAIM_SQL = "INSERT INTO record_stations (kind, record_id, station, shared_at) VALUES ('result', %s, %s, %s)"


def plain_rows(doc: dict, station: str) -> list[tuple[str, list[tuple]]]:
    """The statements and rows the server writes for one record (made before the clock starts)."""
    r = Result.from_dict(doc)
    text = json.dumps(doc)
    host = Store._host_row(r.host or {})
    tests, samples = [], []
    for pos, (t, td) in enumerate(zip(r.tests, doc["tests"], strict=True)):
        ci = td.get("ci95_bytes_per_s") or (None, None)
        tests.append((r.id, pos, t.name, json.dumps(t.method), 1, len(t.runs), td.get("median_bytes_per_s"),
                      td.get("mean_bytes_per_s"), td.get("min_bytes_per_s"), td.get("max_bytes_per_s"),
                      td.get("stdev_bytes_per_s"), ci[0], ci[1], td.get("x_rating"), td.get("median_iops"),
                      t.limited_by, "[]"))
        samples += [(kind, i, int(x.bytes), float(x.seconds), x.ops, x.offset, r.id, pos)
                    for kind, runs in (("warmup", t.warmup), ("run", t.runs)) for i, x in enumerate(runs)]
    now = "2026-01-01T00:00:00+00:00"
    return [(Store._CARD_UPSERT.replace("?", _P), [Store._card_row(r.card)]),
            (Store._READER_UPSERT.replace("?", _P), [Store._reader_row(r.reader)]),
            (Store._HOST_UPSERT.replace("?", _P), [host]),
            (CLAIM_SQL, [(r.id, station, now)]),
            (RUN_SQL, [(r.id, r.card.identity(), r.reader.identity(), host[0], r.started_at, 0.0, r.finished_at,
                        1, r.source, r.error, None, "cardbench.result/1", len(r.tests), len(samples), text, now)]),
            (TEST_SQL, tests), (SAMPLE_SQL, samples)]


def store_alone(db: str, records: list[dict], pipelined: bool = False) -> float:
    """``pipelined``: each record's statements sent in one go (psycopg's pipeline mode), one wait
    at the commit; else statement after statement, each waited for (a plain insert)."""
    import contextlib

    import psycopg
    with open_store(db):      # the schema
        pass
    work = [[plain_rows(d, f"bench-{i}") for d in part] for i, part in enumerate(split(records))]

    def one(i, part):
        with psycopg.connect(db, autocommit=True) as conn:
            for stmts in part:
                with conn.pipeline() if pipelined else contextlib.nullcontext(), conn.transaction(), \
                        conn.cursor() as cur:
                    for sql, rows in stmts:
                        cur.executemany(sql, rows)
    return len(records) / in_threads(one, work)


def save_all_direct(db: str, records: list[dict]) -> float:
    def one(i, part):
        with open_store(db) as st:
            for x in part:
                st.save_all([Result.from_dict(x)], before=tokens.claimer(f"bench-{i}"))
    return len(records) / in_threads(one, split(records))


# -- the load generator ------------------------------------------------------------------------

def request(path: str, token: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _load(port: int, per_conn: list[list[bytes]]) -> tuple[float, list[float]]:
    lat: list[float] = []

    async def one(reqs):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        for req in reqs:
            t0 = time.perf_counter()
            w.write(req)
            await w.drain()
            head = await r.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"answered {head[:200]!r}")
            n = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
            await r.readexactly(n)
            lat.append(time.perf_counter() - t0)
        w.close()
    t0 = time.perf_counter()
    await asyncio.gather(*(one(p) for p in per_conn))
    return time.perf_counter() - t0, lat


def load(port: int, per_conn: list[list[bytes]]) -> tuple[float, list[float]]:
    """8 keep-alive connections, each sending its requests one after the other: (seconds, latencies)."""
    try:
        import uvloop  # the generator's own loop: the fastest here, so it is not what limits a row
        return uvloop.run(_load(port, per_conn))
    except ImportError:
        return asyncio.run(_load(port, per_conn))


def pct(lat: list[float], p: float) -> float:
    s = sorted(lat)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] * 1000


class Child:
    """A server process on 127.0.0.1:PORT (an HTTP stack with an app, or `cardbench serve`)."""

    def __init__(self, argv: list[str], port: int, db: str):
        self.port = port
        env = child_env()
        env["PYTHONPATH"] = BENCH + os.pathsep + env["PYTHONPATH"]
        env["CARDBENCH_BENCH_DB"] = db
        self.proc = subprocess.Popen([sys.executable, *argv], cwd=BENCH, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{argv[:3]} ended: {self.proc.stderr.read()[-2000:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/results?card=none-such", timeout=2).read()
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{argv[:3]} did not answer within 60 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def stack_child(stack: str, app: str, db: str) -> Child:
    port = free_port()
    return Child(STACKS[stack][2](app, port), port, db)


#: the per-station limit of live events off: the progress row measures the server, not the limit
NO_LIVE_LIMIT = ["--live-rate", "0"]


def serve_child(db: str, serve_args: list[str]) -> Child:
    port = free_port()
    return Child(["-m", "cardbench", "serve", "--db", db, "--bind", f"127.0.0.1:{port}", *NO_LIVE_LIMIT,
                  *serve_args], port, db)


def new_db(pg, station_tokens: bool = True) -> tuple[str, list[str]]:
    db = pg.new_database()
    with open_store(db) as st:
        toks = [tokens.add(st, f"bench-{i}") for i in range(STATIONS)] if station_tokens else []
    return db, toks


def one_per_request(port: int, toks: list[str], n: int, tag: str) -> tuple[float, list[float]]:
    per_conn = [[request("/api/v1/records", toks[i], json.dumps(d).encode()) for d in part]
                for i, part in enumerate(split(docs(n, tag)))]
    secs, lat = load(port, per_conn)
    return n / secs, lat


def line(label: str, rate: float, unit: str, lat: list[float] | None = None, ratio: float | None = None) -> None:
    extra = f"  p50 {pct(lat, 50):6.1f} ms  p99 {pct(lat, 99):6.1f} ms" if lat else ""
    extra += f"  {ratio:.2f} of the store alone" if ratio is not None else ""
    print(f"  {label:46s} {rate:7.0f} {unit}{extra}", flush=True)


def cpu_seconds(pids: set[int], parents: set[int] = frozenset()) -> float:
    """User + system CPU seconds of these processes and of the children of ``parents`` (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(p) in pids or int(fields[1]) in parents:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def with_cpu(pg, child: Child, fn):
    """``fn()``'s result and the CPU seconds the server, PostgreSQL and this process spent in it."""
    pm = getattr(pg, "data", None)
    pm_pid = {int((pm / "postmaster.pid").read_text().split()[0])} if pm is not None else set()

    def now():
        return (cpu_seconds({child.proc.pid}, {child.proc.pid}), cpu_seconds(pm_pid, pm_pid),
                cpu_seconds({os.getpid()}))
    before = now()
    out = fn()
    return out, [b - a for a, b in zip(before, now(), strict=True)]


GOAL_RATE = 500     # records/s at one record per request from 8 stations (issue 34)
GOAL_RATIO = 0.8    # of the store alone, measured in the same run


def serve_once(pg, serve_args: list[str], n: int, tag: str) -> tuple[float, list[float], list[float]] | str:
    """One `cardbench serve` one/req row on a fresh database: (records/s, latencies, CPU seconds), or
    why it does not start here."""
    db, toks = new_db(pg)
    try:
        c = serve_child(db, serve_args)
    except RuntimeError as e:
        return str(e).strip().splitlines()[-1][:80]
    try:
        (rate, lat), cpu = with_cpu(pg, c, lambda: one_per_request(c.port, toks, n, tag))
        return rate, lat, cpu
    finally:
        c.stop()


def goal_rows(pg, n: int, variants: list[list[str]], repeat: int) -> float:
    """The goal's figures, ``repeat`` times interleaved (the store alone, then each `cardbench serve`):
    this machine's rates wander by half between minutes, so each server row is set against the store
    row measured just before it, and the verdict is on the medians. Returns the store's median."""
    bases: list[float] = []
    rows: dict[str, list[tuple[float, float]]] = {}
    for k in range(repeat):
        print(f"repetition {k + 1} of {repeat}", flush=True)
        base = store_alone(pg.new_database(), docs(n, f"plain{k}"))
        bases.append(base)
        line("store alone: plain psycopg, 8 connections", base, "records/s")
        for serve_args in variants:
            shown = " ".join(["cardbench serve", *serve_args])
            got = serve_once(pg, serve_args, n, f"serve{k}")
            if isinstance(got, str):
                print(f"  {shown}: does not start here ({got}), left out")
                continue
            rate, lat, cpu = got
            rows.setdefault(shown, []).append((rate, rate / base))
            line(f"one/req: {shown}", rate, "records/s", lat, rate / base)
            print(f"  {'':46s} CPU ms a record: server {1000 * cpu[0] / n:.2f}, PostgreSQL {1000 * cpu[1] / n:.2f}, "
                  f"load generator {1000 * cpu[2] / n:.2f}", flush=True)
    base = statistics.median(bases)
    print(f"medians of {repeat} (goal: >= {GOAL_RATE} records/s at one record per request, and >= "
          f"{GOAL_RATIO} of the store alone)", flush=True)
    line("store alone: plain psycopg, 8 connections", base, "records/s")
    for shown, got in rows.items():
        rate = statistics.median(r for r, _ in got)
        ratio = statistics.median(q for _, q in got)
        met = rate >= GOAL_RATE and ratio >= GOAL_RATIO
        line(f"one/req: {shown}", rate, "records/s", None, ratio)
        print(f"  {'':46s} goal {'met' if met else 'NOT met'} (ratios {', '.join(f'{q:.2f}' for _, q in got)})",
              flush=True)
    return base


def run(pg, n: int, runs: int, stacks: list[str], variants: list[list[str]], repeat: int) -> None:
    load1 = os.getloadavg()[0]
    print(f"PostgreSQL {pg.url.split('@')[-1]}, {os.cpu_count()} cores shared by servers, database and "
          f"clients; {n} records a row; load average {load1:.1f}", flush=True)
    base = goal_rows(pg, n, variants, repeat)
    print("the other rows, once (ratios to the median store alone above)", flush=True)
    line("store alone, pipelined (one wait a record)", store_alone(pg.new_database(), docs(n, "pipe"), True),
         "records/s")
    db, _ = new_db(pg, station_tokens=False)
    line("store layer: Store.save_all, 8 threads", save_all_direct(db, docs(n, "direct")), "records/s")
    body = json.dumps(docs(1, "t")[0]).encode()
    for stack in stacks:
        if importlib.util.find_spec(STACKS[stack][1]) is None:
            print(f"  {stack}: not installed here, left out")
            continue
        c = stack_child(stack, "serve_apps:trivial", pg.url)
        try:
            secs, lat = load(c.port, [[request("/", "x", body)] * (2 * n // STATIONS)] * STATIONS)
            line(f"ceiling: generator -> bare ASGI on {stack}", 2 * n / secs, "requests/s", lat)
        finally:
            c.stop()
        db, toks = new_db(pg)
        c = stack_child(stack, "serve_apps:cardbench_app", db)
        try:
            rate, lat = one_per_request(c.port, toks, n, stack)
            line(f"one/req: cardbench app on {stack}", rate, "records/s", lat, rate / base)
        finally:
            c.stop()
    if not variants:
        return
    serve_args = variants[0]
    db, toks = new_db(pg)
    shown = " ".join(["cardbench serve", *serve_args])
    try:
        c = serve_child(db, serve_args)
    except RuntimeError as e:
        print(f"  {shown}: does not start here ({str(e).strip().splitlines()[-1][:80]}), left out")
        return
    try:
        d = docs(n, "batched")
        per_conn = [[request("/api/v1/records", toks[i], json.dumps(
            {"schema": "cardbench.export/2", "cards": [], "results": part[j:j + 50], "verify": [], "probes": [],
             "sessions": []}).encode()) for j in range(0, len(part), 50)] for i, part in enumerate(split(d))]
        secs, lat = load(c.port, per_conn)
        line(f"batched: 50 records/request ({shown})", n / secs, "records/s", lat, n / secs / base)
        events = 4 * n
        per_conn = [[request("/api/v1/live", toks[i], json.dumps(
            {"task": f"writing card {i}", "done": j * 1_000_000, "total": 64_000_000_000}).encode())
            for j in range(events // STATIONS)] for i in range(STATIONS)]
        secs, lat = load(c.port, per_conn)
        line(f"progress: POST /api/v1/live, {' '.join(NO_LIVE_LIMIT)}", events / secs, "events/s", lat)
        d = docs(n // 4, "uploader")
        ups = [Uploader(f"http://127.0.0.1:{c.port}", t) for t in toks]

        def station(i, part):
            for x in part:
                ups[i].post(x)
        secs = in_threads(station, split(d))
        line("Uploader: cardbench's client, 1 record/request", len(d) / secs, "records/s")
        drawer_pages(db, c.port, runs)
    finally:
        c.stop()
    print(f"load average {load1:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")


def page_time(url: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as resp:
        resp.read()
        st = resp.headers.get("Server-Timing", "app;dur=nan").split("dur=")[1]
    return float(st), (time.perf_counter() - t0) * 1000


def drawer_pages(db: str, port: int, runs: int) -> None:
    if runs <= 0:
        return
    with open_store(db) as st:
        todo = max(0, runs - st.count())
        for k in range(0, todo, 500):
            st.save_all([Result.from_dict(x) for x in docs(min(500, todo - k), f"fill{k}")])
        total = st.count()
        one = st.results(card="fill0-7", limit=1)[0]
    from cardbench.server.pages import card_url, model_key, model_url
    url = f"http://127.0.0.1:{port}"
    for label, path in (("first page", "/"), ("page 100", "/?page=100"), ("filtered --card", "/?card=fill0-7"),
                        ("a card's page", card_url(one.card.identity())),
                        ("its model's page", model_url(model_key(one.card))),
                        ("API, one card", "/api/v1/results?card=fill0-7")):
        page_time(url + path)                       # warm
        times = [page_time(url + path) for _ in range(5)]
        server = statistics.median(t[0] for t in times)
        client = statistics.median(t[1] for t in times)
        print(f"  drawer of {total} runs, {label:16s} server {server:6.1f} ms, client {client:6.1f} ms "
              "(median of 5)")


class External:
    """--db URL: a server someone else runs; each row gets a fresh database on it."""

    def __init__(self, url: str):
        self.url = url

    def new_database(self) -> str:
        import uuid

        import psycopg
        name = "cb_bench_" + uuid.uuid4().hex[:10]
        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return self.url.rsplit("/", 1)[0] + "/" + name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="a PostgreSQL server's URL (the bench makes its own databases there)")
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=10000, help="fill the store to this many runs for the drawer times")
    ap.add_argument("--stacks", default=",".join(STACKS), help=f"HTTP stacks side by side ({', '.join(STACKS)})")
    ap.add_argument("--serve", action="append", default=None, metavar="ARGS",
                    help="a `cardbench serve` row with these extra arguments (again for more rows; default: "
                         "none and --workers 2; the batched, progress and drawer rows run on the first)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="how many times the goal's rows (store alone, each `cardbench serve`) run, interleaved")
    a = ap.parse_args()
    stacks = [s for s in a.stacks.split(",") if s]
    variants = [shlex.split(v) for v in (a.serve if a.serve is not None else ["", "--workers 2"])]
    for s in stacks:
        if s not in STACKS:
            raise SystemExit(f"--stacks: no stack {s!r} ({', '.join(STACKS)})")
    if a.db:
        run(External(a.db), a.records, a.runs, stacks, variants, max(1, a.repeat))
        return
    import pytest  # running_postgres skips through pytest when PostgreSQL is missing
    try:
        with running_postgres() as pg:
            run(pg, a.records, a.runs, stacks, variants, max(1, a.repeat))
    except pytest.skip.Exception as e:
        raise SystemExit(f"no PostgreSQL: {e}") from None


if __name__ == "__main__":
    main()
