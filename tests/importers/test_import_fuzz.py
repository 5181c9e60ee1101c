"""Bad input, generated, per importer and per record kind (issue 30, "Bad input").

Each test reads 2,000 files made from real outputs (tests/importers/data): a number replaced by
one that is not ("10.044.47", "1e400", "nan", a count beyond 64 bits), a line dropped, doubled or
cut, a JSON value swapped for one of another type (NaN, Infinity, 2**64, a list where an object
was). Every case is read by the library's own import (``import_text``) and stored in a real
SQLite file as ``cardbench import`` stores it (``record``; an export: ``import_records``), and
is judged:

* read and stored, or refused with a CardbenchError of one line naming the file;
* never another exception (the CLI's "internal error");
* nothing stored when refused (the rows of every table counted before and after).

In-process (about a millisecond a case); ``derandomize``: the same cases on every run.
"""

from __future__ import annotations

import json
import math
import random
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardbench.errors import CardbenchError
from cardbench.importers import import_text
from cardbench.record import record
from cardbench.store import export
from cardbench.store.core import open_store
from cardbench_factories import make_result

EXAMPLES = 2000
FUZZ = dict(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                   HealthCheck.data_too_large, HealthCheck.filter_too_much])
DATA = Path(__file__).resolve().parent / "data"
PEERS = DATA / "peers"
PATH = "fuzz-case.txt"       # the file name every refusal must name

HDPARM = ("\n/dev/sdb:\n Timing cached reads:   11944 MB in  1.99 seconds = 6001.87 MB/sec\n"
          " Timing buffered disk reads:  60 MB in  3.05 seconds =  19.67 MB/sec\n"
          " Timing O_DIRECT disk reads:  62 MB in  3.02 seconds =  20.53 MB/sec\n")
F3 = ("F3 write 8.0\nFree space: 31.88 MB\nCreating file 1.h2w ... OK!\nFree space: 0.00 Byte\n"
      "Average writing speed: 12.34 MB/s\n"
      "F3 read 8.0\n                  SECTORS      ok/corrupted/changed/overwritten\n"
      "Validating file 1.h2w ...    65280/        0/      0/      0\n"
      "\n  Data OK: 31.88 MB (65280 sectors)\nData LOST: 0.00 Byte (0 sectors)\n"
      "\t       Corrupted: 0.00 Byte (0 sectors)\n\tSlightly changed: 0.00 Byte (0 sectors)\n"
      "\t     Overwritten: 0.00 Byte (0 sectors)\nAverage reading speed: 20.00 MB/s\n")


def _texts(*paths: Path) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in paths]


#: per importer: its seeds (real or documented outputs) and the formats a case may be forced to
IMPORTERS = {
    "fio-json": (_texts(*sorted((PEERS / "fio_real").glob("*.json")), PEERS / "fio_2.18_randread.json",
                        DATA / "fio_card.json"), ["fio"]),
    "fio-normal": (_texts(*sorted((PEERS / "fio_real").glob("*.normal.txt"))), ["fio-normal"]),
    "fio-terse": (_texts(*sorted((PEERS / "fio_real").glob("*.terse.txt"))), ["fio-terse"]),
    "hdparm-dd": (_texts(PEERS / "dd_busybox_1.37.txt", PEERS / "dd_coreutils.txt") + [HDPARM], ["hdparm", "dd"]),
    "f3-h2testw": (_texts(PEERS / "f3probe_8.0_limbo.txt", PEERS / "h2testw_1.4_fake.txt",
                          PEERS / "h2testw_1.4_ok.txt") + [F3], ["f3", "f3probe", "h2testw"]),
    "diskmark": (_texts(*sorted(PEERS.glob("kdiskmark_*.txt")), *sorted(PEERS.glob("crystaldiskmark_*.txt"))),
                 ["kdiskmark", "crystaldiskmark"]),
    "classic": (_texts(DATA / "drawer_classic.txt", PEERS / "classic_2006.txt"), ["table"]),
    "legacy-csv": (_texts(DATA / "drawer_legacy.csv"), ["csv"]),
}

#: numbers that are not the number their field needs, and some that are, at the edges
BAD_NUMBERS = ["10.044.47", "1..2", ".", ",", "1e400", "1e-400", "1e5", "nan", "NaN", "inf", "-inf", "-1", "-0",
               "+5", "99999999999999999999999", "18446744073709551616", "9223372036854775808", "0x1F", "1_000",
               "\u0661\u0662", "\u00bd", "", " ", "1,5", "1,234,567", "1.2.3.4", "0", "00000", "0.000", "12k",
               "3M", "4096KiB", "5%", "1/2", "- 3", "7.", ".7", "1e", "\u221e", "12 34"]
#: JSON values of every type and edge: non-finite, beyond 64 bits, of another shape
BAD_JSON = [float("nan"), float("inf"), -float("inf"), 2**64, 2**63, -(2**63) - 1, 10**30, 1e308, 5e-324, -1, 0,
            1.5, "", "x", "12", "NaN", "1e400", [], {}, [1, 2], [[0, 1]], {"a": 1}, {"identity": 5}, None, True,
            False, [{}], [None], {"devices": 3}]
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")


def mutate_text(text: str, rnd: random.Random, junk: str) -> str:
    """1 to 4 changes: a number replaced (most often), junk put in, a line dropped or doubled,
    the text cut short."""
    for _ in range(rnd.randint(1, 4)):
        op = rnd.random()
        numbers = list(_NUMBER_RE.finditer(text))
        if op < 0.55 and numbers:
            m = rnd.choice(numbers)
            new = rnd.choice(BAD_NUMBERS) if rnd.random() < 0.8 else junk
            text = text[:m.start()] + new + text[m.end():]
        elif op < 0.7:
            pos = rnd.randrange(len(text) + 1)
            text = text[:pos] + junk + text[pos:]
        elif op < 0.85:
            lines = text.splitlines()
            if lines:
                i = rnd.randrange(len(lines))
                if rnd.random() < 0.5:
                    del lines[i]
                else:
                    lines.insert(i, lines[i])
                text = "\n".join(lines) + "\n"
        else:
            text = text[:rnd.randrange(len(text) + 1)]
    return text


def _nodes(doc) -> list[tuple[object, object]]:
    """(parent, key) of every value in a JSON document."""
    out, todo = [], [doc]
    while todo:
        n = todo.pop()
        items = n.items() if isinstance(n, dict) else enumerate(n) if isinstance(n, list) else ()
        for k, v in items:
            out.append((n, k))
            todo.append(v)
    return out


def mutate_json(doc, rnd: random.Random, junk, within=None):
    """1 to 4 values anywhere in ``doc`` (or under the nodes ``within``) replaced by one of
    another type or edge, or dropped."""
    targets = [t for root in (within if within is not None else [doc]) for t in _nodes(root)]
    for _ in range(rnd.randint(1, 4)):
        if not targets:
            break
        parent, key = rnd.choice(targets)
        try:
            if rnd.random() < 0.2 and isinstance(parent, dict):
                del parent[key]
            else:
                parent[key] = rnd.choice(BAD_JSON) if rnd.random() < 0.7 else junk
        except (KeyError, IndexError):
            pass
    return doc


_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
#: a generated value (a leaf most often: a recursive strategy drawn every case cost half the time)
_JUNK_JSON = _LEAF | st.lists(_LEAF, max_size=3) | st.dictionaries(st.text(max_size=6), _LEAF, max_size=3)


# -- judging one case ---------------------------------------------------------------------------------------------

_READERS: dict[Path, tuple[sqlite3.Connection, list[str], str]] = {}


def stored(db: Path) -> dict[str, int]:
    """The rows of every table of the store (nothing when it does not exist yet), read on a
    connection of its own kept open per file (opening one and listing the tables took 3 ms a case)."""
    if not db.exists():
        return {}
    if db not in _READERS:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        query = "SELECT " + ", ".join(f'(SELECT count(*) FROM "{n}")' for n in names)
        _READERS[db] = (con, names, query)
    con, names, query = _READERS[db]
    return dict(zip(names, con.execute(query).fetchone(), strict=True))


def judge(text: str, fmt: str | None, db: Path, outcomes: dict[str, int], *, store=None) -> None:
    """Import ``text`` as ``cardbench import`` does, into ``db``: stored, or refused in one line
    naming the file with nothing stored. Any other exception fails the test.

    An export is stored as the command stores it (``import_records``); the records of another
    tool's file by ``store.save_all`` in ``store`` when given (one transaction, a store opened
    once per test: ``record()`` opens one per call and judges the readers again, three times
    the time of a case), else by ``record()`` as the command does."""
    before = stored(db)
    try:
        report = import_text(text, path=PATH, fmt=fmt)
        report.lines()
        report.to_dict()
        if report.export is not None:
            export.import_records(report.export, db, path=PATH)
        elif store is not None:
            store.save_all([*report.results, *report.verify_docs])
        else:
            rec = record([*report.results, *report.verify_docs], db)
            assert rec.stored and not rec.error, rec.error
    except CardbenchError as e:
        message = str(e)
        assert message.strip() and "\n" not in message, repr(message)
        assert PATH in message, f"the refusal does not name the file: {message}"
        assert stored(db) == before, f"refused ({message}) but something was stored"
        outcomes["refused"] = outcomes.get("refused", 0) + 1
        return
    outcomes["imported"] = outcomes.get("imported", 0) + 1


@pytest.fixture(scope="module")
def outcomes():
    """What the cases of each test came to (printed at the end of the module with -s)."""
    seen: dict[str, dict[str, int]] = {}
    yield seen
    for name, counts in seen.items():
        print(f"{name}: {counts}")


@pytest.fixture(scope="module")
def stores():
    """The store of each test, opened once (closed at the end of the module)."""
    opened: dict[Path, object] = {}
    yield opened
    for s in opened.values():
        s.close()


@pytest.fixture(scope="module", autouse=True)
def _close_readers():
    yield
    for con, _names, _query in _READERS.values():
        con.close()
    _READERS.clear()


# -- per importer -------------------------------------------------------------------------------------------------

@st.composite
def text_case(draw, importer: str) -> tuple[str, str | None]:
    seeds, formats = IMPORTERS[importer]
    seed = draw(st.sampled_from(seeds))
    rnd = random.Random(draw(st.integers(0, 2**32)))
    junk = draw(st.text(max_size=12))
    fmt = draw(st.sampled_from([None, *formats]))
    if seed.lstrip().startswith("{") and rnd.random() < 0.7:
        doc = mutate_json(json.loads(seed), rnd, draw(_JUNK_JSON))
        return json.dumps(doc, allow_nan=True), fmt
    return mutate_text(seed, rnd, junk), fmt


def _importer_test(importer: str):
    @pytest.mark.slow
    @settings(**FUZZ)
    @given(case=text_case(importer))
    def test(case, tmp_path_factory, outcomes, stores):
        db = _db(tmp_path_factory, importer)
        if db not in stores:
            stores[db] = open_store(db)
        judge(case[0], case[1], db, outcomes.setdefault(importer, {}), store=stores[db])
    test.__name__ = f"test_{importer.replace('-', '_')}_import_never_crashes"
    test.__doc__ = f"{EXAMPLES} generated {importer} files: stored, or refused in one line naming the file."
    return test


_DBS: dict[str, Path] = {}


def _db(factory, name: str) -> Path:
    """One real SQLite file per test."""
    if name not in _DBS:
        _DBS[name] = factory.mktemp(f"fuzz-{name}") / "store.sqlite3"
    return _DBS[name]


test_fio_json_import_never_crashes = _importer_test("fio-json")
test_fio_normal_import_never_crashes = _importer_test("fio-normal")
test_fio_terse_import_never_crashes = _importer_test("fio-terse")
test_hdparm_dd_import_never_crashes = _importer_test("hdparm-dd")
test_f3_h2testw_import_never_crashes = _importer_test("f3-h2testw")
test_diskmark_import_never_crashes = _importer_test("diskmark")
test_classic_import_never_crashes = _importer_test("classic")
test_legacy_csv_import_never_crashes = _importer_test("legacy-csv")


# -- per record kind, as they come through `cardbench import` of an export ---------------------------------------

CARD_A = {"brand": "Lexar", "capacity_bytes": 48_000_000, "label": "4X", "serial": "A-1"}
CARD_B = {"brand": "SanDisk", "capacity_bytes": 8_000_000_000, "label": "Ultra", "serial": "B-2", "name": "blue one"}
READER = {"name": "quad reader", "vendor_id": "05e3", "product_id": "0749", "serial": "Q1"}
HOST = {"hostname": "fuzz-host", "kernel": "0.0.0-fuzz", "machine": "x86_64", "python": "3.11.0"}


@pytest.fixture(scope="module")
def seed_export(tmp_path_factory) -> dict:
    """A real export of every kind of record: results (with curves), verify documents, a probe
    and a session, as `cardbench export` writes them."""
    db = tmp_path_factory.mktemp("fuzz-seed") / "seed.sqlite3"
    with open_store(db) as st_:
        st_.save_all([
            make_result(id="r1", host=dict(HOST), serial="S-1", curves=True, warnings=("cache suspected",)),
            make_result(id="r2", host=dict(HOST), brand="Kingston", name="named", complete=False,
                        claims=[{"label": "4X", "test": "cold_read", "verdict": "holds"}]),
            {"schema": "cardbench.verify/1", "id": "v1", "verdict": "counterfeit", "kind": "dropped", "mode": "full",
             "card": CARD_A, "reader": READER, "announced_bytes": 48_000_000, "usable_bytes": 16_000_000,
             "bad_ranges": [[16_000_000, 48_000_000]], "complete": True, "timings": {"write_s": 3.5},
             "started_at": "2024-02-01T09:00:00+00:00", "finished_at": "2024-02-01T09:30:00+00:00"},
            {"schema": "cardbench.probe/1", "id": "p1", "reader": READER, "created_at": "2024-03-01T11:00:00+00:00",
             "finding": {"confidence": "high", "shared": True},
             "measured": {"alone_sum_bytes_per_s": 40e6, "alone_max_bytes_per_s": 20e6,
                          "together_bytes_per_s": 21e6, "together_seconds": 2.0,
                          "devices": [{"device": f"/dev/sd{chr(98 + k)}", "card": c, "alone_bytes_per_s": 20e6,
                                       "together_bytes_per_s": 10.5e6, "sample_bytes": 8_000_000}
                                      for k, c in enumerate((CARD_A, CARD_B))]}},
            {"schema": "cardbench.session/1", "id": "s1", "started_at": "2024-04-01T08:00:00+00:00",
             "finished_at": None, "probes": ["p1"],
             "reader_verdict": [{"name": "quad reader", "ceiling_bytes_per_s": 20e6, "cards": 2,
                                 "cards_at_ceiling": 1, "direction": "read", "confidence": "high"}],
             "cards": [{"card": c, "reader": READER, "device": "/dev/sdb", "result_id": f"r{k + 1}"}
                       for k, c in enumerate((CARD_B, CARD_A))] + [{"note": "empty slot"}]},
        ])
        doc = export.collect(st_)
    assert [len(doc[k]) for k in ("results", "verify", "probes", "sessions")] == [2, 1, 1, 1]
    return doc


SECTION = {"cardbench.result/1": "results", "cardbench.verify/1": "verify", "cardbench.probe/1": "probes",
           "cardbench.session/1": "sessions"}
_COUNTER = iter(range(10**9))


@st.composite
def export_case(draw, base: dict, schema: str) -> tuple[str, str | None]:
    doc = json.loads(json.dumps(base))
    n = next(_COUNTER)
    for key in ("results", "verify", "probes", "sessions"):      # new ids: each case can be stored
        for d in doc[key]:
            d["id"] = f"{d['id']}-{n}"
    rnd = random.Random(draw(st.integers(0, 2**32)))
    docs = doc[SECTION[schema]]
    how = rnd.random()
    if how < 0.15:                       # one document alone, as `verify --json` prints one
        one = rnd.choice(docs)
        doc = mutate_json(one, rnd, draw(_JUNK_JSON))
    else:
        mutate_json(doc, rnd, draw(_JUNK_JSON), within=docs)
        if how > 0.9:                    # and the export's frame too
            mutate_json(doc, rnd, draw(_JUNK_JSON), within=[{"cards": doc.get("cards")}])
    text = json.dumps(doc, allow_nan=True)
    if rnd.random() < 0.1:               # a number of its text replaced (the JSON may no longer parse)
        text = mutate_text(text, rnd, draw(st.text(max_size=6)))
    return text, draw(st.sampled_from([None, "cardbench"]))


def _kind_test(schema: str):
    name = schema.split(".")[1].split("/")[0]

    @pytest.mark.slow
    @settings(**FUZZ)
    @given(data=st.data())
    def test(data, seed_export, tmp_path_factory, outcomes):
        text, fmt = data.draw(export_case(seed_export, schema))
        judge(text, fmt, _db(tmp_path_factory, f"export-{name}"), outcomes.setdefault(schema, {}))
    test.__name__ = f"test_exported_{name}_documents_never_crash"
    test.__doc__ = f"{EXAMPLES} exports with a {schema} document damaged: stored, or refused in one line."
    return test


test_exported_result_documents_never_crash = _kind_test("cardbench.result/1")
test_exported_verify_documents_never_crash = _kind_test("cardbench.verify/1")
test_exported_probe_documents_never_crash = _kind_test("cardbench.probe/1")
test_exported_session_documents_never_crash = _kind_test("cardbench.session/1")


# -- the cases the fuzzing found, kept ----------------------------------------------------------------------------

FIO_2_NORMAL = (PEERS / "fio_real" / "fio-2.2.10.normal.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("bad, field", [("10.044.47", "lat"), ("1..2", "lat"), ("99999999999999999999", "lat")])
def test_a_number_that_is_not_one_is_refused_naming_file_line_and_field(bad, field, tmp_path):
    """Hypothesis's first find (issue 30): fio 2.x's ``lat (usec): ... avg=10.044.47`` ended in
    "internal error: ValueError: could not convert string to float"."""
    lines = FIO_2_NORMAL.splitlines()
    n, line = next((i, ln) for i, ln in enumerate(lines) if re.match(r"\s+lat \(usec\): min=", ln))
    lines[n] = re.sub(r"avg=\s*[0-9.]+", f"avg={bad}", line)
    db = tmp_path / "store.sqlite3"
    seen: dict[str, int] = {}
    judge("\n".join(lines), None, db, seen)
    assert seen == {"refused": 1}
    with pytest.raises(CardbenchError) as e:
        import_text("\n".join(lines), path=PATH)
    message = str(e.value)
    assert message.startswith(f"{PATH}: line {n + 1}") and f"{field} avg" in message and repr(bad) in message, message
    assert "expected" in message and message.endswith("nothing imported")
    assert stored(db) == {}


@pytest.mark.parametrize("value, said", [(float("nan"), "verify[0].usable_bytes: expected a number, got nan"),
                                         (float("inf"), "got inf (not finite)"),
                                         (2**64, "got 18446744073709551616 (beyond a 64-bit integer)"),
                                         ("12", "'usable_bytes' must be a number"),
                                         ([1], "'usable_bytes' must be a number")])
def test_an_exported_number_of_the_wrong_kind_is_refused_and_nothing_stored(value, said, seed_export, tmp_path):
    doc = json.loads(json.dumps(seed_export))
    doc["verify"][0]["usable_bytes"] = value
    db = tmp_path / "store.sqlite3"
    with pytest.raises(CardbenchError, match=re.escape(said)):
        report = import_text(json.dumps(doc, allow_nan=True), path=PATH)
        export.import_records(report.export, db, path=PATH)
    assert stored(db) == {}
    assert math.isfinite(seed_export["verify"][0]["usable_bytes"])


def test_a_fio_2_io_count_beyond_64_bits_is_refused_naming_its_key():
    """A soak of the generated cases found fio 2.x's io_bytes (KiB) of 1e308: x 1024 it was an
    integer no float holds, and the rate ended in OverflowError."""
    doc = json.loads((PEERS / "fio_real" / "fio-2.18.json").read_text(encoding="utf-8"))
    doc["jobs"][0]["write"]["io_bytes"] = 1e308
    with pytest.raises(CardbenchError, match=r"^fuzz-case.txt: fio JSON: jobs\[0\]\.write\.io_bytes: expected a count "
                                             r"within 64 bits, got .*\(beyond a 64-bit integer\); nothing imported$"):
        import_text(json.dumps(doc), path=PATH)


def test_a_fio_run_of_no_time_is_refused_naming_its_line():
    """A soak found fio 3.x normal output with ``(7176MiB/0msec)``: a division by zero. A run that
    moved bytes in no time has no rate (and an export holding it could not be read back)."""
    text = re.sub(r"/\d+msec\)", "/0msec)", (PEERS / "fio_real" / "fio-3.1.normal.txt").read_text(encoding="utf-8"),
                  count=1)
    with pytest.raises(CardbenchError, match=r"^fuzz-case.txt: line \d+ runtime: expected more than 0 ms for "
                                             r"[\d,]+ bytes moved, got 0; nothing imported$"):
        import_text(text, path=PATH)
