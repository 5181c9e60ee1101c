"""rejudge_reader(): a reader's observed ceiling flows from stored results into marks and verdicts
(results built in memory, stored in a real SQLite file; no emulator, no root); `cardbench readers
--rejudge`; and the emulator's pacing model behind a reader ceiling."""

from __future__ import annotations

import json

import pytest

from cardbench.result import Reader
from cardbench.store import open_store
from cardbench.units import MB
from cardbench.verdicts import rejudge_reader
from realparts import call_cli
from verdict_emulation import stored_run_result

READER = "flow reader"
IDENT = Reader(name=READER).identity()


def _verdicts(result) -> dict:
    return {(c["name"], c["direction"]): c["verdict"] for c in result.claims}


def _by_name(store) -> dict:
    return {r.card.name: r for r in store.results(reader=IDENT)}


def test_a_ceiling_learned_later_marks_the_earlier_cards_and_goes_when_a_faster_card_comes(tmp_path):
    with open_store(str(tmp_path / "db.sqlite3")) as store:
        first = stored_run_result("a", 20.0 * MB, 5 * MB, reader=READER, label="100X 150X")
        assert _verdicts(first)[("150X", "read")] == "fails"          # judged alone: no ceiling known
        store.save(first)
        assert rejudge_reader(store, IDENT) == []                     # one card: no ceiling yet
        for name, read, write in (("b", 20.2 * MB, 9 * MB), ("c", 19.9 * MB, 14 * MB)):
            store.save(stored_run_result(name, read, write, reader=READER, label="100X 150X"))
        store.save(stored_run_result("slow", 12 * MB, 6 * MB, reader=READER, label="60X"))
        changed = rejudge_reader(store, IDENT)
        assert sorted(r.card.name for r in changed) == ["a", "b", "c"]
        stored = _by_name(store)
        for name in "abc":
            read = stored[name].test("cold_read")
            assert read.limited_by and "limited by the reader" in read.limited_by
            assert sum("at the ceiling of the path" in w for w in read.warnings) == 1
            assert stored[name].test("seq_write").limited_by is None  # writes differ: no write ceiling
            v = _verdicts(stored[name])
            assert v[("150X", "read")] == "inconclusive" and v[("100X", "read")] == "meets"
            assert v[("150X", "write")] == "fails"                    # the write flag: not reader-limited
        assert stored["slow"].test("cold_read").limited_by is None
        assert _verdicts(stored["slow"]) == {("60X", "read"): "meets", ("60X", "write"): "fails"}
        assert rejudge_reader(store, IDENT) == []                     # idempotent: nothing changes again

        # a faster card through the same reader: 20 MB/s was a plateau, not the reader's limit
        store.save(stored_run_result("fast", 30 * MB, 10 * MB, reader=READER, label="150X"))
        changed = rejudge_reader(store, IDENT)
        assert sorted(r.card.name for r in changed) == ["a", "b", "c"]
        stored = _by_name(store)
        for name in "abc":
            read = stored[name].test("cold_read")
            assert read.limited_by is None and not [w for w in read.warnings if "ceiling" in w]
            assert _verdicts(stored[name])[("150X", "read")] == "fails"
        assert _verdicts(stored["fast"])[("150X", "read")] == "meets"


def test_other_readers_imports_partial_runs_and_unnamed_readers_are_left_alone(tmp_path):
    with open_store(str(tmp_path / "db.sqlite3")) as store:
        for name, write in (("a", 5 * MB), ("b", 9 * MB)):
            store.save(stored_run_result(name, 20 * MB, write, reader=READER, label="150X"))
        imported = stored_run_result("imported", 20 * MB, 14 * MB, reader=READER, label="150X", source="import")
        imported.claims = []                                          # as an importer stores it
        store.save(imported)
        partial = stored_run_result("partial", 20 * MB, 3 * MB, reader=READER, label="150X", complete=False)
        store.save(partial)
        other = stored_run_result("elsewhere", 20 * MB, 30 * MB, reader=READER + " 2", label="150X")
        store.save(other)
        for name, write in (("u1", 5 * MB), ("u2", 9 * MB), ("u3", 14 * MB)):
            store.save(stored_run_result(name, 20 * MB, write, reader=None, label="150X"))

        changed = rejudge_reader(store, IDENT)                        # the import counts as evidence
        assert sorted(r.card.name for r in changed) == ["a", "b"]
        stored = {r.card.name: r for r in store.results()}
        assert stored["imported"].claims == [] and stored["imported"].test("cold_read").limited_by is None
        assert stored["partial"].test("cold_read").limited_by is None
        assert stored["elsewhere"].test("cold_read").limited_by is None
        assert _verdicts(stored["elsewhere"])[("150X", "read")] == "fails"
        assert rejudge_reader(store, Reader().identity()) == []       # "name:unknown": not one reader
        assert all(stored[n].test("cold_read").limited_by is None for n in ("u1", "u2", "u3"))


@pytest.mark.timing
def test_emulated_reader_ceiling_holds_after_the_card_set_the_pace():
    """The emulator's pacing model: behind a reader with a ceiling C, a card faster than C reads at
    C also right after writes the card itself paced (slower than C), with back-to-back requests.
    (The time spent waiting for the card's bus once counted as "oversleep" credit on the reader's
    link, so reads after a write phase ran at the card's rate, above the ceiling.)"""
    from cardbench.emulate.pacing import ReaderModel
    from cardbench.emulate.spec import CardSpec
    from cardbench.units import MiB

    reader = ReaderModel(20 * MB, turnaround=0.010)
    card = reader.add(CardSpec(size=256 * MiB, write_rate=8 * MB, read_rate=30 * MB))
    now = 0.0

    def stream(op: str, count: int) -> float:
        nonlocal now
        start = now
        for _ in range(count):
            v = card.request(op, 0, MiB, now)
            card.answered(v.finish + 0.001)   # answered 1 ms late
            now = v.finish + 0.003            # the host's turnaround: 2 ms after the answer
        return count * MiB / (now - start)

    assert stream("write", 64) == pytest.approx(8 * MB, rel=0.03)
    assert stream("read", 16) == pytest.approx(20 * MB, rel=0.03)
    assert stream("write", 16) == pytest.approx(8 * MB, rel=0.03)


def test_readers_rejudge_catches_up_a_store_filled_before(tmp_path):
    """`cardbench readers --rejudge`: results stored without re-judging (an older cardbench, a
    library user) get their marks; the JSON on stdout stays clean."""
    db = str(tmp_path / "db.sqlite3")
    with open_store(db) as store:
        for name, write in (("a", 5 * MB), ("b", 9 * MB), ("c", 14 * MB)):
            store.save(stored_run_result(name, 20 * MB, write, reader=READER, label="150X"))
    p = call_cli("readers", "--db", db, "--format", "json", "--rejudge")
    assert p.returncode == 0, p.stderr
    assert "3 stored result(s) judged again" in p.stderr
    assert json.loads(p.stdout)[0]["confidence"] == "likely"
    with open_store(db) as store:
        assert all(r.test("cold_read").limited_by and _verdicts(r)[("150X", "read")] == "inconclusive"
                   for r in store.results())
    p = call_cli("readers", "--db", db, "--rejudge")
    assert p.returncode == 0 and "0 stored result(s) judged again" in p.stderr
