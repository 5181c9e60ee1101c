"""Issue 26: the batched save path (``Store.save_all`` one statement per table per batch) stores
exactly what the record-by-record path stored. ``data/bulk_export.json`` is the export of
``_saves()`` written by the record-by-record code (before the batch path) on SQLite, and checked
equal on PostgreSQL then; both backends must still give it byte for byte.

Regenerate (only when the records below change, with code known to be right):
    PYTHONPATH=src:tests/store python3 tests/store/test_store_bulk.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cardbench.store import export  # noqa: E402
from cardbench.store.core import open_store  # noqa: E402
from cardbench_factories import make_result  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "data" / "bulk_export.json"
CARD_A = {"brand": "Lexar", "capacity_bytes": 48_000_000, "label": "4X", "serial": "A-1"}
CARD_B = {"brand": "SanDisk", "capacity_bytes": 8_000_000_000, "label": "Ultra", "serial": "B-2", "name": "blue one"}
READER = {"name": "quad reader", "vendor_id": "05e3", "product_id": "0749", "serial": "Q1"}
#: the host a golden record names: fixed, so the golden export holds nothing of the machine that
#: runs the test (its kernel release, hostname or Python would fail it on any other machine)
HOST = {"hostname": "golden-host", "kernel": "0.0.0-golden", "machine": "x86_64", "python": "3.11.0"}


def _r(i: int, **kw):
    kw.setdefault("serial", f"S-{i % 4}")
    kw.setdefault("host", dict(HOST))
    return make_result(id=f"r{i:03d}", started_at=f"2024-0{1 + i % 9}-1{i % 10}T10:00:00+00:00", **kw)


def _verify(i: int, card=CARD_A, verdict="genuine", **kw) -> dict:
    return {"schema": "cardbench.verify/1", "id": f"v{i:03d}", "verdict": verdict, "card": card, "reader": READER,
            "started_at": f"2024-02-0{1 + i}T09:00:00+00:00", "finished_at": f"2024-02-0{1 + i}T09:30:00+00:00",
            **kw}


def _probe(i: int, cards=(CARD_A, CARD_B)) -> dict:
    return {"schema": "cardbench.probe/1", "id": f"p{i:03d}", "reader": READER,
            "created_at": f"2024-03-0{1 + i}T11:00:00+00:00", "finding": {"confidence": "high", "shared": True},
            "measured": {"devices": [{"device": f"/dev/sd{chr(98 + k)}", "card": c, "rate": 20e6 + k}
                                     for k, c in enumerate(cards)]}}


def _session(i: int, cards=(CARD_B, CARD_A)) -> dict:
    return {"schema": "cardbench.session/1", "id": f"s{i:03d}", "started_at": f"2024-04-0{1 + i}T08:00:00+00:00",
            "finished_at": None, "cards": [{"card": c, "reader": READER, "result": f"r{k:03d}"}
                                           for k, c in enumerate(cards)] + [{"note": "empty slot"}]}


def _saves() -> list[tuple[str, object]]:
    """What is saved, in order: ("one", record) through save/save_verify/..., ("all", [records])."""
    return [
        ("one", _r(1)),
        ("one", _r(2, curves=True, warnings=("cache suspected",), limited_by="reader")),
        ("all", [_r(3, brand="Kingston", name=None), _r(4, brand="Kingston", name="named later", serial="S-3"),
                 _r(5, complete=False), _verify(1), _r(6, read_rate=None, claims=[{"label": "4X", "test": "cold_read",
                                                                                   "verdict": "holds"}])]),
        ("all", [_r(1, write_times=(40.0, 40.1)), _r(7, curves=True), _r(7, read_runs=5, reader="other reader"),
                 _probe(1), _session(1), _r(8, source="import:fio")]),
        ("one", _verify(2, card=CARD_B, verdict="counterfeit", mode="quick")),
        ("one", _probe(2, cards=(CARD_B,))),
        ("one", _session(2, cards=())),
        ("all", [_verify(1, verdict="counterfeit"), _session(1, cards=(CARD_A,)), _r(9, brand="Transcend",
                                                                                   capacity=2_000_000_000),
                 _r(2, curves=False, serial="S-2"), _r(10, brand="Transcend", capacity=2_000_000_000, label="133x")]),
        ("all", []),
        ("one", _r(5, complete=True)),
    ]


_ONE = {"cardbench.verify/1": "save_verify", "cardbench.probe/1": "save_probe", "cardbench.session/1": "save_session"}


def _apply(db) -> str:
    with open_store(db) as st:
        for how, what in _saves():
            if how == "all":
                st.save_all(what)
            elif isinstance(what, dict):
                getattr(st, _ONE[what["schema"]])(what)
            else:
                st.save(what)
        assert st.check() == []
        doc = export.collect(st)
    # kinds declared after the golden was written (the pull test, the geometry, ...) add their own
    # section, empty here: checked, then left out, so the rest is compared byte for byte
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    later = [k for k in doc if k not in golden]
    assert all(doc[k] == [] for k in later), later
    return export.to_json({k: v for k, v in doc.items() if k in golden})


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_the_batch_path_stores_what_the_record_path_stored(tmp_path, request, kind):
    db = tmp_path / "bulk.db" if kind == "sqlite" else request.getfixturevalue("pg_url")
    assert _apply(db) == GOLDEN.read_text(encoding="utf-8")


def test_a_batch_saved_twice_is_stored_once(tmp_path):
    batch = [_r(i, curves=i % 2 == 0) for i in range(30)] + [_verify(1), _probe(1), _session(1)]
    with open_store(tmp_path / "twice.db") as st:
        st.save_all(batch)
        first = export.to_json(export.collect(st))
        st.save_all(batch)
        assert export.to_json(export.collect(st)) == first
        assert st.count() == 30 and st.check() == []


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_batch_is_claimed_for_its_station_whole_or_not_at_all(tmp_path, request, kind):
    """The station server's claim (tokens.claimer) of a batch: one INSERT and one read per kind;
    a batch holding one record another station shared first is refused whole, naming it."""
    from cardbench.server import tokens
    db = tmp_path / "claim.db" if kind == "sqlite" else request.getfixturevalue("pg_url")
    mine = [_r(1), _r(2), _verify(1), _probe(1), _session(1)]
    with open_store(db) as st:
        st.save_all(mine, before=tokens.claimer("lab-a"))
        st.save_all(mine, before=tokens.claimer("lab-a"))           # again, by its own station: fine
        before = export.to_json(export.collect(st))
        with pytest.raises(tokens.Forbidden, match="probe p001 was shared by another station"):
            st.save_all([_r(3), _probe(1), _r(2)], before=tokens.claimer("lab-b"))
        assert export.to_json(export.collect(st)) == before and st.count() == 2
        assert tokens.station_of_record(st, "verify", "v001") == "lab-a"
        st.save_all([_r(3), _verify(2)], before=tokens.claimer("lab-b"))
        assert tokens.station_of_record(st, "result", "r003") == "lab-b" and st.count() == 3


if __name__ == "__main__":
    import tempfile

    from cardbench_factories import running_postgres

    with tempfile.TemporaryDirectory() as d:
        text = _apply(Path(d) / "golden.db")
    with running_postgres() as server:
        assert _apply(server.new_database()) == text, "SQLite and PostgreSQL differ"
    GOLDEN.write_text(text, encoding="utf-8")
    print(f"wrote {GOLDEN} ({len(text)} characters)")
