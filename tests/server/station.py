"""One station, as a child process: records N results through the one save path (record) with
--share set in its environment, into its own local SQLite store and outbox, then prints their ids.

    python station.py NAME N LOCAL_DB
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))
from cardbench.record import record  # noqa: E402
from cardbench_factories import make_result  # noqa: E402

name, n, db = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ids = []
for i in range(n):
    r = make_result(brand=f"{name}-card", serial=f"{name}-{i}", started_at=f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}+00:00")
    rec = record(r, db)
    assert rec.stored, rec.error
    for w in rec.warnings:
        print(w, file=sys.stderr)
    ids.append(r.id)
    time.sleep(0.05)
print(json.dumps(ids))
