#!/usr/bin/env python3
"""How many rows a multi-row INSERT should carry on PostgreSQL (cardbench.store.backends.MULTI_ROWS):
Store.save_all of the same records, one record a save (the station server's one record a request)
and 50 a save (an upload as `cardbench share` sends it, an import), for each MULTI_ROWS given,
rounds interleaved, each on a fresh database of a throwaway PostgreSQL (fsync off, as the tests).
Prints records/s, this process's CPU a record, and the ratio to MULTI_ROWS 1 (a statement a row,
prepared by psycopg after its 5th use) of the same round.

A record here carries about 12 sample rows; each sample row finds its run and test by two
subqueries, so a statement of many rows is many subplans for PostgreSQL to plan, and a statement
text of its own for every row count (never prepared).

Usage: python3 bench/store_rows.py [--rows 200,50,20,8,1] [--records 400] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "tests", "store"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cardbench.result import Result  # noqa: E402
from cardbench.store import backends  # noqa: E402
from cardbench.store.core import open_store  # noqa: E402
from cardbench_factories import running_postgres  # noqa: E402
from serve_load import docs  # noqa: E402


def one(pg, rows: int, batch: int, n: int, tag: str) -> tuple[float, float]:
    """(records/s, CPU ms a record) of n records saved ``batch`` at a time with MULTI_ROWS = rows."""
    backends.MULTI_ROWS = rows
    results = [Result.from_dict(d) for d in docs(n, tag)]
    with open_store(pg.new_database()) as st:
        t0, c0 = time.perf_counter(), time.process_time()
        for k in range(0, n, batch):
            st.save_all(results[k:k + batch])
        return n / (time.perf_counter() - t0), (time.process_time() - c0) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="200,50,20,8,1", help="MULTI_ROWS values, comma-separated")
    ap.add_argument("--records", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    sizes = [int(x) for x in a.rows.split(",")]
    if 1 not in sizes:
        sizes.append(1)
    kept = backends.MULTI_ROWS
    import pytest  # running_postgres skips through pytest when PostgreSQL is missing
    try:
        with running_postgres() as pg:
            print(f"PostgreSQL {pg.url.split('@')[-1]}, {a.records} records a row, {a.rounds} rounds, "
                  f"load average {os.getloadavg()[0]:.1f}; cardbench's MULTI_ROWS is {kept}", flush=True)
            for batch in (1, 50):
                got: dict[int, list[tuple[float, float, float]]] = {s: [] for s in sizes}
                for r in range(a.rounds):
                    rates = {s: one(pg, s, batch, a.records, f"r{r}b{batch}m{s}") for s in sizes}
                    for s in sizes:
                        got[s].append((*rates[s], rates[s][0] / rates[1][0]))
                for s in sizes:
                    rate = statistics.median(g[0] for g in got[s])
                    cpu = statistics.median(g[1] for g in got[s])
                    ratios = ", ".join(f"{g[2]:.2f}" for g in got[s])
                    print(f"  {batch:2d} a save, MULTI_ROWS {s:3d}: {rate:6.0f} records/s, CPU {cpu:.2f} ms a record, "
                          f"x{ratios} of a statement a row", flush=True)
    except pytest.skip.Exception as e:
        raise SystemExit(f"no PostgreSQL: {e}") from None
    finally:
        backends.MULTI_ROWS = kept


if __name__ == "__main__":
    main()
