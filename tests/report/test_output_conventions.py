"""One set of output conventions on every command that prints data (issue 16): ``--json`` is one
JSON document on stdout, ``--quiet`` prints nothing but errors, every stored run has a row that
means something (an imported fio random-read run shows its MB/s and IOPS), and the answer holds
no identity key or source tag. Real SQLite files, a real fio run, the real command line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from cardbench.store import open_store
from cardbench_factories import make_result
from realparts import call_cli

#: what must never appear in default (non-JSON, non-verbose) output
INTERNAL = re.compile(r"\buser:[^\s]*\||\bname:unknown\b|\busb:[0-9a-f]{4}:|\[S\d+\]")


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.db"
    with open_store(path) as s:
        s.save(make_result(brand="Lexar", label="4X", reader="Reader One", started_at="2024-05-01T10:00:00+00:00"))
        s.save(make_result(brand="SanDisk", capacity=64_000_000, label=None, write_times=(47.6, 47.8, 47.6),
                           read_rate=1.9e6, reader="Reader One", started_at="2024-06-01T10:00:00+00:00"))
    return str(path)


@pytest.mark.parametrize("argv", [["results"], ["readers"], ["export"], ["report"], ["compare", "lexar", "sandisk"],
                                  ["results", "--format", "json"], ["report", "--format", "json", "--json"]])
def test_json_is_one_document(db, argv):
    p = call_cli(*argv, "--db", db, "--json")
    assert p.returncode == 0, p.stderr
    json.loads(p.stdout)             # one document, nothing before or after it
    assert p.stderr == ""


def test_list_json_is_one_document():
    p = call_cli("list", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["schema"] == "cardbench.devices/1"


def test_json_and_another_format_contradict(db):
    p = call_cli("results", "--db", db, "--json", "--format", "csv")
    assert p.returncode == 2 and "contradict" in p.stderr and p.stdout == ""


@pytest.mark.parametrize("argv", [["results"], ["readers"], ["report"], ["compare", "lexar", "sandisk"],
                                  ["results", "--json"]])
def test_quiet_prints_nothing(db, argv):
    p = call_cli(*argv, "--db", db, "--quiet")
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""


def test_quiet_still_prints_errors(tmp_path):
    p = call_cli("results", "--db", str(tmp_path / "missing.db"), "--quiet")
    assert p.returncode == 6 and p.stdout == "" and p.stderr.startswith("cardbench: ")


def test_results_id_shows_every_run_then_the_answer(db):
    with open_store(db) as s:
        rid = s.results(card="lexar")[0].id
    out = call_cli("results", "--db", db, "--id", rid[:8]).stdout
    assert "95% CI of mean" in out and "user:Lexar" in out       # the detail keeps the identity key
    assert out.index("95% CI of mean") < out.index("This card")  # ... and ends with the answer


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_imported_fio_random_read_has_a_meaningful_row(tmp_path):
    fio = subprocess.run(["fio", "--name=randread4k", "--filename=f.bin", "--size=4M", "--rw=randread",
                          "--bs=4k", "--runtime=1", "--time_based", "--output-format=json"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert fio.returncode == 0, fio.stderr
    doc = json.loads(fio.stdout[fio.stdout.index("{"):])
    job = doc["jobs"][0]["read"]
    mb_s, iops = job["io_bytes"] / (job["runtime"] / 1000) / 1e6, job["total_ios"] / (job["runtime"] / 1000)
    (tmp_path / "fio.json").write_text(fio.stdout[fio.stdout.index("{"):])
    db = str(tmp_path / "r.db")
    assert call_cli("import", str(tmp_path / "fio.json"), "--fio", "--db", db).returncode == 0
    out = call_cli("results", "--db", db).stdout
    assert "(unnamed card)" not in out
    row = " ".join(out.split())        # the notes may wrap: read the table as words
    # named from its source: the importer names the card after fio's file (else the drawer says
    # "fio <job> on <file>")
    assert "f.bin" in row.split("rand_read_4k_q1t1")[0]
    m = re.search(r"rand_read_4k_q1t1: ([\d.]+) MB/s, ([\d,]+) IOPS", row)
    assert m, out
    assert float(m.group(1)) == pytest.approx(mb_s, rel=0.01)
    assert float(m.group(2).replace(",", "")) == pytest.approx(iops, rel=0.01)
    csv_out = call_cli("results", "--db", db, "--format", "csv").stdout
    assert "rand_read_4k_q1t1" in csv_out


def test_shell_completion_completes_commands_and_options():
    import os
    import sys
    env = dict(os.environ, PYTHONPATH=str(__import__("pathlib").Path(__file__).resolve().parents[2] / "src"),
               _CARDBENCH_COMPLETE="bash_complete")
    def complete(words, cword):
        return subprocess.run([sys.executable, "-m", "cardbench"], capture_output=True, text=True, timeout=60,
                              env=dict(env, COMP_WORDS=words, COMP_CWORD=str(cword))).stdout.split()
    assert "plain,results" in complete("cardbench res", 1)
    assert "plain,--format" in complete("cardbench results --fo", 2)
