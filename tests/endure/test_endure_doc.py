"""The endurance document from a host state (no device): the answer in words (the issue's two
examples), milestones, totals, the rated comparison, the read slowdown, and a round in 80 columns."""

from __future__ import annotations

from cardbench.endure.doc import build_doc, round_line
from cardbench.kinds.endurance import problem

CAP = 32_000_000_000


def _round(n: int, bad: dict[str, int] | None = None, read: float = 90e6) -> dict:
    bad = {"erased": 0, "stale": 0, "misplaced": 0, "foreign": 0, "corrupt": 0, "unreadable": 0, **(bad or {})}
    total = sum(bad.values())
    return {"round": n, "write_bytes_per_s": 40e6, "read_bytes_per_s": read, "write_seconds": CAP / 40e6,
            "read_seconds": CAP / read, "bytes_written": CAP, "bad_sectors": bad, "bad_total": total,
            "bad_fraction": total / (CAP // 512), "ended_at": "2026-12-03T18:00:00+00:00", "slices_redone": 0}


def _state(done: list[dict], ended: str | None, **options) -> dict:
    return {"schema": "cardbench.endure-state/1", "card_uuid": "ab" * 16, "record_id": "r1", "device": "/dev/sdb",
            "capacity_bytes": CAP, "started_t": 1_780_000_000.0,
            "options": {"rounds": None, "hours": None, "until_bad": 0.5, "slices": 16, "request_bytes": 1 << 20,
                        "rated_tbw": None, "rated_video": None, **options},
            "card": {"brand": "SanDisk", "name": None, "capacity_bytes": CAP, "identity": "x"}, "reader": None,
            "method": {"engine": "queued (io_uring)"}, "rounds": done, "current": None, "active_seconds": 1.0,
            "ended": ended, "error": None}


def test_no_error_in_words():
    rounds = [_round(n, read=90e6 if n == 1 else 79.2e6) for n in range(1, 1205)]
    doc = build_doc(_state(rounds, "rounds", rounds=1204))
    assert doc["answer"] == "SanDisk 32 GB: 1,204 full writes (38.5 TB) with no error; reads slowed 12% since round 1"
    assert doc["verdict"] == "no error" and doc["complete"] and doc["milestones"] == []
    assert doc["full_writes"] == 1204.0 and doc["read_slowdown"] == 0.12
    assert problem(doc) is None


def test_first_error_and_a_milestone_in_words():
    sectors = CAP // 512
    rounds = [_round(n) for n in range(1, 291)]
    rounds.append(_round(291, {"stale": 14}))
    rounds += [_round(n, {"stale": int(sectors * 0.005)}) for n in range(292, 340)]
    rounds += [_round(n, {"stale": int(sectors * 0.011), "unreadable": 10}) for n in range(340, 346)]
    doc = build_doc(_state(rounds, "interrupted"))
    assert doc["answer"] == ("SanDisk 32 GB: so far: first error after 291 full writes (9.3 TB): stale data in 14 "
                             "sectors (lost writes); 1% bad after 340")
    assert [(m["what"], m["round"]) for m in doc["milestones"]] == [("first error", 291), ("0.1% bad", 292),
                                                                   ("1% bad", 340)]
    assert doc["milestones"][0]["bytes_written"] == 291 * CAP
    assert doc["first_error_round"] == 291 and doc["verdict"] == "interrupted" and not doc["complete"]
    assert problem(doc) is None


def test_rated():
    doc = build_doc(_state([_round(1), _round(2)], "rounds", rated_tbw=0.32))
    assert doc["rated"] == {"tbw": 0.32, "video_hours": None, "video_mbps": None, "rated_bytes": 320_000_000_000,
                            "used_fraction": 0.2}
    assert doc["answer"].endswith("; 20% of its rating")
    video = build_doc(_state([_round(1)], "rounds", rated_video=[10.0, 8.0]))["rated"]
    assert video["rated_bytes"] == 36_000_000_000 and video["used_fraction"] == round(CAP / 36e9, 6)


def test_a_round_in_80_columns():
    line = round_line(_round(12345, {k: 123_456_789 for k in ("erased", "stale", "misplaced", "foreign")}))
    assert len(line) <= 80 and line.startswith("round 12345: write    40.0 MB/s")
