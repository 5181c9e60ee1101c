"""Does the card meet its label? Cards 5% above and 5% below each threshold of the X, C, U, V
and A classes: every verdict right, every margin (measured / required - 1, as judged and as
printed) within 3% of the set one.

Two layers (verdicts are pure functions of a result):

* every scenario judged on a synthetic :class:`Result` built at the set figures, the tests a run
  makes for that label (seq_write, cold_read, and the app set for an A label), with a little
  run-to-run spread: ``check_result`` as the runner calls it, then the table as printed
  (milliseconds each: this is where the threshold logic is proved);
* a few end-to-end points on an emulated card (ext4 on a paced loop device, its rates set live
  between runs), through ``run_directory`` and the command line: they prove the emulator, the
  measurement and the verdicts agree (A1 through the emulator's per-request latency and the
  10 MB/s line, C6/V6, and U3/V30/133X either side printed by ``cardbench run``).

Thresholds: 4X (0.6 MB/s read) and 133X (19.95 MB/s read); C6/V6 (6 MB/s), C10/U1/V10 (10 MB/s),
U3/V30 (30 MB/s), V60, V90 (sequential write); A1 and A2 (4 KiB random read/write IOPS 1500/500
and 4000/2000, plus the 10 MB/s sustained write, judged on seq_write).

A2's random-IOPS shortfall is ``inconclusive`` on a host not known to queue commands (the class
relies on the host's command queuing and cache [S15][S22]); with ``target["command_queuing"]``
set, the same figures judge ``fails``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

import pytest

from cardbench.progress import NullProgress
from cardbench.report import render_result
from cardbench.result import Card, Result, Run, TestResult
from cardbench.runner import RunOptions, run_directory
from cardbench.target import DirTarget
from cardbench.units import MB, MiB
from cardbench.verdicts import INDICATIVE_NOTE, check_result, judge, parse_label
from realparts import ROOT, call_cli, emulators_under
from verdict_emulation import (
    PhaseSettings,
    collapsed,
    iops_settings,
    margin_close,
    printed_claims,
)

_EMULATED_MARKS = [pytest.mark.skipif(not ROOT or not os.path.exists("/dev/fuse"), reason="needs root and FUSE"),
                   pytest.mark.needs_root, pytest.mark.slow, pytest.mark.timing]


def emulated(test):
    """An end-to-end point on the emulated card (the rest are judged on synthetic results only)."""
    for mark in _EMULATED_MARKS:
        test = mark(test)
    return test

#: a set margin this close to 0 is a threshold case (+-5%): its measured margin is checked to 3%
NEAR = 0.10
#: the random-I/O test area is filled at this speed (not part of any judged figure)
FILL = {"latency": 0.0, "write_rate": 200 * MB, "read_rate": 200 * MB}
#: the CLI scenarios' reader (named, so the run is re-judged against its stored results)
CLI_READER = "label-verdicts-reader"


@dataclass(frozen=True)
class Scenario:
    id: str
    label: str
    write: float                              # MB/s, set (sequential)
    read: float                               # MB/s, set (sequential)
    size: int                                 # bytes per test file
    iops: tuple[float, float] | None = None   # 4 KiB random read / write IOPS, set
    runs: int = 3
    duration: float = 0.7                     # seconds per run of a random-I/O test

    def set_value(self, direction: str) -> float:
        if direction == "read":
            return self.read * MB
        if direction in ("write", "sustained write"):
            return self.write * MB
        assert self.iops is not None, f"{self.id}: a {direction} check without set IOPS"
        return self.iops[0] if direction == "random read" else self.iops[1]


LIBRARY = [
    Scenario("x4_above", "4X", write=6.0, read=0.63, size=1 * MiB),
    Scenario("x4_below", "4X", write=6.0, read=0.57, size=1 * MiB),
    Scenario("c6_v6_above", "C6 V6", write=6.3, read=40, size=4 * MiB),
    Scenario("c6_v6_below", "C6 V6", write=5.7, read=40, size=4 * MiB),
    Scenario("v60_above", "V60", write=63, read=60, size=32 * MiB),
    Scenario("v60_below", "V60", write=57, read=60, size=32 * MiB),
    Scenario("v90_above", "V90", write=94.5, read=60, size=48 * MiB),
    Scenario("v90_below", "V90", write=85.5, read=60, size=48 * MiB),
    # C10/U1/V10 and A1's sustained write share the 10 MB/s line; 133X is far off here (its
    # read meets by 2x, its write flag fails by half)
    Scenario("a1_c10_above", "C10 U1 V10 133X A1", write=10.5, read=40, size=8 * MiB, iops=(1575, 525)),
    Scenario("a1_c10_below", "C10 U1 V10 133X A1", write=9.5, read=40, size=8 * MiB, iops=(1425, 475)),
    Scenario("a2_above", "A2", write=10.5, read=40, size=8 * MiB, iops=(4200, 2100)),
    Scenario("a2_below", "A2", write=9.5, read=40, size=8 * MiB, iops=(3800, 1900)),
]
CLI = [
    Scenario("u3_v30_133x_above", "U3 V30 133X", write=31.5, read=20.95, size=16 * MiB),
    Scenario("u3_v30_133x_below", "U3 V30 133X", write=28.5, read=18.95, size=16 * MiB),
]


@pytest.fixture(scope="module")
def emu_dir(tmp_path_factory):
    """The emulators of this module live here; nothing of them may be left after."""
    with emulators_under(tmp_path_factory.mktemp("label-emu")) as d:
        yield d


@pytest.fixture(scope="module")
def card_fs(emu_dir):
    from cardbench.emulate import CardSpec, EmulatedCard
    spec = CardSpec(size=512 * MiB, write_rate=10 * MB, read_rate=10 * MB, name="labelled")
    with EmulatedCard(spec) as card, card.filesystem("ext4") as mnt:
        yield card, mnt


def expected_verdict(row: dict, set_margin: float) -> str:
    if set_margin >= 0:
        return "meets"
    if row["unit"] == "IOPS" and row["name"] == "A2":
        return "inconclusive"   # no command queuing known on this host: a shortfall proves nothing
    return "fails"


def check_rows(result: Result, sc: Scenario, table: str | None = None) -> tuple[list[tuple], list[str]]:
    """Every claim row of ``result`` judged right with the right margin, as stored and as printed.

    Returns (record, problems): (scenario, claim, direction, set, measured, margin, verdict) rows
    for the record, and what is wrong (empty when all is right)."""
    problems: list[str] = []
    rows = result.claims
    wanted = [(c.name, ch.direction) for c in parse_label(sc.label) for ch in c.checks]
    assert [(r["name"], r["direction"]) for r in rows] == wanted
    printed = printed_claims(table if table is not None else render_result(result, "table"))
    assert [(p[0], p[1]) for p in printed] == [(r["claim"], r["verdict"]) for r in rows]
    record = []
    for row, (_, _, printed_margin) in zip(rows, printed, strict=True):
        what = f"{sc.id}: {row['name']} {row['direction']} ({row['test']}): {row['reason']}"
        set_value = sc.set_value(row["direction"])
        set_margin = set_value / row["required"] - 1
        assert row["note"] == INDICATIVE_NOTE
        assert row["margin"] is not None and printed_margin is not None, what
        if row["verdict"] != expected_verdict(row, set_margin):
            problems.append(f"{what}: expected {expected_verdict(row, set_margin)}")
        if abs(set_margin) <= NEAR:
            if not margin_close(row["margin"], set_margin):
                problems.append(f"{what}: margin {row['margin']:+.4f}, set {set_margin:+.4f}")
            # printed to 0.1%: allow the rounding
            if not margin_close(printed_margin, set_margin, 0.03 + 0.0005):
                problems.append(f"{what}: printed margin {printed_margin:+.4f}, set {set_margin:+.4f}")
        elif (row["margin"] > 0) != (set_margin > 0):
            problems.append(f"{what}: margin {row['margin']:+.4f} on the wrong side, set {set_margin:+.4f}")
        if row["verdict"] == "inconclusive" and "command queuing" not in row["reason"]:
            problems.append(f"{what}: inconclusive for another reason than command queuing")
        record.append((sc.id, row["claim"], row["direction"], set_value, row["measured"], row["margin"],
                       row["verdict"]))
    return record, problems


def disturbed_runs(result: Result, sc: Scenario) -> list[str]:
    """Timed runs of a judged test more than 3% off the set figure, in threshold cases: the
    machine (shared, loaded) disturbed the emulator, so the measurement, not the verdict, is off."""
    off = []
    for row in result.claims:
        set_value = sc.set_value(row["direction"])
        if abs(set_value / row["required"] - 1) > NEAR:
            continue
        test = result.test(row["test"])
        values = test.iops_values() if row["unit"] == "IOPS" else test.rates()
        off += [f"{test.name} run {i + 1}: {v / set_value - 1:+.1%}" for i, v in enumerate(values)
                if abs(v / set_value - 1) > 0.03]
    return sorted(set(off))


#: a scenario whose runs the machine disturbed (see disturbed_runs) is measured again, at most
#: this many times in all; a wrong verdict on undisturbed runs fails at once
ATTEMPTS = 4


def skip_if_the_machine_never_kept_up(sc: Scenario, every_attempt: list[list[str]]) -> None:
    """Every attempt disturbed, and every disturbed run *below* the set figure: this machine could
    not pace the emulator at the set rate (seen once in CI: 4,200 IOPS at QD32 came out 3-16% low
    in four attempts in a row). That says nothing of cardbench's verdicts, so the case is skipped,
    saying so; a disturbed run above the set figure, or any undisturbed wrong verdict, still fails."""
    runs = [d for attempt in every_attempt for d in attempt]
    if len(every_attempt) == ATTEMPTS and all(every_attempt) and all(": -" in d for d in runs):
        pytest.skip(f"{sc.id}: this machine never reached the set rate in {ATTEMPTS} attempts "
                    f"({'; '.join(runs[:6])}{' ...' if len(runs) > 6 else ''})")


def report(record: list[tuple]) -> None:
    for sid, claim, direction, set_value, measured, margin, verdict in record:
        unit, scale = ("IOPS", 1) if "random" in direction else ("MB/s", MB)
        print(f"{sid:20} {claim:5} {direction:16} set {set_value / scale:9.3f} measured {measured / scale:9.3f} "
              f"{unit:4} margin {margin:+7.2%} {verdict}")


#: run-to-run spread of the synthetic results: the middle run at the set figure, one 1% under and
#: one 1% over (as a quiet emulated card measures; the margins are judged on the median)
SPREAD = (0.99, 1.0, 1.01)
APP_TESTS = ("rand_read_4k_q1t1", "rand_write_4k_q1t1", "rand_read_4k_q32t1", "rand_write_4k_q32t1")


def synthetic_result(sc: Scenario) -> Result:
    """What ``run_directory`` returns for ``sc`` on a card that does exactly the set figures:
    seq_write and cold_read at the set rates (sc.runs runs of sc.size bytes), and for an A label
    the app set at the set IOPS (4 KiB, sc.duration seconds a run); judged by check_result, as
    the runner judges it."""
    def seq(name: str, rate: float) -> TestResult:
        return TestResult(name=name, method={}, runs=[Run(bytes=sc.size, seconds=sc.size / (rate * f))
                                                      for f in SPREAD[:sc.runs]])

    def rand(name: str, iops: float) -> TestResult:
        runs = []
        for f in SPREAD[:sc.runs]:
            ops = round(iops * f * sc.duration)
            runs.append(Run(bytes=ops * 4096, seconds=sc.duration, ops=ops))
        return TestResult(name=name, method={"block_size": 4096}, runs=runs)

    tests = [seq("seq_write", sc.write * MB), seq("cold_read", sc.read * MB)]
    if sc.iops:
        tests += [rand(n, sc.iops[0] if "_read_" in n else sc.iops[1]) for n in APP_TESTS]
    result = Result(target={"kind": "directory"}, card=Card(name=sc.id, label=sc.label), tests=tests)
    check_result(result)
    return result


@pytest.mark.parametrize("sc", LIBRARY + CLI, ids=[s.id for s in LIBRARY + CLI])
def test_label_thresholds_judged(sc):
    """Every scenario, judged on a synthetic result at the set figures: the threshold logic
    (verdicts, margins as judged and as printed, the A2 queuing rule) without real time."""
    result = synthetic_result(sc)
    assert not result.warnings, result.warnings
    record, problems = check_rows(result, sc)
    assert not problems, "\n".join(problems)
    # the set figures, not a neighbourhood of them: the judged margin is the set margin
    for _sid, claim, direction, set_value, measured, _margin, _verdict in record:
        assert measured == pytest.approx(set_value, rel=5e-3), (claim, direction)   # whole ops
    report(record)
    if sc.label == "A2":
        check_a2_with_command_queuing(result, sc)


def check_a2_with_command_queuing(result: Result, sc: Scenario) -> None:
    """The same figures on a host known to queue commands: a shortfall is the card's."""
    result.target["command_queuing"] = True
    queued = {r["direction"]: r["verdict"] for r in judge(result, parse_label("A2"))}
    want = "meets" if sc.iops[1] > 2000 else "fails"
    assert queued == {"random read": want, "random write": want, "sustained write": want}


#: the scenarios also run end to end on the emulated card: A1 with C10/U1/V10/133X (random IOPS
#: through the per-request latency, the 10 MB/s line, the app set added by the label) and C6/V6
#: (the 6 MB/s line, met); the command line adds U3/V30/133X either side. Every other scenario
#: is judged on synthetic results above (V60 alone took 5-17 s here: 32 MiB a run, 3 runs)
EMULATED = ["a1_c10_below", "c6_v6_above"]


@pytest.mark.parametrize("sc", [s for s in LIBRARY if s.id in EMULATED], ids=lambda s: s.id)
@emulated
def test_label_thresholds(card_fs, sc):
    card, mnt = card_fs
    seq = {"latency": 0.0, "write_rate": sc.write * MB, "read_rate": sc.read * MB}
    if sc.iops:
        progress = PhaseSettings(card, {"preparing": FILL, "rand_": iops_settings(*sc.iops)}, default=seq)
    else:
        card.set(**seq)
        progress = NullProgress()
    every_attempt: list[list[str]] = []
    for attempt in range(1, ATTEMPTS + 1):
        result = run_directory(DirTarget.open(mnt), RunOptions(size=sc.size, runs=sc.runs, warmup=0, card=Card(name=sc.id), label=sc.label,
                                               area=16 * MiB, duration=sc.duration, progress=progress))
        assert result.complete and not result.error
        if sc.iops:
            assert any(d.startswith("rand_read_4k_q32t1") for d in progress.seen), "the A label added the app tests"
        assert not [t.limited_by for t in result.tests if t.limited_by], "no reader: nothing is reader-limited"
        record, problems = check_rows(result, sc)
        disturbed = disturbed_runs(result, sc)
        if not problems:
            break
        assert disturbed, "wrong on undisturbed runs:\n" + "\n".join(problems)
        every_attempt.append(disturbed)
        print(f"{sc.id}: attempt {attempt} disturbed ({', '.join(disturbed)}): " + "; ".join(problems))
    if problems:
        skip_if_the_machine_never_kept_up(sc, every_attempt)
    assert not problems, "\n".join(problems)
    report(record)
    if sc.label == "A2":
        check_a2_with_command_queuing(result, sc)


@emulated
def test_label_thresholds_from_the_command_line(card_fs, tmp_path):
    """`cardbench run DIR --label ... --verbose`: the table says once that the verdicts are
    indicative (a USB reader cannot reproduce the SD bus test conditions) and prints the margins,
    and the answer at the end says it once in short; the JSON
    claims list has claim, test, measured, required and verdict."""
    from cardbench.store import open_store
    card, mnt = card_fs
    db = str(tmp_path / "results.sqlite3")
    record = []
    for sc, fmt in zip(CLI, ("json", "table"), strict=True):
        for attempt in range(1, ATTEMPTS + 1):
            card.set(latency=0.0, write_rate=sc.write * MB, read_rate=sc.read * MB)
            p = call_cli("run", mnt, "--size", f"{sc.size // MiB}MiB", "--runs", str(sc.runs), "--warmup", "0",
                         "--label", sc.label, "--name", sc.id, "--reader", CLI_READER, "--db", db, "--format", fmt,
                         "--verbose", timeout=120)
            assert p.returncode == 0, p.stderr
            if fmt == "json":
                doc = json.loads(p.stdout)
                for claim in doc["claims"]:
                    assert {"claim", "test", "measured", "required", "verdict", "margin"} <= set(claim)
                result, table = Result.from_dict(doc), None
            else:
                text = collapsed(p.stdout)
                # --verbose: the claim rows and the whole note once, then the answer with its short form
                assert text.count("a host behind a USB reader cannot reproduce the SD bus test conditions") == 1
                assert "Label verdicts are indicative, not compliance: a host behind a USB reader" in text
                assert text.rstrip().endswith("Label verdicts are indicative, not compliance: a USB reader cannot "
                                              "reproduce the SD bus test conditions."), p.stdout
                run_id = re.search(r"^Run ([0-9a-f]{32}) ", p.stdout, re.M).group(1)
                with open_store(db) as store:
                    result, table = store.get(run_id), p.stdout   # as stored, as printed
                assert result.reader.name == CLI_READER and result.card.label == sc.label
            rows, problems = check_rows(result, sc, table)
            disturbed = disturbed_runs(result, sc)
            if not problems:
                break
            assert disturbed, "wrong on undisturbed runs:\n" + "\n".join(problems)
            print(f"{sc.id}: attempt {attempt} disturbed ({', '.join(disturbed)}): " + "; ".join(problems))
        assert not problems, "\n".join(problems)
        record += rows
    report(record)
