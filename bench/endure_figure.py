#!/usr/bin/env python3
"""The figure of docs/endurance.md, from a real run: four emulated cards (real loop devices behind
FUSE servers, each with the emulator's wear model: blocks that fail after a set number of writes,
with a spread between blocks) endure at once through `endure_many`, each round stored in a
SQLite file; then the text `cardbench endure` prints at the end (each card's answer, the table),
the chart as an SVG file and `cardbench report --html` of the store.
Usage: sudo python3 bench/endure_figure.py OUT_DIR   (needs the emulator's wear model)
"""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import ExitStack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from cardbench.emulate import CardSpec, EmulatedCard  # noqa: E402
from cardbench.endure import EndureOptions  # noqa: E402
from cardbench.endure.many import endure_many  # noqa: E402
from cardbench.record import record  # noqa: E402
from cardbench.report.endurance import endurance_chart, live_table, render_endurance  # noqa: E402
from cardbench.report.html import render_html  # noqa: E402
from cardbench.report.terminal import to_text  # noqa: E402
from cardbench.store import open_store  # noqa: E402
from cardbench.target import open_device_target  # noqa: E402

MiB = 1 << 20
#: three cards: (name, write MB/s, read MB/s, wear: writes a block takes, spread, what a worn block does)
CARDS = (("good", 30e6, 60e6, 60, 0.3, "stale"),
         ("fair", 24e6, 50e6, 30, 0.5, "eio"),
         ("poor", 16e6, 40e6, 8, 0.6, "ff"),
         ("brittle", 20e6, 45e6, 14, 0.2, "readonly"))


def spec(name, w, r, cycles, spread, mode) -> CardSpec:
    return CardSpec(size=16 * MiB, write_rate=w, read_rate=r, name=f"fig-{name}", wear_cycles=cycles,  # type: ignore[call-arg]
                    wear_spread=spread, wear_mode=mode, wear_seed=31)


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    db = os.path.join(out, "endurance.sqlite3")
    with tempfile.TemporaryDirectory() as state, ExitStack() as stack:
        cards = [stack.enter_context(EmulatedCard(spec(*c))) for c in CARDS]
        targets = [open_device_target(c.device, whole_device=True) for c in cards]
        result = endure_many(targets, EndureOptions(rounds=80, state_dir=state),
                             save=lambda doc: record(doc, db), say=lambda line: print(line, file=sys.stderr))
    for row in result.rows:
        print(f"{row.device}: " + render_endurance(row.doc or {}).rstrip())
    print(to_text([live_table([r.as_dict() for r in result.rows], width=80)], 80), end="")
    with open_store(db) as st:
        docs = st.records("endurance")
    with open(os.path.join(out, "endurance.svg"), "w") as fh:
        fh.write(endurance_chart(docs, chart_id="endurance-figure"))
    with open(os.path.join(out, "endurance.html"), "w") as fh:
        fh.write(render_html([], endurance_docs=docs, title="cardbench endurance figure"))


if __name__ == "__main__":
    main()
