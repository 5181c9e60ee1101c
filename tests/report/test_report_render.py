"""The drawer table in every format, one run in detail, and comparisons."""

from __future__ import annotations

import csv
import io
import json
import statistics

import pytest

from cardbench.errors import UsageError
from cardbench.report import compare, render, render_compare, render_result
from cardbench.result import Result, Run, TestResult
from cardbench_factories import make_result

MB = 1_000_000
MiB = 1 << 20


def drawer():
    lexar = make_result(brand="Lexar", capacity=48 * MB, label="4X", write_times=(41.2, 41.5, 41.6), read_rate=3.6e6)
    sandisk = make_result(brand="SanDisk", capacity=64 * MB, label=None, write_times=(47.6, 47.8, 47.6),
                          read_rate=1.9e6, warnings=["run 1 slower"], limited_by="USB 2.0 link, 40 MB/s")
    partial = make_result(brand="PNY", capacity=128 * MB, label=None, write_times=(30.5,), read_rate=None,
                          complete=False)
    return [lexar, sandisk, partial]


def test_csv_figures_and_units():
    rs = drawer()
    text = render(rs, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["result_id", "started_at", "source", "card_brand", "card_name", "card_capacity_bytes",
                             "card_label", "card_identity", "reader", "write_test", "write_file_bytes",
                             "write_times_s", "write_avg_s", "write_MB_per_s", "write_X", "read_test",
                             "read_MB_per_s", "read_X", "warnings", "limited_by_reader", "complete", "other_tests"]
    lexar = rows[0]
    assert lexar["write_times_s"] == "41.2;41.5;41.6"
    assert float(lexar["write_avg_s"]) == pytest.approx(41.4333, abs=1e-4)
    median_rate = statistics.median([42e6 / t for t in (41.2, 41.5, 41.6)])
    assert float(lexar["write_MB_per_s"]) == pytest.approx(median_rate / MB, rel=1e-5)
    assert float(lexar["write_X"]) == pytest.approx(median_rate / 150_000, rel=1e-5)
    assert float(lexar["read_X"]) == pytest.approx(float(lexar["read_MB_per_s"]) * MB / 150_000, rel=1e-5)
    assert (rows[1]["warnings"], rows[1]["limited_by_reader"], rows[1]["complete"]) == ("1", "yes", "yes")
    assert (rows[2]["complete"], rows[2]["read_MB_per_s"], rows[2]["read_test"]) == ("no", "", "")

    mib = list(csv.DictReader(io.StringIO(render(rs, "csv", rate_unit="MiB/s"))))
    assert "write_MiB_per_s" in mib[0] and "write_MB_per_s" not in mib[0]
    assert float(mib[0]["write_MiB_per_s"]) == pytest.approx(median_rate / MiB, rel=1e-5)
    assert mib[0]["write_X"] == lexar["write_X"]          # X does not depend on the display unit


def test_table_and_markdown():
    rs = drawer()
    for fmt in ("table", "md"):
        text = render(rs, fmt)
        for header in ("Write runs (s)", "Avg write (s)", "Write (MB/s)", "Write (X)", "Read (MB/s)", "Read (X)"):
            assert header in text, (fmt, header)
        assert "41.20 41.50 41.60" in text and "41.43" in text and "1.012" in text and "6.7" in text
        assert "47.60 47.80 47.60" in text and "47.67" in text and "0.882" in text
        assert "1 warning" in text and "limited by reader" in text and "INCOMPLETE" in text
        assert "1X = 150,000 B/s" in text
    md = render(rs, "md").splitlines()
    assert md[0].startswith("| Card | Capacity | Label |")
    assert md[1].startswith("|---|")
    assert len([ln for ln in md if ln.startswith("| ")]) == 1 + len(rs)
    lexar_line = next(ln for ln in md if ln.startswith("| Lexar"))
    assert lexar_line.split(" | ")[10].strip(" |") == ""          # no notes for a clean complete run
    assert "Write (MiB/s)" in render(rs, "table", rate_unit="MiB/s")
    assert "0.965" in render(rs, "md", rate_unit="MiB/s")          # 1.012 MB/s = 0.965 MiB/s


def test_markdown_escapes_pipes():
    r = make_result(brand="Odd|Brand", label="4X|8X")
    line = next(ln for ln in render([r], "md").splitlines() if "Odd" in ln)
    assert "Odd\\|Brand" in line and "4X\\|8X" in line


def test_raw_tests_are_used_when_no_file_tests():
    r = Result(target={}, tests=[TestResult("raw_write", {}, runs=[Run(10 * MB, 2.0), Run(10 * MB, 2.0)]),
                                 TestResult("raw_read", {}, runs=[Run(10 * MB, 1.0)])])
    row = list(csv.DictReader(io.StringIO(render([r], "csv"))))[0]
    assert (row["write_test"], row["read_test"]) == ("raw_write", "raw_read")
    assert float(row["write_MB_per_s"]) == 5.0 and float(row["read_MB_per_s"]) == 10.0


def test_json_round_trip():
    rs = drawer()
    doc = json.loads(render(rs, "json"))
    assert doc["schema"] == "cardbench.results/1"
    assert [Result.from_dict(d) for d in doc["results"]] == rs


def test_bad_format_and_unit():
    with pytest.raises(UsageError, match="unknown format"):
        render([], "xml")
    with pytest.raises(UsageError, match="unknown rate unit"):
        render([], "csv", rate_unit="furlongs/s")
    with pytest.raises(UsageError):
        render_result(drawer()[0], "yaml")


def test_empty_table():
    assert "0 runs" in render([], "table")
    assert render([], "csv").count("\n") == 1


def test_render_result_detail():
    r = make_result()
    r.warnings = ["clock adjusted during run"]
    r.tests[0].warmup = [Run(42 * MB, 45.0)]
    r.tests[0].warnings = ["run 3 slower than the median by 0.3%"]
    text = render_result(r)
    for needle in ("seq_write", "cold_read", "42,000,000", "41.2000", "41.5000", "warm-up 1", "median", "mean",
                   "min", "max", "stdev", "95% CI of mean", "X (median)", "6.7X", "run 3 slower",
                   "clock adjusted", "rate (MB/s)"):
        assert needle in text, needle
    md = render_result(r, "md")
    assert "#### seq_write" in md and "| 95% CI of mean |" in md
    rows = list(csv.DictReader(io.StringIO(render_result(r, "csv"))))
    assert [x["kind"] for x in rows if x["test"] == "seq_write"] == ["warmup", "run", "run", "run"]
    assert float(rows[1]["rate_MB_per_s"]) == pytest.approx(42 / 41.2, rel=1e-5)
    assert json.loads(render_result(r, "json"))["id"] == r.id
    one = make_result(write_times=(10.0,), read_rate=None)
    assert "n/a (1 run)" in render_result(one)


def test_compare_beyond_spread():
    fast = [make_result(brand="A", write_times=(10.0, 10.1, 9.9, 10.05))]
    slow = [make_result(brand="B", write_times=(20.0, 20.2, 19.8, 20.1))]
    close = [make_result(brand="C", write_times=(10.3, 9.6, 10.4, 9.8))]
    single = [make_result(brand="D", write_times=(12.0,))]
    rows = {r.test: r for r in compare(fast, slow)}
    assert rows["seq_write"].beyond_spread == "yes"
    assert rows["seq_write"].diff_pct == pytest.approx(-50.0, abs=1.0)
    assert {r.test: r for r in compare(fast, close)}["seq_write"].beyond_spread == "no"
    assert {r.test: r for r in compare(fast, single)}["seq_write"].beyond_spread == "cannot tell"
    text = render_compare(compare(fast, slow), "card A", "card B")
    assert "Beyond spread" in text and "yes" in text and "A median (MB/s)" in text
    assert "| seq_write |" in render_compare(compare(fast, slow), "A", "B", "md")
    j = json.loads(render_compare(compare(fast, slow), "A", "B", "json"))
    assert j["tests"][0]["beyond_spread"] == "yes"
    c = list(csv.DictReader(io.StringIO(render_compare(compare(fast, slow), "A", "B", "csv"))))
    assert c[0]["beyond_spread"] == "yes" and "diff_mean_MB_per_s" in c[0]
    only_a = compare([make_result(curves=True)], slow)
    assert {r.test: r.beyond_spread for r in only_a}["raw_read"] == "cannot tell"
