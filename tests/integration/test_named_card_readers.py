"""Issue 30, "a name you gave is your word": the survey author's next step, as he runs it. One
known-fast card (an emulated card of 40 MB/s, ext4) is named by him and run through a reader that
carries 30 MB/s, then, the same card and the same name, through another that carries 12 MB/s:

    cardbench run DIR --name yardstick-1 --reader fast-reader
    cardbench run DIR --name yardstick-1 --reader slow-reader

The card behind a loop device has no serial, CID or ATA serial of its own (as most USB CF readers
pass none): only his name makes the two records one card. `cardbench readers` names the slow
reader's ceiling within 5% of the 12 MB/s set, and says it rests on that name, in the terminal,
its JSON and the HTML report alike.

The emulator's reader is one timeline: the card behind a ceiling C runs at min(card rate, C); the
ceiling is changed live between the runs, as the card goes from one reader to the other.
"""

from __future__ import annotations

import json
import os

import pytest

from cardbench.result import Result
from cardbench.store import open_store
from cardbench.units import MB, MiB
from realparts import ROOT, call_cli
from verdict_emulation import ATTEMPTS, DISTURBED

pytestmark = [pytest.mark.skipif(not ROOT or not os.path.exists("/dev/fuse"), reason="needs root and FUSE"),
              pytest.mark.needs_root, pytest.mark.slow, pytest.mark.timing]

FAST, SLOW = 30 * MB, 12 * MB
NAMED = "yardstick-1, as you named it"


def _run(mnt: str, reader_name: str, rate: float, db: str) -> Result:
    for attempt in range(1, ATTEMPTS + 1):
        p = call_cli("run", mnt, "--size", "16MiB", "--runs", "3", "--warmup", "0", "--name", "yardstick-1",
                     "--reader", reader_name, "--db", db, "--format", "json")
        assert p.returncode == 0, p.stderr
        result = Result.from_dict(json.loads(p.stdout))
        off = (result.test("cold_read").median_bytes_per_s or float("inf")) / rate - 1
        if abs(off) <= DISTURBED:
            return result
        print(f"{reader_name}: attempt {attempt} disturbed (cold_read {off:+.1%}); run again")
        with open_store(db) as store:
            store.delete(result.id)
    pytest.fail(f"{reader_name}: every attempt disturbed")


def test_one_named_card_through_a_fast_and_a_slow_reader(emu_dir, tmp_path):
    from cardbench.emulate import CardSpec, EmulatedReader
    db = str(tmp_path / "results.sqlite3")
    with EmulatedReader(ceiling=FAST) as reader:
        card = reader.add_card(CardSpec(size=128 * MiB, write_rate=40 * MB, read_rate=40 * MB, name="yardstick"))
        with card.filesystem("ext4") as mnt:
            fast = _run(mnt, "fast-reader", FAST, db)
            reader.set_ceiling(SLOW)
            slow = _run(mnt, "slow-reader", SLOW, db)
        card.close()
    # one card by his word only: no identity of its own, one identity by the name he gave
    assert not fast.card.own_identity() and fast.card.identity() == slow.card.identity()
    assert fast.card.identity().startswith("user:") and "yardstick-1" in fast.card.identity()

    p = call_cli("readers", "--db", db, "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    s = rows["slow-reader"]
    assert (s["kind"], s["confidence"], s["direction"]) == ("same_card", "likely", "read"), s["evidence"]
    assert s["ceiling_bytes_per_s"] == pytest.approx(SLOW, rel=0.05), s["evidence"]
    assert s["rests_on"] == [NAMED]
    assert s["evidence"].startswith(f"the same card through two readers: {NAMED}, reads "), s["evidence"]
    assert "through the other reader (fast-reader)" in s["evidence"]
    assert rows["fast-reader"]["ceiling_bytes_per_s"] is None

    p = call_cli("readers", "--db", db)
    assert p.returncode == 0, p.stderr
    ceiling = f"{s['ceiling_bytes_per_s'] / MB:.3g} MB/s"
    assert f"slow-reader: caps reads at {ceiling} (likely, the same card through another reader" in p.stdout
    assert f"it rests on {NAMED}." in p.stdout, p.stdout
    assert f"{NAMED}, reads " in " ".join(p.stdout.split()), p.stdout

    html = tmp_path / "report.html"
    assert call_cli("report", "--db", db, "--html", str(html)).returncode == 0
    assert f"{NAMED}, reads " in html.read_text()
    print(f"slow-reader: {ceiling} named (set {SLOW / MB:g} MB/s); fast-reader cold_read "
          f"{fast.test('cold_read').median_bytes_per_s / MB:.2f} MB/s: {s['evidence']}")
