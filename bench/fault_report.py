"""The fault suite's scenario table: run tests/faults and print every scenario with its outcome.

    sudo python3 bench/fault_report.py            # Markdown table on stdout
    sudo python3 bench/fault_report.py --json     # the rows as JSON

The same table is printed at the end of every pytest run that includes tests/faults (CI too);
this script runs only the fault suite and prints the table alone, e.g. for an issue or a PR.
Extra arguments go to pytest (e.g. ``-k preserve``). CARDBENCH_FAULT_SEED=N repeats the random
signal times of an earlier run (the seed is in the table).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    extra = [a for a in argv if a != "--json"]
    with tempfile.TemporaryDirectory(prefix="cardbench-fault-report-") as d:
        out = Path(d) / "rows.json"
        env = dict(os.environ, CARDBENCH_FAULT_REPORT=str(out))
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/faults", *extra],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - t0
        if not out.exists():
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
            print(f"fault_report: the fault suite wrote no table (pytest exit {proc.returncode})", file=sys.stderr)
            return proc.returncode or 1
        rows = json.loads(out.read_text())
    if as_json:
        print(json.dumps({"seconds": seconds, "pytest_exit": proc.returncode, "rows": rows}, indent=1))
        return proc.returncode
    print("| scenario | expected | outcome | lost | observed |")
    print("|---|---|---|---|---|")
    for r in rows:
        cells = [r["scenario"], r["expected"], r["outcome"], r.get("lost", ""), r["observed"]]
        print("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print()
    print(f"{len(rows)} scenarios in {seconds:.0f} s: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
