#!/usr/bin/env python3
"""How the station server's pages and API slow down as the store grows: 1e4, 1e5 and 1e6 runs
on PostgreSQL (docs/scaling.md reads this to say where partitioning starts to pay).

Starts a throwaway PostgreSQL (tests/store's PostgresServer) unless --db URL is given, stores
--seed real results through cardbench (Store.save_all: --cards cards, 8 stations), then grows
the store by copying them inside PostgreSQL (INSERT ... SELECT: each copy a run of its own id,
an hour earlier, with its tests, samples and station claim; the document is the original's).
At each size (--sizes) a `cardbench serve` answers, and each page is timed by the server's own
Server-Timing header (median of 5 after one warm-up): the drawer's first page and page 100, a
card's page, the drawer filtered by card, the live index, one result by id, and the API's runs
of one card. The tables' size on disk is printed beside.

Usage: python3 bench/serve_scale.py [--db postgresql://...] [--sizes 10000,100000,1000000]
       [--seed 1000] [--cards 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "tests", "store"))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))

from cardbench.server import tokens  # noqa: E402
from cardbench.server.pages import card_url  # noqa: E402
from cardbench.store.core import open_store  # noqa: E402
from cardbench_factories import make_result, running_postgres  # noqa: E402
from serve_helpers import ServeProcess  # noqa: E402

RUN_COLS = ("card_id, reader_id, host_id, started_at, finished_at, complete, source, error, tool_version, schema, "
            "n_tests, n_samples, document, saved_at")
TEST_COLS = ("position, name, method, complete, n_runs, median_bytes_per_s, mean_bytes_per_s, min_bytes_per_s, "
             "max_bytes_per_s, stdev_bytes_per_s, ci95_low, ci95_high, x_rating, median_iops, limited_by, warnings")


def seed(db: str, n: int, cards: int) -> None:
    with open_store(db) as st:
        for s in range(8):
            tokens.add(st, f"station-{s}")
        for k in range(0, n, 250):
            part = [make_result(brand=f"Brand{i % 20}", serial=f"card-{i % cards}", curves=i % 5 == 0,
                                started_at=f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T10:{i % 60:02d}:00+00:00")
                    for i in range(k, min(n, k + 250))]
            st.save_all(part, before=tokens.claimer(f"station-{(k // 250) % 8}"))


def grow(db: str, want: int, seed_n: int) -> float:
    """Copy the seed runs (ids 1..seed_n's result ids) until the store holds ``want``; seconds taken."""
    import psycopg
    t0 = time.monotonic()
    with psycopg.connect(db, autocommit=True) as c:
        have = c.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        first = have // seed_n             # copies made so far (the seed is copy 0)
        copies = -(-want // seed_n) - first
        if copies <= 0:
            return 0.0
        with c.transaction():
            c.execute("CREATE TEMP TABLE gen ON COMMIT DROP AS SELECT r.id AS old, r.result_id AS rid, g "
                      "FROM runs r, generate_series(%s::int, %s::int) g WHERE r.result_id NOT LIKE '%%:%%'",
                      (first, first + copies - 1))
            c.execute(f"INSERT INTO runs (result_id, started_epoch, {RUN_COLS}) SELECT gen.rid || ':' || gen.g, "
                      f"r.started_epoch - gen.g * 3600, {', '.join('r.' + x.strip() for x in RUN_COLS.split(','))} "
                      "FROM gen JOIN runs r ON r.id = gen.old")
            c.execute("CREATE TEMP TABLE m ON COMMIT DROP AS SELECT gen.old, nr.id AS new FROM gen "
                      "JOIN runs nr ON nr.result_id = gen.rid || ':' || gen.g")
            c.execute(f"INSERT INTO tests (run_id, {TEST_COLS}) SELECT m.new, "
                      f"{', '.join('t.' + x.strip() for x in TEST_COLS.split(','))} FROM m JOIN tests t ON t.run_id = m.old")
            c.execute("INSERT INTO samples (run_id, test_id, kind, idx, bytes, seconds, ops, offset_bytes) "
                      "SELECT m.new, nt.id, s.kind, s.idx, s.bytes, s.seconds, s.ops, s.offset_bytes FROM m "
                      "JOIN samples s ON s.run_id = m.old JOIN tests t ON t.id = s.test_id "
                      "JOIN tests nt ON nt.run_id = m.new AND nt.position = t.position")
            c.execute("INSERT INTO record_stations (kind, record_id, station, shared_at) SELECT 'result', "
                      "gen.rid || ':' || gen.g, rs.station, rs.shared_at FROM gen "
                      "JOIN record_stations rs ON rs.kind = 'result' AND rs.record_id = gen.rid")
        c.execute("ANALYZE")
    return time.monotonic() - t0


def page_ms(url: str) -> float:
    with urllib.request.urlopen(url, timeout=300) as resp:
        resp.read()
        return float(resp.headers.get("Server-Timing", "app;dur=nan").split("dur=")[1])


def run(db: str, sizes: list[int], seed_n: int, cards: int) -> None:
    t0 = time.monotonic()
    seed(db, seed_n, cards)
    print(f"seeded {seed_n} runs of {cards} cards through Store.save_all in {time.monotonic() - t0:.0f} s; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    with open_store(db) as st:
        one = st.results(limit=1)[0]
    pages = (("drawer, first page", "/"), ("drawer, page 100", "/?page=100"),
             ("drawer filtered by card", "/?card=card-7"), ("a card's page", card_url(one.card.identity())),
             ("live index", "/live"), ("one result by id", f"/api/v1/results/{one.id}"),
             ("API, one card's runs", "/api/v1/results?card=card-7"))
    for size in sizes:
        took = grow(db, size, seed_n)
        import psycopg
        with psycopg.connect(db) as c:
            total = c.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            mb = c.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 1e6
        srv = ServeProcess(db).start()
        try:
            print(f"{total} runs ({mb:.0f} MB database; grown in {took:.0f} s), load average "
                  f"{os.getloadavg()[0]:.1f}:", flush=True)
            for label, path in pages:
                if "card's runs" in label and total > 200_000:
                    print(f"  {label:26s} left out above 2e5 runs (the whole card's history in one answer)")
                    continue
                page_ms(srv.url + path)
                ms = statistics.median(page_ms(srv.url + path) for _ in range(5))
                print(f"  {label:26s} {ms:8.1f} ms server time (median of 5)", flush=True)
        finally:
            srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--cards", type=int, default=200)
    a = ap.parse_args()
    sizes = [int(float(x)) for x in a.sizes.split(",")]
    if a.db:
        run(a.db, sizes, a.seed, a.cards)
        return
    import pytest  # running_postgres skips through pytest when PostgreSQL is missing
    try:
        with running_postgres() as pg:
            run(pg.new_database(), sizes, a.seed, a.cards)
    except pytest.skip.Exception as e:
        raise SystemExit(f"no PostgreSQL: {e}") from None


if __name__ == "__main__":
    main()
