#!/usr/bin/env python3
"""Endurance progress at a lab's scale: 120 simulated cards on 12 stations, each sending its
progress every 5 s for 2 minutes to two `cardbench serve` processes on one PostgreSQL (stations
split between them), each station's live stream read on the OTHER server.

Reports events sent and refused, events never seen on the other server (dropped), and the lag
from an event's sending to its card's row in the other server's stream (p50, p99, max). Goal
(issue 34): nothing dropped, every live row current within 2 s. tests/server/test_server_live.py
runs the same simulation for 15 s in CI.

Starts a throwaway PostgreSQL (tests/store's PostgresServer) unless --db URL is given.

Usage: python3 bench/live_load.py [--db postgresql://...] [--cards 120] [--every 5] [--seconds 120]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "tests", "store"))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))

from cardbench_factories import running_postgres  # noqa: E402
from live_sim import simulate  # noqa: E402
from serve_helpers import ServeProcess, token_for  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="a PostgreSQL URL (default: a throwaway server)")
    ap.add_argument("--cards", type=int, default=120)
    ap.add_argument("--stations", type=int, default=12)
    ap.add_argument("--every", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=120.0)
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        db = args.db or stack.enter_context(running_postgres()).new_database()
        servers = [ServeProcess(db).start() for _ in range(2)]
        for s in servers:
            stack.callback(s.stop)
        toks = {f"lab-{i:02d}": token_for(db, f"lab-{i:02d}") for i in range(args.stations)}
        t0 = time.monotonic()
        out = simulate([s.url for s in servers], toks, cards=args.cards, every=args.every, seconds=args.seconds)
        f = {k: round(v, 4) if isinstance(v, float) else v for k, v in out.figures().items()}
        f.update(cards=args.cards, stations=args.stations, every_s=args.every, seconds=args.seconds,
                 took_s=round(time.monotonic() - t0, 1),
                 load_avg=[round(x, 1) for x in os.getloadavg()])
    print(json.dumps(f, indent=1))
    ok = f["failed"] == 0 and f["unseen"] == 0 and f["lag_max_s"] <= 2.0
    print("goal (nothing dropped, every row within 2 s):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
