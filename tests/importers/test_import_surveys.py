"""Hand-made surveys: the classic whitespace table and legacy CSV; every slip flagged, only slips."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardbench.errors import UsageError
from cardbench.importers import DEFAULT_FILE_SIZE, import_file, import_text
from cardbench.importers.checks import Printed, check_row
from cardbench.importers.legacy_csv import classify
from cardbench.report import render
from cardbench.store import open_store


def test_classic_table_flags_exactly_the_slips(data_dir):
    rep = import_file(data_dir / "drawer_classic.txt")
    assert rep.format == "table"
    assert len(rep.results) == 9
    assert rep.flagged_lines() == [7, 11]
    assert [(f.line, f.figure, f.printed) for f in rep.flags] == [(7, "write MB/s", "1.737"), (11, "read X", "52.3")]
    pny, crucial = rep.flags
    assert pny.row == "PNY 128M"
    assert pny.computed == pytest.approx(42e6 / 30.5 / 1e6)
    assert pny.difference == pytest.approx(1.737 - 42 / 30.5, abs=1e-9)
    assert crucial.computed == pytest.approx(3.8 / 0.15)
    assert crucial.difference == pytest.approx(52.3 - 3.8 / 0.15)
    text = " ".join(" ".join(rep.lines()).split())         # lines are wrapped at 80 columns
    assert "write MB/s printed 1.737" in text and "off by +0.35995 (+26.1%" in text
    assert "read X printed 52.3" in text and "off by +26.97 (+106.4%" in text
    # the header line is reported, not silently dropped
    assert [s.line for s in rep.skipped] == [4]
    assert (rep.file_size_bytes, rep.file_size_source) == (42_000_000, "file")
    # the flagged rows carry the finding as a warning; the clean ones carry none
    warned = [r.target["line"] for r in rep.results if r.warnings]
    assert warned == [7, 11]


def test_classic_rows_recomputed_from_raw_data(data_dir):
    rep = import_file(data_dir / "drawer_classic.txt")
    lexar = rep.results[0]
    assert (lexar.card.brand, lexar.card.capacity_bytes, lexar.card.label) == ("Lexar", 48_000_000, "4X")
    assert lexar.source == "import" and lexar.host == {}
    w = lexar.test("seq_write")
    assert [(r.bytes, r.seconds) for r in w.runs] == [(42_000_000, 41.2), (42_000_000, 41.5), (42_000_000, 41.6)]
    assert w.method["file_bytes"] == 42_000_000 and w.method["file_size_source"] == "file"
    assert w.extra["printed"]["write_rate"] == "1.013"
    assert lexar.test("cold_read").median_bytes_per_s == pytest.approx(3.6e6)
    assert rep.results[1].card.label is None            # "-" means no rated speed
    ultra = rep.results[8]
    assert (ultra.card.brand, ultra.card.capacity_bytes) == ("SanDisk Ultra II", 1_000_000_000)
    # the drawer table shows the recomputed figures
    row = list(csv.DictReader(io.StringIO(render(rep.results, "csv"))))[2]
    assert float(row["write_MB_per_s"]) == pytest.approx(42 / 30.5, rel=1e-3)      # not the printed 1.737


def test_file_size_option_wins_and_matters(data_dir):
    rep = import_file(data_dir / "drawer_classic.txt", file_size="42MiB")
    assert (rep.file_size_bytes, rep.file_size_source) == (44_040_192, "option")
    # the printed rates were computed with 42,000,000 B: with MiB every row's write figures disagree
    assert rep.flagged_lines() == [5, 6, 7, 8, 9, 10, 11, 12, 13]
    assert {f.figure for f in rep.flags} == {"write MB/s", "write X", "read X"}
    assert rep.results[0].test("seq_write").runs[0].bytes == 44_040_192
    with pytest.raises(UsageError, match="bad file size"):
        import_file(data_dir / "drawer_classic.txt", file_size="forty-two")


def test_default_file_size_without_directive():
    text = "Lexar 48M 4X 41.2 41.5 41.6 average 41.43 1.013 6.8 3.6 24\n"
    rep = import_text(text)
    assert (rep.file_size_bytes, rep.file_size_source) == (DEFAULT_FILE_SIZE, "default")
    assert rep.flags == [] and len(rep.results) == 1


def test_classic_table_liberal_forms():
    text = ("Kingston Elite Pro 2GB 133x 6,1 6,2 avg 6,15 6,829 45,5 - -\n"
            "NoName 1G - 10.0s 10.2s average 10.10 4.158MB/s 27.7X 9.0 60X\n"
            "Broken 1G - 10 average 10 4.2\n"
            "Odd 1G - ten average 10 4.2 28 1 1\n")
    rep = import_text(text, fmt="table")
    assert [r.card.brand for r in rep.results] == ["Kingston Elite Pro", "NoName"]
    assert rep.results[0].card.label == "133x" and rep.results[0].test("cold_read") is None
    assert rep.flags == []
    assert [s.line for s in rep.skipped] == [3, 4]
    assert "3 to 5 figures" in rep.skipped[0].reason and "'ten'" in rep.skipped[1].reason


def test_legacy_csv_flags_and_columns(data_dir):
    rep = import_file(data_dir / "drawer_legacy.csv")
    assert rep.format == "csv" and len(rep.results) == 5
    assert [(f.line, f.figure, f.printed) for f in rep.flags] == [(5, "average write time (s)", "9.76")]
    assert rep.flags[0].difference == pytest.approx(9.76 - (9.6 + 9.7 + 9.7) / 3)
    assert rep.results[0].card.label == "4X" and rep.results[1].card.label is None
    assert [r.seconds for r in rep.results[0].test("seq_write").runs] == [41.2, 41.5, 41.6]
    assert rep.notes == []                                   # "Comment" is a known, ignored column


def test_a_quoted_field_across_lines_keeps_every_row_on_its_own_line(data_dir):
    # the records were paired with the file's lines one to one: after a comment that spans two
    # lines every later row, its flags and its raw text were named by the line above it
    rep = import_file(data_dir / "drawer_legacy_multiline.csv")
    assert [r.target["line"] for r in rep.results] == [2, 4, 5, 6, 7]
    assert [(f.line, f.row, f.figure) for f in rep.flags] == [(6, "Crucial 256M", "average write time (s)")]
    assert rep.results[0].test("seq_write").extra["raw"].endswith('"first card,\nbought at the fair"')
    assert rep.results[1].test("seq_write").extra["raw"].startswith("SanDisk,64M,")
    # and a header name with a line break in it is named on the one line of the refusal
    with pytest.raises(UsageError) as e:
        import_text('Brand,"Comment\n(free text)"\nLexar,ok\n', path="h.csv", fmt="csv")
    assert "\n" not in str(e.value) and "CSV header (Brand, Comment (free text))" in str(e.value)


def test_an_unclosed_quote_in_a_large_csv_is_one_line(data_dir, tmp_path):
    # a stray quote makes the rest of the file one field; past the csv module's 128 KiB limit that
    # ended in "internal error: Error: field larger than field limit"
    head, *rows = (data_dir / "drawer_legacy.csv").read_text().splitlines()
    big = tmp_path / "big.csv"
    big.write_text("\n".join([head, rows[0].replace("first card", '"first card'), *rows[1:] * 800]) + "\n")
    assert big.stat().st_size > 128 * 1024
    with pytest.raises(UsageError) as e:
        import_file(big)
    assert str(e.value) == (f"{big}: line 2: not CSV cardbench can read (field larger than field limit (131072); "
                            "an unclosed quote?); nothing imported")


def test_legacy_csv_variants(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("make;size_bytes;w1;w2;Read (MiB/s);read x;Colour\n"
                 "Acme;8MB;2.0;2.0;3.0;21.0;red\n"
                 "Zeta;8MB;;;;;blue\n")
    rep = import_file(p)
    assert rep.format == "csv"
    assert "ignored columns: Colour" in rep.notes
    acme = rep.results[0]
    assert acme.test("seq_write").runs[0].bytes == 8_000_000
    assert acme.test("cold_read").median_bytes_per_s == pytest.approx(3 * (1 << 20))
    assert rep.flags == []                                   # 3 MiB/s = 20.97X -> "21.0" is right
    assert [s.line for s in rep.skipped] == [3]
    bad = tmp_path / "bad.csv"
    bad.write_text("brand,capacity,colour\nAcme,8MB,red\n")
    with pytest.raises(UsageError, match="no write or read columns"):
        import_file(bad)


@pytest.mark.parametrize("header,role,number,unit", [
    ("Brand", "brand", None, "MB/s"), ("Manufacturer", "brand", None, "MB/s"), ("card_brand", "brand", None, "MB/s"),
    ("Capacity", "capacity", None, "MB/s"), ("card_capacity_bytes", "capacity", None, "MB/s"),
    ("Rated speed", "label", None, "MB/s"), ("Write 1 (s)", "write_time", 1, "MB/s"), ("w3", "write_time", 3, "MB/s"),
    ("time_2", "write_time", 2, "MB/s"), ("write_times_s", "write_times", None, "MB/s"),
    ("Avg write (s)", "write_avg", None, "MB/s"), ("Average (s)", "write_avg", None, "MB/s"),
    ("Write (MB/s)", "write_rate", None, "MB/s"), ("write_MiB_per_s", "write_rate", None, "MiB/s"),
    ("Write X", "write_x", None, "MB/s"), ("Read (X)", "read_x", None, "MB/s"), ("read_MB_per_s", "read_rate", None,
                                                                               "MB/s"),
    ("Read speed (kB/s)", "read_rate", None, "kB/s"), ("read 2", "read_time", 2, "MB/s"),
    ("File size", "file_size", None, "MB/s"), ("write_file_bytes", "file_size", None, "MB/s"),
    ("result_id", "ignore", None, "MB/s"), ("Colour", None, None, "MB/s"),
])
def test_csv_header_roles(header, role, number, unit):
    assert classify(header) == (role, number, unit)


def test_own_csv_export_reimports_without_flags(tmp_path):
    from cardbench_factories import make_result
    rs = [make_result(brand="Lexar", write_times=(41.2, 41.5, 41.6)),
          make_result(brand="SanDisk", write_times=(47.6, 47.8, 47.9), read_rate=1.9e6)]
    p = tmp_path / "export.csv"
    p.write_text(render(rs, "csv"))
    rep = import_file(p)
    assert rep.format == "csv" and rep.flags == [] and rep.skipped == []
    for orig, back in zip(rs, rep.results, strict=True):
        assert back.card.identity() == orig.card.identity()
        assert back.test("seq_write").median_bytes_per_s == pytest.approx(orig.test("seq_write").median_bytes_per_s)
        assert back.test("cold_read").median_bytes_per_s == pytest.approx(
            orig.test("cold_read").median_bytes_per_s, rel=1e-5)


def test_reimport_replaces_instead_of_doubling(data_dir, tmp_path):
    with open_store(tmp_path / "r.db") as s:
        import_file(data_dir / "drawer_classic.txt").save_to(s)
        import_file(data_dir / "drawer_classic.txt", file_size="42MB").save_to(s)
        assert s.count() == 9


def test_bad_inputs(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        import_file(tmp_path / "missing.txt")
    with pytest.raises(UsageError, match="is a directory"):
        import_file(tmp_path)
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(UsageError, match="is empty"):
        import_file(tmp_path / "empty.txt")
    (tmp_path / "bin.dat").write_bytes(b"\x00\xff\xfe" * 50)
    with pytest.raises(UsageError, match="not a text file"):
        import_file(tmp_path / "bin.dat")
    (tmp_path / "x.json").write_text('{"schema": "cardbench.results/1", "results": [')
    with pytest.raises(UsageError, match="cannot be parsed"):
        import_file(tmp_path / "x.json")
    (tmp_path / "y.json").write_text('{"hello": "world"}')
    with pytest.raises(UsageError, match="neither a cardbench export"):
        import_file(tmp_path / "y.json")
    (tmp_path / "z.json").write_text('{"schema": "cardbench.results/9", "results": []}')
    with pytest.raises(UsageError, match="written by a newer cardbench .'cardbench.results/9'.*upgrade"):
        import_file(tmp_path / "z.json")
    with pytest.raises(UsageError, match="unknown import format"):
        import_text("a b c", fmt="xls")


# --- the checker as a property: consistent rows pass, a slip beyond rounding is caught ----------

def _printed(value: float, decimals: int) -> Printed:
    return Printed.parse(f"{value:.{decimals}f}")


rows = st.fixed_dictionaries({
    "times": st.lists(st.floats(0.5, 500.0), min_size=1, max_size=5),
    "file_bytes": st.sampled_from([8_000_000, 16_000_000, 42_000_000, 44_040_192, 100_000_000]),
    "t_dec": st.integers(1, 3), "r_dec": st.integers(1, 4), "x_dec": st.integers(0, 2),
    "read_mbs": st.floats(0.5, 100.0), "read_dec": st.integers(1, 3),
})


def _make(row):
    times = [_printed(t, row["t_dec"]) for t in row["times"]]
    times = [t for t in times if t.value > 0] or [_printed(1.0, row["t_dec"])]
    mean = sum(t.value for t in times) / len(times)
    rate = row["file_bytes"] / mean
    read = _printed(row["read_mbs"], row["read_dec"])
    return dict(times=times, file_bytes=row["file_bytes"], avg=_printed(mean, 2),
                write_rate=_printed(rate / 1e6, row["r_dec"]), write_x=_printed(rate / 150_000, row["x_dec"]),
                read_rate=read, read_x=_printed(read.value / 0.15, row["x_dec"]))


@settings(max_examples=300, deadline=None)
@given(rows)
def test_consistent_rows_are_never_flagged(row):
    assert check_row(line=1, row="r", **_make(row)) == []


def _make_chained(row):
    """The same row computed as a person with a calculator does: each figure from the one printed
    before it (the average as printed -> MB/s as printed -> X)."""
    fig = _make(row)
    avg = fig["avg"]
    if avg.value <= 0:
        return fig
    rate = _printed(row["file_bytes"] / avg.value / 1e6, row["r_dec"])
    fig.update(write_rate=rate, write_x=_printed(rate.value / 0.15, row["x_dec"]),
               read_x=_printed(fig["read_rate"].value / 0.15, row["x_dec"]))
    return fig


@settings(max_examples=300, deadline=None)
@given(rows)
def test_rows_computed_from_printed_figures_are_never_errors(row):
    notes = []
    assert check_row(line=1, row="r", notes=notes, **_make_chained(row)) == []
    assert notes == []                        # the author's own arithmetic: not even a note


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(rows, st.sampled_from(["avg", "write_rate", "write_x", "read_x"]), st.floats(1.5, 20.0),
       st.sampled_from([-1, 1]))
def test_a_slip_is_flagged_and_named(row, field, size, sign):
    fig = _make(row)
    names = {"avg": "average write time (s)", "write_rate": "write MB/s", "write_x": "write X", "read_x": "read X"}
    clean = check_row(line=1, row="r", **fig)
    assert clean == []
    # move the figure by `size` times the widest rounding allowance, away from its true value
    orig: Printed = fig[field]
    n_times = len(fig["times"])
    mean = sum(t.value for t in fig["times"]) / n_times
    h_t = sum(t.half_unit for t in fig["times"]) / n_times
    # the widest of the two routes: from the unrounded times, and from the printed figure it is
    # computed from (the author's arithmetic: printed average -> MB/s -> X), each with its rounding
    if field == "avg":
        allow = orig.half_unit + h_t
    elif field in ("write_rate", "write_x"):
        unit = 1e6 if field == "write_rate" else 150_000
        raw = (fig["file_bytes"] / (mean - h_t) - fig["file_bytes"] / mean) / unit
        if field == "write_rate":
            avg = fig["avg"]
            chain = (fig["file_bytes"] / avg.lo - fig["file_bytes"] / avg.value) / unit if avg.lo > 0 else raw
        else:
            chain = fig["write_rate"].half_unit * 1e6 / unit
        allow = orig.half_unit + max(raw, chain)
    else:
        allow = orig.half_unit + fig["read_rate"].half_unit / 0.15
    target = orig.value + sign * size * allow * 2 + sign * orig.half_unit * 2
    if target <= 0:
        return
    decimals = len(orig.text.split(".")[1]) if "." in orig.text else 0
    fig[field] = _printed(target, decimals)
    flags = check_row(line=1, row="r", **fig)
    assert [f.figure for f in flags] == [names[field]]
    assert abs(flags[0].difference) > flags[0].tolerance


# --- issue 25: the audit follows the author's arithmetic ---------------------------------------

_TIMES = [("Acme", "32M", "2X", (20.1, 20.3, 20.25)), ("Bolt", "64M", "-", (10.0, 10.2, 10.2)),
          ("Cask", "128M", "4X", (8.4, 8.55, 8.6, 8.45)), ("Dune", "256M", "-", (5.0, 5.15, 5.2)),
          ("Echo", "512M", "12X", (3.98, 4.1, 4.07)), ("Fern", "1G", "-", (2.51, 2.49, 2.53))]
_READS = (5.13, 6.04, 6.61, 9.02, 9.87, 12.04)


def _survey(chained: bool, file_bytes: int = 42_000_000, slip: tuple[int, str, str] | None = None) -> str:
    """A 2006-layout table: figures from the printed ones (the author's chain: the average printed
    with 2 decimals, MB/s from it with 3, X from that MB/s with 2) or from the unrounded ones."""
    lines = []
    for n, ((brand, cap, label, times), read) in enumerate(zip(_TIMES, _READS, strict=True)):
        mean = sum(times) / len(times)
        avg = f"{mean:.2f}"
        rate = file_bytes / (float(avg) if chained else mean) / 1e6
        mbs = f"{rate:.3f}"
        x = f"{(float(mbs) if chained else rate) * 1e6 / 150_000:.2f}"
        rd = f"{read:.1f}"
        rx = f"{(float(rd) if chained else read) / 0.15:.0f}"
        fields = {"avg": avg, "mbs": mbs, "x": x, "rx": rx}
        if slip and slip[0] == n:
            fields[slip[1]] = slip[2]
        lines.append(f"{brand} {cap} {label} {' '.join(f'{t:.3f}' for t in times)} average {fields['avg']} "
                     f"{fields['mbs']} MB/s write {fields['x']}X write {rd} MB/s read {fields['rx']}X")
    return "\n".join(lines) + "\n"


def test_rounding_chains_are_not_errors_built_either_way():
    for chained in (True, False):
        text = _survey(chained)
        rep = import_text(text, fmt="table", file_size="42MB")
        assert len(rep.results) == 6
        assert rep.flags == [], (chained, [str(f) for f in rep.flags])
        assert "audit: each figure checked against the printed figure it is computed from" in " ".join(rep.lines())
    # the chained table is what the old audit (every figure against the unrounded times) cried wolf at
    chained = import_text(_survey(True), fmt="table", file_size="42MB")
    assert chained.audit_notes == []
    unrounded = import_text(_survey(False), fmt="table", file_size="42MB")
    assert all(n.severity == "note" for n in unrounded.audit_notes)


def test_one_slip_is_one_error_line_with_its_size(tmp_path, capsys):
    from cardbench.cli import main
    text = _survey(True, slip=(1, "mbs", "4.416"))          # Bolt's 4.146 MB/s typed as 4.416
    rep = import_text(text, fmt="table", file_size="42MB")
    assert [(f.line, f.figure, f.printed) for f in rep.flags] == [(2, "write MB/s", "4.416")]
    assert rep.flags[0].percent == pytest.approx((4.416 / (42 / 10.13) - 1) * 100)
    # its X, computed from the right rate, is at most a note
    assert [(n.line, n.figure) for n in rep.audit_notes] == [(2, "write X")]
    p = tmp_path / "survey.txt"
    p.write_text(text)
    capsys.readouterr()
    main(["import", str(p), "--file-size", "42MB", "--dry-run"])
    out = capsys.readouterr().out
    errors = [ln for ln in out.splitlines() if ln.lstrip().startswith("ERROR")]
    assert len(errors) == 1 and "line 2 (Bolt 64M): write MB/s printed 4.416" in errors[0]
    assert "+6.5%" in " ".join(out.split())
    assert out.splitlines()[1].startswith("1 figure disagrees")      # the error leads the report
    # a wrong average: one error, its MB/s and X (computed from the right mean) are not errors
    rep = import_text(_survey(True, slip=(3, "avg", "5.33")), fmt="table", file_size="42MB")
    assert [(f.line, f.figure) for f in rep.flags] == [(4, "average write time (s)")]


def test_read_figures_follow_the_same_chain(tmp_path):
    """A CSV that prints read times: read MB/s from them, read X from that printed read MB/s."""
    p = tmp_path / "reads.csv"
    p.write_text("brand,capacity,w1,w2,write_rate,r1,r2,read_rate,read_x\n"
                 "Acme,64MB,10.0,10.2,4.158,4.000,4.100,10.370,69.13\n"       # X from the printed 10.370
                 "Bolt,64MB,10.0,10.2,4.158,4.000,4.100,11.370,69.14\n")      # read MB/s typed 11.370
    rep = import_file(p, file_size="42MB")
    assert [(f.line, f.figure, f.printed) for f in rep.flags] == [(3, "read MB/s", "11.370")]
    assert rep.flags[0].percent == pytest.approx((11.370 / (42 / 4.05) - 1) * 100)
    assert [(n.line, n.figure) for n in rep.audit_notes] == [(3, "read X")]     # computed before the typo
