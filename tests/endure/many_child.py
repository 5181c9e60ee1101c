"""A child process for tests/endure/test_endure_many.py: `python many_child.py DB STATE DEV...`
runs endure_many on the devices until the bad limit (for ever on a healthy card), each round and
each end stored in DB; prints "round N DEVICE" as each round is stored, and at the end one JSON
line: each card's ended and rounds, and whether it was interrupted. Ctrl-C (SIGINT) stops it."""

from __future__ import annotations

import json
import sys

from cardbench.endure import EndureOptions
from cardbench.endure.many import endure_many
from cardbench.record import record
from cardbench.signals import install_sigterm
from cardbench.target import open_device_target


def main() -> None:
    db, state, *devices = sys.argv[1:]
    install_sigterm()
    targets = [open_device_target(d, whole_device=True) for d in devices]

    def save(doc: dict) -> None:
        assert record(doc, db).stored
        print(f"round {len(doc['rounds'])} {doc['device']} {doc['ended']}", flush=True)

    result = endure_many(targets, EndureOptions(state_dir=state, probe=False), save=save)
    print(json.dumps({"interrupted": result.interrupted,
                      "cards": [{"device": r.device, "state": r.state, "ended": r.ended,
                                 "rounds": len((r.doc or {}).get("rounds") or [])} for r in result.rows]}),
          flush=True)


if __name__ == "__main__":
    main()
