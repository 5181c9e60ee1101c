"""Bad input, generated (hypothesis): sizes, rates, labels, command lines, import files and
database files. Never a traceback, never an "internal error": each case is accepted or refused
with one line and a documented exit code, as the real ``cardbench.cli.main`` prints it.

The examples add up to more than 10,000 (see ``EXAMPLES``); everything runs in-process (about a
millisecond a command), in a scratch directory, against scratch databases. No generated command
can reach a real card or directory: a test target is always a path that cannot be tested
(missing, a regular file, /dev/null), given after ``--``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import sqlite3
import string
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardbench.cli import cli, main
from cardbench.errors import UsageError
from cardbench.units import UnitError, parse_duration, parse_rate, parse_size
from cardbench.verdicts.labels import parse_label

#: examples per test; the sum is the suite's total of generated cases (>= 10,000)
EXAMPLES = {
    "size": 1500, "rate": 1500, "label": 1500, "duration": 500,
    "cli": 3500, "import": 1200, "db": 500,
}
TOTAL = sum(EXAMPLES.values())
assert TOTAL >= 10_000

FAST = dict(deadline=None, derandomize=False, database=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                   HealthCheck.data_too_large, HealthCheck.filter_too_much])

DATA = Path(__file__).resolve().parent.parent / "importers" / "data"

#: exit codes bad input may end with: ok, bad input, untestable target, refused, store
INPUT_EXITS = {0, 2, 3, 4, 6}


# -- calling the real main() in-process -----------------------------------------------------------------

class Outcome:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err


def call(argv: list[str]) -> Outcome:
    """``cardbench ARGV`` through the real ``main()``: exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    old_term = signal.getsignal(signal.SIGTERM)
    code: int | None = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        signal.signal(signal.SIGTERM, old_term)
    return Outcome(code, out.getvalue(), err.getvalue())


def judged(argv: list[str], allowed: set[int] = INPUT_EXITS) -> Outcome:
    """Call main() and check the user-facing contract; returns the outcome."""
    o = call(argv)
    assert "Traceback" not in o.err and "Traceback" not in o.out, (argv, o.err)
    assert "internal error" not in o.err, (argv, o.err)
    assert o.code in allowed, (argv, o.code, o.err)
    if o.code != 0:
        lines = [ln for ln in o.err.splitlines() if ln.strip()]
        errs = [ln for ln in lines if ln.startswith("cardbench: ")]
        assert len(errs) == 1, (argv, o.err)
        assert "\n" not in errs[0]
    return o


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A scratch working directory (relative paths a case makes land here)."""
    d = tmp_path_factory.mktemp("badinput")
    old = os.getcwd()
    os.chdir(d)
    try:
        yield d
    finally:
        os.chdir(old)


# -- units and labels ----------------------------------------------------------------------------------------------

_UNITS = ["B", "b", "kB", "KB", "k", "K", "MB", "M", "mb", "GB", "G", "TB", "KiB", "MiB", "GiB", "TiB", "Mi",
          "MB/s", "MiB/s", "kB/s", "GB/s", "x", "X", "\u00d7", "s", "ms", "us", "min", "h", "", " ", "/s", "ps", "%"]
_NUMBERISH = st.one_of(
    st.text(max_size=30),
    st.tuples(st.sampled_from(["", " ", "-", "+", "--", "\t"]),
              st.sampled_from(["0", "1", "1.5", ".5", "5.", "16", "4.9", "1e3", "1e400", "1e-400", "inf", "nan",
                               "9" * 30, "0x10", "1_000", "1,5", "\u0661", "\u00bd", ""]) | st.integers(-10**6, 10**25).map(str),
              st.sampled_from(_UNITS), st.sampled_from(_UNITS + ["MB MB", "/", "s/s"]),
              st.sampled_from(["", " ", "\n", "junk"])).map("".join),
    st.integers(min_value=-10**30, max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@pytest.mark.slow
@pytest.mark.scenario("bad input: sizes (parse_size)", f"{EXAMPLES['size']} cases: int >= 1 or UnitError")
@settings(max_examples=EXAMPLES["size"], **FAST)
@given(text=_NUMBERISH)
def test_parse_size_never_crashes(row, text):
    try:
        n = parse_size(text)
    except UnitError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert isinstance(n, int) and n >= 1


@pytest.mark.slow
@pytest.mark.scenario("bad input: rates (parse_rate)", f"{EXAMPLES['rate']} cases: finite rate > 0 or UnitError")
@settings(max_examples=EXAMPLES["rate"], **FAST)
@given(text=_NUMBERISH)
def test_parse_rate_never_crashes(row, text):
    import math
    try:
        r = parse_rate(text)
    except UnitError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert isinstance(r, float) and math.isfinite(r) and r > 0


@pytest.mark.scenario("bad input: durations (parse_duration)", f"{EXAMPLES['duration']} cases: > 0 s or UnitError")
@settings(max_examples=EXAMPLES["duration"], **FAST)
@given(text=_NUMBERISH)
def test_parse_duration_never_crashes(row, text):
    import math
    try:
        s = parse_duration(text)
    except UnitError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert math.isfinite(s) and s > 0


_LABEL_TOKENS = ["4X", "133x", "C10", "U1", "U3", "V30", "V90", "A1", "A2", "UHS-I", "UHS-II", "Class 10", "CL10",
                 "300x", "2000x", "×", "x", "MB/s", "95MB/s", "SDHC", "SDXC", "I", "II", "III", "  ", ",", "/", "+",
                 "Ultra", "Extreme", "1000X", "UDMA7", "VPG-65", "VPG-20", "C", "V", "U", "A", "0", "-1"]
_LABELS = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(_LABEL_TOKENS) | st.text(max_size=6), max_size=8).map(" ".join),
    st.lists(st.sampled_from(_LABEL_TOKENS), max_size=8).map("".join),
)


@pytest.mark.slow
@pytest.mark.scenario("bad input: labels (parse_label)", f"{EXAMPLES['label']} cases: claims or one-line UsageError")
@settings(max_examples=EXAMPLES["label"], **FAST)
@given(text=_LABELS)
def test_parse_label_never_crashes(row, text):
    try:
        claims = parse_label(text)
    except UsageError as e:
        assert e.message and "\n" not in e.message
        return
    assert isinstance(claims, list)


# -- command lines ---------------------------------------------------------------------------------------------------

#: commands that start emulators or scan for hardware are left out of the generated command lines
SKIP_COMMANDS = {"emulate", "demo", "drawer", "serve"}   # serve: a server runs until stopped
SAFE_TARGETS = ["/nonexistent/card", "missing-dir", "/dev/null", "a-file.txt", "", "-", "no such/../x"]
_VALUES = st.one_of(
    _NUMBERISH,
    st.sampled_from(["0", "-1", "1", "3", "16MB", "1GiB", "64MiB", "4X", "C10 U3", "nan", "inf", "1e400",
                     "9" * 40, "table", "json", "md", "csv", "html", "--", "-", "", " ", "7d", "2024-05-01",
                     "2024-13-45", "12h", "-write", "card", "*", "%", "_", "'", "\"", "\\", "\x00", "é", "🃏"]),
    st.text(max_size=20),
)


def _commands() -> dict[str, click.Command]:
    return {name: cmd for name, cmd in cli.commands.items() if name not in SKIP_COMMANDS}


def _path_value(opt: str, scratch: Path, draw) -> str:
    """Values of options naming files: always inside the scratch directory (or refused shapes)."""
    name = draw(st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=12))
    choices = [str(scratch / name), str(scratch / "no-such-dir" / name), str(scratch), "-",
               str(scratch / "db.sqlite3"), str(scratch / "garbage.bin"), str(scratch / "foreign.sqlite3")]
    if opt == "--db":
        choices += ["sqlite://relative", "sqlite:///" + str(scratch / "u.sqlite3"), "mysql://x/y",
                    "postgresql://nobody@127.0.0.1:1/none", "sqlite:", str(scratch / name) + "://x"]
    return draw(st.sampled_from(choices))


_PATH_OPTS = {"--db", "--output", "-o", "--html", "--journal"}


@st.composite
def argvs(draw, scratch: Path):
    cmds = _commands()
    name = draw(st.sampled_from(sorted(cmds)))
    cmd = cmds[name]
    argv = [name]
    params = [p for p in cmd.params if isinstance(p, click.Option)]
    chosen = draw(st.lists(st.sampled_from(params), max_size=6)) if params else []
    for p in chosen:
        flag = draw(st.sampled_from(p.opts + p.secondary_opts))
        if p.is_flag or p.count:
            argv.append(flag)
            continue
        if flag in _PATH_OPTS or p.name in ("db", "output", "html_file", "journal_dir"):
            argv += [flag, _path_value(flag, scratch, draw)]
        elif isinstance(p.type, click.Choice) and draw(st.booleans()):
            argv += [flag, draw(st.sampled_from(list(p.type.choices)))]
        else:
            argv += [flag, draw(_VALUES)]
    if "--db" not in argv and name in ("run", "verify", "geometry", "results", "compare", "report", "import",
                                       "export"):
        argv += ["--db", str(scratch / "db.sqlite3")]
    args = [p for p in cmd.params if isinstance(p, click.Argument)]
    if args:
        argv.append("--")
        for _ in args:
            if name == "import":
                argv.append(draw(st.sampled_from([str(scratch / "garbage.bin"), str(scratch / "a-file.txt"),
                                                  str(scratch / "missing.json"), str(scratch), "-"])))
            elif name in ("run", "verify", "geometry"):
                argv.append(draw(st.sampled_from(SAFE_TARGETS)))
            else:
                argv.append(draw(_VALUES))
        if draw(st.integers(0, 9)) == 0:
            argv.append(draw(st.sampled_from(SAFE_TARGETS)))   # one argument too many
    elif draw(st.integers(0, 9)) == 0:
        argv.append(draw(_VALUES))
    if draw(st.integers(0, 19)) == 0:   # an unknown option somewhere
        argv.insert(draw(st.integers(1, len(argv))), "--" + draw(st.text(string.ascii_lowercase, min_size=1, max_size=8)))
    return argv


def _never_a_real_target(argv: list[str], scratch: Path) -> None:
    """The safety net of this test itself: no generated run/verify may name a real directory
    or block device (the default target "." is the scratch dir, made untestable below)."""
    if argv[0] not in ("run", "verify", "geometry"):
        return
    # the generator's own "--" is the last one: an option may take "--" as its value before it
    after = argv[len(argv) - argv[::-1].index("--"):] if "--" in argv else []
    for a in after:
        p = Path(a) if a else None
        assert p is None or not p.exists() or not p.is_dir() and not p.is_block_device(), argv


@pytest.fixture(scope="module")
def cli_scratch(scratch):
    (scratch / "a-file.txt").write_text("not a card\n")
    (scratch / "garbage.bin").write_bytes(os.urandom(4096))
    con = sqlite3.connect(scratch / "foreign.sqlite3")
    con.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO photos (name) VALUES ('cat.jpg')")
    con.commit()
    con.close()
    return scratch


@pytest.mark.slow
@pytest.mark.scenario("bad input: command lines (main(argv))",
                      f"{EXAMPLES['cli']} cases: exit 0/2/3/4/6, one 'cardbench:' line, no traceback")
@settings(max_examples=EXAMPLES["cli"], **FAST)
@given(data=st.data())
def test_command_lines_never_crash(row, cli_scratch, data, monkeypatch):
    import cardbench.geometry.run as geometry
    import cardbench.pulltest.core as pulltest
    import cardbench.runner as runner
    import cardbench.store.backends as backends
    import cardbench.verify.full as vfull
    import cardbench.verify.quick as vquick

    def refuse(*a, **k):
        raise AssertionError(f"a generated command line reached a real test: {a}")
    # the net under the net: whatever is generated, no workload may start
    monkeypatch.setattr(runner, "_run_tests", refuse)
    monkeypatch.setattr(runner, "run_device", refuse)
    monkeypatch.setattr(vquick, "Prober", refuse)
    monkeypatch.setattr(vfull.FillRun, "write_pass", refuse)
    monkeypatch.setattr(pulltest.PullTest, "setup", refuse)
    monkeypatch.setattr(pulltest.PullTest, "verify", refuse)
    monkeypatch.setattr(geometry, "read_pass", refuse)
    # the generated postgresql:// URL names a closed port: refused at once, not waited for with
    # backoff (3.5 s a case; the wait itself is tested in test_faults_store)
    monkeypatch.setattr(backends, "CONNECT_ATTEMPTS", 1)
    argv = data.draw(argvs(cli_scratch))
    _never_a_real_target(argv, cli_scratch)
    o = judged(argv)
    row.observed[:] = [f"{EXAMPLES['cli']} generated command lines judged; none crashed"]
    assert o.code is not None


@pytest.mark.parametrize("name", sorted(_commands()))
def test_a_nul_in_any_argument_is_one_line(name, cli_scratch):
    """Found by CI's fuzzer: `readers --probe -- '\\x00' ...` was an internal error (ValueError:
    embedded null byte), and `run`/`verify` with such a target too. main(argv) refuses it first."""
    for argv in ([name, "--", "\x00"], [name, "--db", str(cli_scratch / "a\x00b")]):
        o = judged(argv, allowed={2})
        assert "NUL byte" in o.err, (argv, o.err)


# -- import files ----------------------------------------------------------------------------------------------------

def _seed_texts() -> list[str]:
    out = []
    # every fixture, the peers' real and documented outputs too (data/peers, data/peers/fio_real)
    for p in sorted(q for q in DATA.rglob("*") if q.is_file() and q.suffix != ".md") if DATA.is_dir() else []:
        try:
            out.append(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            pass
    from cardbench.result import Result, Run, TestResult
    r = Result(target={"kind": "directory", "path": "/media/card"}, tests=[TestResult(name="seq_write", method={"engine": "sync"}, runs=[Run(bytes=1000000, seconds=1.0)])])
    out.append(json.dumps({"schema": "cardbench.results/1", "results": [r.to_dict()]}))
    out.append(json.dumps(r.to_dict()))
    return out


SEEDS = _seed_texts()
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                     max_leaves=12)


def _mutate_json(doc, rnd: random.Random, junk):
    """Replace, drop or retype a few values anywhere in a JSON document."""
    nodes = [doc]
    targets = []
    while nodes:
        n = nodes.pop()
        if isinstance(n, dict):
            for k in list(n):
                targets.append((n, k))
                nodes.append(n[k])
        elif isinstance(n, list):
            for i in range(len(n)):
                targets.append((n, i))
                nodes.append(n[i])
    for _ in range(rnd.randint(1, 4)):
        if not targets:
            break
        parent, key = rnd.choice(targets)
        action = rnd.random()
        try:
            if action < 0.3 and isinstance(parent, dict):
                del parent[key]
            else:
                parent[key] = junk
        except (KeyError, IndexError):
            pass
    return doc


@st.composite
def import_files(draw) -> bytes:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.binary(max_size=3000))
    if kind == 1:
        return draw(st.text(max_size=2000)).encode("utf-8", "surrogatepass")
    seed = draw(st.sampled_from(SEEDS))
    rnd = random.Random(draw(st.integers(0, 2**32)))
    if seed.lstrip().startswith("{") and kind in (2, 3):
        doc = _mutate_json(json.loads(seed), rnd, draw(_JSON))
        return json.dumps(doc, allow_nan=True).encode()
    # text surveys: change, drop or duplicate characters, cells and lines
    lines = seed.splitlines()
    for _ in range(rnd.randint(1, 6)):
        if not lines:
            break
        i = rnd.randrange(len(lines))
        op = rnd.random()
        cell = draw(_VALUES)
        if op < 0.25:
            del lines[i]
        elif op < 0.5:
            parts = lines[i].replace(",", " , ").split()
            if parts:
                parts[rnd.randrange(len(parts))] = cell
            lines[i] = (" " if "," not in seed.splitlines()[0] else ",").join(parts)
        elif op < 0.75:
            lines.insert(i, lines[i])
        else:
            pos = rnd.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:pos] + cell + lines[i][pos:]
    return "\n".join(lines).encode("utf-8", "surrogatepass")


@pytest.mark.slow
@pytest.mark.scenario("bad input: import files (cardbench import)",
                      f"{EXAMPLES['import']} cases: imported or refused (exit 2), store intact")
@settings(max_examples=EXAMPLES["import"], **FAST)
@given(content=import_files(), fmt=st.sampled_from([None, None, None, "cardbench", "fio", "table", "csv"]),
       save=st.integers(0, 7), file_size=st.sampled_from([None, None, "42MB", "42MiB", "0", "banana", "-1MB"]))
def test_import_files_never_crash(row, scratch, content, fmt, save, file_size):
    path = scratch / "import-case"
    path.write_bytes(content)
    db = scratch / "import.sqlite3"
    argv = ["import", str(path), "--db", str(db)] + (["--format", fmt] if fmt else []) + \
        (["--file-size", file_size] if file_size else []) + ([] if save == 0 else ["--dry-run"])
    judged(argv, {0, 2})
    if save == 0 and db.exists():
        from cardbench.store import open_store
        with open_store(str(db)) as s:
            assert s.check() == []
    row.observed[:] = [f"{EXAMPLES['import']} generated import files judged; none crashed; store checked"]


# -- database files ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def good_db(scratch) -> bytes:
    """The bytes of a valid cardbench database with a few results and a verify document."""
    from cardbench.result import Card, Result, Run, TestResult
    from cardbench.store import open_store
    p = scratch / "good.sqlite3"
    with open_store(str(p)) as s:
        for i in range(3):
            s.save(Result(target={"kind": "directory", "path": "/media/card"}, card=Card(brand=f"B{i}", label="4X"),
                          tests=[TestResult(name="seq_write", method={}, runs=[Run(bytes=10**6, seconds=1.0 + i)]),
                                 TestResult(name="cold_read", method={}, runs=[Run(bytes=10**6, seconds=0.5)])]))
    con = sqlite3.connect(p)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    return p.read_bytes()


def db_bytes(kind: str, seed: int, good: bytes) -> bytes:
    """A damaged copy of a good database (or random bytes), made from a seed: the failing
    example hypothesis prints stays short."""
    rnd = random.Random(seed)
    if kind == "random":
        return rnd.randbytes(rnd.randrange(8192))
    data = bytearray(good)
    if kind == "flipped":
        for _ in range(rnd.randint(1, 40)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
    elif kind == "truncated":
        data = data[:rnd.randrange(len(data))]
    elif kind == "page":   # a page zeroed or overwritten
        page = 4096
        start = rnd.randrange(max(1, len(data) // page)) * page
        data[start:start + page] = bytes(page) if rnd.random() < 0.5 else rnd.randbytes(page)
    return bytes(data)


@pytest.mark.slow
@pytest.mark.scenario("bad input: corrupted or foreign --db files",
                      f"{EXAMPLES['db']} cases: read or refused (exit 6), foreign files untouched")
@settings(max_examples=EXAMPLES["db"], **FAST)
@given(data=st.data())
def test_database_files_never_crash(row, scratch, good_db, data):
    kind = data.draw(st.sampled_from(["random", "foreign", "flipped", "truncated", "page"]))
    content = db_bytes(kind, data.draw(st.integers(0, 2**32), label="seed"), good_db)
    path = scratch / "case.sqlite3"
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + suffix)
    if kind == "foreign":
        con = sqlite3.connect(path)
        names = data.draw(st.lists(st.from_regex(r"\A[a-z][a-z_]{0,10}\Z"), min_size=1, max_size=4, unique=True))
        for n in names:
            con.execute(f'CREATE TABLE "{n}" (id INTEGER PRIMARY KEY, v TEXT)')
        con.commit()
        con.close()
        content = path.read_bytes()
    else:
        path.write_bytes(content)
    command = data.draw(st.sampled_from([["results"], ["results", "--format", "json"], ["export"],
                                         ["report"], ["results", "--id", "abcd"], ["compare", "a", "b"],
                                         ["run", "--", "/nonexistent/card"]]))
    argv = command[:1] + ["--db", str(path)] + command[1:]
    o = judged(argv)
    if kind == "foreign" and "schema_version" not in names:
        assert o.code == 6, (argv, o.code, o.err)
        assert path.read_bytes() == content, "a foreign database was changed"
    row.observed[:] = [f"{EXAMPLES['db']} generated database files judged; none crashed"]


@pytest.mark.scenario("bad input: total generated cases", ">= 10,000 cases over the tests above")
def test_total_generated_cases(row):
    row.saw(f"{TOTAL} cases configured: " + ", ".join(f"{k} {v}" for k, v in EXAMPLES.items()))
    assert TOTAL >= 10_000
