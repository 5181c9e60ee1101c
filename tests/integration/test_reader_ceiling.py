"""Is the reader the ceiling? Cards behind an emulated reader with a ceiling C, each run with
`cardbench run DIR --reader NAME --db DB` (a real child process, as a user runs it):

* three cards whose set read rates exceed C (and whose writes, below C, differ widely) read at
  C; once the third is stored, `cardbench readers` names C (within 5%) and all three stored
  results, the earlier ones too, are marked reader-limited, their claims above C inconclusive;
* two slower cards behind the same reader are judged as measured and not marked;
* behind a reader without a ceiling, cards of different speeds: nothing marked, no ceiling named.

The emulator shares one timeline per reader: a card alone behind a reader with ceiling C runs at
min(card rate, C), for reads and writes alike.
"""

from __future__ import annotations

import json
import os

import pytest

from cardbench.result import Reader, Result
from cardbench.store import open_store
from cardbench.units import MB, MiB
from cardbench.verdicts import rejudge_reader
from realparts import ROOT, call_cli
from verdict_emulation import ATTEMPTS, DISTURBED

pytestmark = [pytest.mark.skipif(not ROOT or not os.path.exists("/dev/fuse"), reason="needs root and FUSE"),
              pytest.mark.needs_root, pytest.mark.slow, pytest.mark.timing]

C = 20 * MB
CEILING_READER = "usb reader with a ceiling"
FREE_READER = "reader without a ceiling"
FAST_LABEL = "100X 150X C6"       # 15 MB/s read (below C), 22.5 MB/s read (above C), 6 MB/s write
#: (card name, set read MB/s, set write MB/s, label, MiB per test file), in the order they are run
CEILING_CARDS = [
    ("fast-a", 30, 8, FAST_LABEL, 16),
    ("slow-a", 12, 10, "60X", 8),
    ("fast-b", 45, 13, FAST_LABEL, 16),
    ("slow-b", 8, 6, "60X", 8),
    ("fast-c", 60, 19, FAST_LABEL, 16),
]
FREE_CARDS = [
    ("free-a", 30, 8, "100X 250X", 8),    # 250X = 37.5 MB/s: a fails, b and c meet
    ("free-b", 45, 13, "100X 250X", 8),
    ("free-c", 60, 19, "100X 250X", 8),
]


def _verdicts(result: Result) -> dict[tuple[str, str], str]:
    return {(c["name"], c["direction"]): c["verdict"] for c in result.claims}


def _run_cards(reader, cards, reader_name: str, db: str, ceiling: float | None) -> dict[str, list[dict]]:
    """Each card through the CLI (ext4 on the emulated card); returns the JSON documents printed,
    per card name (the last one is the run that counts; disturbed ones are deleted from the store)."""
    from cardbench.emulate import CardSpec
    printed: dict[str, list[dict]] = {}
    for name, read, write, label, mib in cards:
        card = reader.add_card(CardSpec(size=128 * MiB, write_rate=write * MB, read_rate=read * MB, name=name))
        top = ceiling or float("inf")
        expect = {"cold_read": min(read * MB, top), "seq_write": min(write * MB, top)}
        with card.filesystem("ext4") as mnt:
            for attempt in range(1, ATTEMPTS + 1):
                p = call_cli("run", mnt, "--size", f"{mib}MiB", "--runs", "2", "--warmup", "0", "--name", name, "--label", label,
                            "--reader", reader_name, "--db", db, "--format", "json", timeout=180)
                assert p.returncode == 0, p.stderr
                doc = json.loads(p.stdout)
                printed.setdefault(name, []).append(doc)
                result = Result.from_dict(doc)
                # no figure at all (every cold read proved a cache's under a loaded machine) is as
                # disturbed as a figure off the set rate: measured again
                off = {t: (result.test(t).median_bytes_per_s or float("inf")) / v - 1 for t, v in expect.items()}
                if all(abs(x) <= (DISTURBED if ceiling else 0.10) for x in off.values()):
                    break
                print(f"{name}: attempt {attempt} disturbed ({off}); run again")
                with open_store(db) as store:
                    store.delete(result.id)
            else:
                pytest.fail(f"{name}: every attempt disturbed")
        card.close()
    return printed


def test_reader_ceiling_marks_the_fast_cards_and_only_them(emu_dir, tmp_path):
    from cardbench.emulate import EmulatedReader
    db = str(tmp_path / "results.sqlite3")
    with EmulatedReader(ceiling=C) as reader:
        printed = _run_cards(reader, CEILING_CARDS, CEILING_READER, db, C)
    with EmulatedReader(ceiling=None) as reader:
        _run_cards(reader, FREE_CARDS, FREE_READER, db, None)

    # judged alone, the first fast card fails 150X; the third one's own output already has the mark
    first = Result.from_dict(printed["fast-a"][0])
    assert first.test("cold_read").limited_by is None and _verdicts(first)[("150X", "read")] == "fails"
    last = Result.from_dict(printed["fast-c"][-1])
    assert "limited by the reader" in (last.test("cold_read").limited_by or "")
    assert _verdicts(last)[("150X", "read")] == "inconclusive"

    p = call_cli("readers", "--db", db, "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    seen = rows[CEILING_READER]
    assert seen["confidence"] == "likely" and seen["direction"] == "read" and seen["cards_at_ceiling"] == 3, seen
    assert seen["ceiling_bytes_per_s"] == pytest.approx(C, rel=0.05), seen["evidence"]
    free = rows[FREE_READER]
    assert free["ceiling_bytes_per_s"] is None and free["confidence"] == "none", free
    p = call_cli("readers", "--db", db)
    assert p.returncode == 0 and f"{seen['ceiling_bytes_per_s'] / MB:.3g} MB/s" in p.stdout, p.stdout

    with open_store(db) as store:
        stored = {r.card.name: r for r in store.results()}
        for reader_name in (CEILING_READER, FREE_READER):
            row = rows[reader_name]
            ceiling = row["ceiling_bytes_per_s"]
            print(f"{reader_name}: ceiling {'-' if ceiling is None else f'{ceiling / MB:.3f} MB/s'} "
                  f"({row['confidence']}): {row['evidence']}")
        for name, read, write, _label, _ in CEILING_CARDS + FREE_CARDS:
            r = stored[name]
            rd, wr = r.test("cold_read").median_bytes_per_s / MB, r.test("seq_write").median_bytes_per_s / MB
            print(f"  {name:7} set read {read:4} write {write:3} MB/s | measured read {rd:7.3f} write {wr:7.3f}"
                  f" | {'READER-LIMITED' if r.test('cold_read').limited_by else 'not marked':14} | "
                  + ", ".join(f"{c['name']} {c['direction']} {c['verdict']}" for c in r.claims))
        assert sorted(stored) == sorted(c[0] for c in CEILING_CARDS + FREE_CARDS)
        for name, read, _write, _label, _ in CEILING_CARDS:
            r = stored[name]
            v = _verdicts(r)
            assert r.test("seq_write").limited_by is None, name              # writes differ: not the reader's
            if read * MB > C:
                assert "limited by the reader" in (r.test("cold_read").limited_by or ""), name
                assert "the card may be faster" in r.test("cold_read").limited_by
                assert r.test("cold_read").median_bytes_per_s == pytest.approx(C, rel=0.03)
                assert v[("150X", "read")] == "inconclusive", (name, r.claims)  # above C
                assert v[("100X", "read")] == "meets" and v[("C6", "write")] == "meets", name
                assert v[("150X", "write")] == "fails", name                  # a write flag: measured, not limited
                reason = next(c["reason"] for c in r.claims if c["name"] == "150X" and c["direction"] == "read")
                assert "cannot show it" in reason and CEILING_READER in reason
            else:
                assert r.test("cold_read").limited_by is None, name
                assert v[("60X", "read")] == ("meets" if read * MB > 9 * MB else "fails"), name
        for name, read, _write, _label, _ in FREE_CARDS:
            r = stored[name]
            assert all(t.limited_by is None for t in r.tests), name
            assert _verdicts(r)[("250X", "read")] == ("meets" if read * MB > 37.5 * MB else "fails"), name
        for reader_name in (CEILING_READER, FREE_READER):                   # the marks are settled
            assert rejudge_reader(store, Reader(name=reader_name).identity()) == []
