"""Every example in README.md, docs/*.md and CHANGELOG.md is run or checked, as the exit-code table is.

Each fenced code block is preceded by a marker saying what the test does with it, so no block is
skipped in silence (a block without one fails):

- ``<!-- example: run -->``: a shell block, run line by line with ``bash -e`` in a scratch
  directory, with the suite's own data directories and ``cardbench`` being this checkout; it must
  exit 0.
- ``<!-- example: parse -->``: a shell block that needs a real card, root or a long time. Each
  ``cardbench`` command in it is parsed by the command line itself (every option and value
  checked, as when run, but nothing done); ``bash scripts/X``, ``python3 bench/X.py`` and
  ``pip install 'cardbench[extra]'`` must name what exists; any other program must be named in
  :data:`OTHER_PROGRAMS`.
- ``<!-- example: python -->``: a Python block, run in a child process; it must exit 0.
  ``<!-- example: python needs=MODULE -->``: the same, for a recipe over a part of cardbench
  still being merged; skipped, saying so, while MODULE cannot be imported.
- ``<!-- example: shape SCHEMA -->``: a JSON document with comments, whose fields (after the
  comments are taken out) must be the fields cardbench writes in a document of that schema.
- ``<!-- example: answer -->``: verdict lines of the example card (a Lexar 48 MB 4X behind a
  USB 2.0 reader writing 1.002 MB/s and reading 3.624 MB/s): each must be a line cardbench
  prints for that card, in its order (wrapped lines are joined).
- ``<!-- example: output -->``: what cardbench prints or writes (text, JSON with comments),
  and ``<!-- example: figure -->``: a diagram; shown, not run.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import click
import pytest

from cardbench.cli import cli
from cardbench.report.answer import verdict_lines
from cardbench.result import Card, Reader, Result, Run, TestResult
from cardbench.store import open_store
from cardbench.store.export import collect
from cardbench.verdicts import check_result
from realparts import child_env

CHECKOUT = Path(__file__).resolve().parent.parent
DOCUMENTS = [CHECKOUT / "README.md", CHECKOUT / "CHANGELOG.md", *sorted((CHECKOUT / "docs").glob("*.md"))]
KINDS = {"run": ("sh",), "parse": ("sh",), "python": ("python",), "output": ("text", "json"), "figure": ("text",),
         "shape cardbench.result/1": ("json",), "shape cardbench.export/2": ("json",),
         "python needs=cardbench.kinds": ("python",), "answer": ("text",)}
#: programs a parse block may name besides cardbench, bash scripts/, python3 bench/ and pip
OTHER_PROGRAMS = {"export", "sudo", "hdparm", "jq", "eval"}

FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
MARKER = re.compile(r"<!-- example: (\w+)(?: ([\w./=]+))? -->\n\Z")


def blocks() -> list[tuple[str, str, str, str]]:
    """(where, kind, language, code) of every fenced block; kind None when the marker is missing."""
    found = []
    for doc in DOCUMENTS:
        if not doc.exists():
            continue
        text = doc.read_text()
        for m in FENCE.finditer(text):
            before = text[:m.start()]
            marker = MARKER.search(before)
            line = before.count("\n") + 1
            kind = (marker.group(1) if marker.group(2) is None else f"{marker.group(1)} {marker.group(2)}") \
                if marker else None
            found.append((f"{doc.relative_to(CHECKOUT)}:{line}", kind, m.group(1), m.group(2)))
    return found


def of_kind(kind: str) -> list:
    return [pytest.param(code, id=where) for where, k, _lang, code in blocks() if k == kind]


def test_the_documents_exist_and_every_block_is_marked():
    assert (CHECKOUT / "docs").is_dir() and len(DOCUMENTS) >= 8
    found = blocks()
    assert len(found) >= 10
    wrong = [f"{where}: marker {kind!r} on a ```{lang} block" for where, kind, lang, _ in found
             if kind not in KINDS or lang not in KINDS[kind]]
    assert wrong == [], "every fenced block needs <!-- example: run|parse|python|output|figure --> above it"
    for kind in ("run", "parse", "python"):
        assert any(k == kind for _, k, _, _ in found), kind


def commands(code: str) -> list[list[str]]:
    """The simple commands of a shell block: lines joined at a trailing backslash, comments
    dropped, split at | && || ; with redirections and leading VAR=value assignments removed."""
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        lex.commenters = "#"
        words: list[str] = []
        skip_next = False
        for tok in list(lex) + ["|"]:
            if skip_next:
                skip_next = False
                continue
            if tok in (">", ">>", "<", "2>"):
                skip_next = True
            elif tok in ("|", "&&", "||", ";", "&"):
                while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                    words.pop(0)
                if words:
                    out.append(words)
                words = []
            else:
                words.append(tok)
    return out


def parse_cardbench(args: list[str]) -> None:
    """Parse a cardbench command line as the command line would, down to its last subcommand,
    with every option's type and callback applied; nothing is run."""
    group: click.Command = cli
    ctx = group.make_context("cardbench", list(args))
    while isinstance(group, click.Group):
        # click 8.2 keeps them in _protected_args (protected_args is deprecated); 8.1 in protected_args
        protected = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args
        rest = [*protected, *ctx.args]
        if not rest:
            return
        name, group, rest = group.resolve_command(ctx, rest)
        assert group is not None, args
        ctx = group.make_context(name, rest, parent=ctx)


def check_parse_command(words: list[str]) -> None:
    if words[0] == "sudo":
        words = words[1:]
    program, args = words[0], words[1:]
    if program == "cardbench":
        parse_cardbench(args)
    elif program == "bash" and args[0].startswith("scripts/"):
        script = CHECKOUT / args[0]
        assert script.exists(), script
        subprocess.run(["bash", "-n", str(script)], check=True)
        assert all(a.startswith("-") or "/" in a for a in args[1:]), args   # options, or test paths
        for path in (a for a in args[1:] if not a.startswith("-")):
            assert (CHECKOUT / path).exists(), path
    elif program == "python3" and args[:2] == ["-m", "pytest"]:
        paths = [a for a in args[2:] if a.startswith("tests/")]
        assert paths and all((CHECKOUT / p.split("::")[0]).exists() for p in paths), args
    elif program == "python3" and args[0].startswith("bench/"):
        script = CHECKOUT / args[0]
        assert script.exists(), script
        compile(script.read_text(), str(script), "exec")
    elif program == "pip":
        assert args[0] == "install"
        extras = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        for spec in args[1:]:
            m = re.fullmatch(r"cardbench\[([\w,]+)\]", spec)
            assert m, spec
            assert set(m.group(1).split(",")) <= set(extras), spec
    else:
        assert program in OTHER_PROGRAMS, f"{program}: add it to OTHER_PROGRAMS or run the block"


@pytest.mark.parametrize("code", of_kind("parse"))
def test_a_parse_example_names_what_exists_and_parses(code):
    found = commands(code)
    assert found
    subprocess.run(["bash", "-n", "-c", code], check=True)
    for words in found:
        try:
            check_parse_command(words)
        except click.exceptions.Exit as e:   # --help, --version
            assert e.exit_code == 0
        except click.UsageError as e:
            pytest.fail(f"{shlex.join(words)}: {e.format_message()}")


def _env() -> dict[str, str]:
    env = child_env()
    env.pop("CARDBENCH_DB", None)
    env.pop("CARDBENCH_SHARE", None)
    env.pop("CARDBENCH_TOKEN", None)
    return env


@pytest.mark.slow
@pytest.mark.parametrize("code", of_kind("run"))
def test_a_run_example_runs(code, tmp_path):
    script = 'cardbench() { python3 -m cardbench "$@"; }\nset -e -o pipefail\n' + code
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("code", of_kind("python") + of_kind("python needs=cardbench.kinds"))
def test_a_python_example_runs(code, tmp_path):
    if "cardbench.kinds" in code and importlib.util.find_spec("cardbench.kinds") is None:
        pytest.skip("the record-kind recipe needs cardbench.kinds (issue 30, item 5), not merged here")
    done = subprocess.run(["python3", "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_parser_of_examples_catches_a_wrong_option():
    with pytest.raises(click.UsageError):
        check_parse_command(["cardbench", "run", "/media/card", "--size", "banana"])
    with pytest.raises(click.UsageError):
        check_parse_command(["cardbench", "results", "--no-such-option"])
    with pytest.raises(AssertionError):
        check_parse_command(["bash", "scripts/no-such-script.sh"])
    assert commands("A=1 cardbench run . --json > x.json  # c\nhdparm --Istdout /dev/sdb | cardbench identify -") == [
        ["cardbench", "run", ".", "--json"], ["hdparm", "--Istdout", "/dev/sdb"], ["cardbench", "identify", "-"]]


def _setup_packages() -> dict[str, list[str]]:
    text = (CHECKOUT / "scripts" / "setup.sh").read_text()
    sets = {}
    for name in ("RUN_PACKAGES", "TEST_PACKAGES"):
        body = re.search(rf"^{name}=\(\n(.*?)^\)", text, re.M | re.S).group(1)
        sets[name] = [w for line in body.splitlines() for w in line.split("#")[0].split()]
    return sets


def test_the_quick_start_says_what_each_command_installs():
    """README's table of what scripts/quickstart.sh and scripts/test.sh install is setup.sh's lists,
    and .ci/run runs the test command README gives."""
    readme = (CHECKOUT / "README.md").read_text()
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, list[str]] = {}
    current = None
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 3 or cells[0] in ("command", "---"):
            continue
        current = cells[0].strip("`") or current
        listed.setdefault(current, []).extend(cells[1].replace("the above, and", "").split())
    sets = _setup_packages()
    assert listed["quickstart.sh"] == sets["RUN_PACKAGES"]
    assert listed["test.sh"] == sets["TEST_PACKAGES"]
    assert "linux-image-amd64" not in sets["RUN_PACKAGES"] and "qemu-system-x86" not in sets["RUN_PACKAGES"]
    quickstart = (CHECKOUT / "scripts" / "quickstart.sh").read_text()
    assert re.search(r"^bash scripts/setup\.sh$", quickstart, re.M)
    assert re.search(r"bash scripts/setup\.sh --tests$", (CHECKOUT / "scripts" / "test.sh").read_text(), re.M)
    assert "bash scripts/test.sh" in section and "bash scripts/quickstart.sh" in section
    assert re.search(r"^bash scripts/test\.sh$", (CHECKOUT / ".ci" / "run").read_text(), re.M)


def test_the_readme_is_a_front_page():
    lines = (CHECKOUT / "README.md").read_text().splitlines()
    assert len(lines) <= 300
    assert [n for n, line in enumerate(lines, 1) if len(line) > 80] == []
    links = re.findall(r"\]\(((?:docs/)?[\w.]+\.md)\)", "\n".join(lines))
    assert links and all((CHECKOUT / link).exists() for link in links)
    assert {f"docs/{p.name}" for p in (CHECKOUT / "docs").glob("*.md")} <= set(links)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_documents_lands():
    anchors = {doc: {_slug(h) for h in re.findall(r"^#+ (.+)$", FENCE.sub("", doc.read_text()), re.M)}
               for doc in DOCUMENTS if doc.exists()}
    broken = []
    for doc in anchors:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)", doc.read_text()):
            to = (doc.parent / target).resolve() if target else doc
            if not to.exists() or (anchor and anchor not in anchors.get(to, set())):
                broken.append(f"{doc.relative_to(CHECKOUT)}: {target}#{anchor}")
    assert broken == []
    assert _slug("The drawer's lines (`drawer --json`, schema `cardbench.drawer/1`)") == \
        "the-drawers-lines-drawer---json-schema-cardbenchdrawer1"


def _without_comments(code: str) -> dict:
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return json.loads(re.sub(r"\s//[^\n]*", "", code))


def _a_result() -> Result:
    result = Result(target={"kind": "directory"}, card=Card(brand="Lexar", capacity_bytes=48_000_000, label="4X"))
    result.tests.append(TestResult(name="seq_write", method={"engine": "sync"}, runs=[Run(bytes=10**6, seconds=1.0)]))
    return result


@pytest.mark.parametrize("code", of_kind("shape cardbench.result/1"))
def test_the_result_document_shown_has_the_fields_written(code):
    shown, written = _without_comments(code), _a_result().to_dict()
    assert shown["schema"] == written["schema"]
    assert sorted(shown) == sorted(written)
    for part in ("card", "reader", "host", "tool"):
        assert sorted(shown[part]) == sorted(written[part]), part
    assert sorted(shown["tests"][0]) == sorted(written["tests"][0])
    assert set(shown["tests"][0]["runs"][0]) == set(written["tests"][0]["runs"][0])
    assert Result.from_dict(shown).tests[0].name == "seq_write"


@pytest.mark.parametrize("code", of_kind("shape cardbench.export/2"))
def test_the_export_document_shown_has_the_fields_written(code, tmp_path):
    with open_store(tmp_path / "store.sqlite3") as store:
        store.save(_a_result())
        written = collect(store)
    shown = _without_comments(code)
    assert shown["schema"] == written["schema"]
    assert sorted(shown) == sorted(written)
    assert sorted(shown["cards"][0]) == sorted(written["cards"][0])


def test_every_document_shape_is_checked():
    kinds = {kind for _, kind, _, _ in blocks()}
    assert {"shape cardbench.result/1", "shape cardbench.export/2"} <= kinds


def _the_example_card() -> Result:
    """The card the answer examples show: Lexar 48 MB, 4X, behind a USB 2.0 usb-storage reader."""
    mb = 10**6
    result = Result(target={"kind": "directory", "filesystem": "ext4"},
                    card=Card(brand="Lexar", capacity_bytes=48 * mb, label="4X"),
                    reader=Reader(link_speed_mbit=480, driver="usb-storage", transport="usb"))
    read = [Run(bytes=2 * mb, seconds=2 / 3.624) for _ in range(3)]
    result.tests += [
        TestResult(name="seq_write", method={"engine": "sync"}, runs=[Run(bytes=2 * mb, seconds=2 / 1.002)] * 2),
        TestResult(name="cold_read", method={"engine": "sync", "verified": True}, runs=read[1:], warmup=read[:1])]
    check_result(result)
    return result


@pytest.mark.parametrize("code", of_kind("answer"))
def test_an_answer_shown_is_what_cardbench_says(code):
    shown = " ".join(code.split())
    printed = verdict_lines(_the_example_card())
    for line in printed:
        if shown.startswith(line):
            shown = shown[len(line):].lstrip()
    assert shown == "", f"not printed, or not in this order: {shown!r}; printed: {printed}"
